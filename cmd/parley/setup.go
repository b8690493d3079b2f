package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/migrations"
	"github.com/parleyd/parley/vault"
)

// loadConfig reads the config named by the flag, $PARLEY_CONFIG or
// ./parley.yaml, or returns the defaults when there is none.
func loadConfig(path string) (*config.Config, string, error) {
	cfg, used, err := config.LoadOrDefault(path)
	return configLoaded(cfg, used, err)
}

// loadConfigFor is loadConfig for a command that uses only the keys named
// (see config.LoadOrDefaultFor): an admin command that needs the database
// works in a shell without, say, the daemon's API token exported.
func loadConfigFor(path string, keys ...string) (*config.Config, string, error) {
	cfg, used, err := config.LoadOrDefaultFor(path, keys...)
	return configLoaded(cfg, used, err)
}

func configLoaded(cfg *config.Config, used string, err error) (*config.Config, string, error) {
	if err != nil {
		if _, ok := err.(config.Problems); ok {
			return nil, used, fmt.Errorf("config %s has problems:\n%w\nfix them and run \"parley config check\" again", config.DisplayPath(used), err)
		}
		return nil, used, err
	}
	return cfg, used, nil
}

func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "config file (default: $PARLEY_CONFIG, then ./parley.yaml, then built-in defaults)")
}

// cmdFlags is a command's flag set with the --config flag most commands
// take. Once parsed, Args and Arg are its positional arguments.
type cmdFlags struct {
	*flag.FlagSet
	config *string
	args   []string
	used   string // the config file load read, "" for the defaults
}

// newFlags is the flag set of the command name ("cron add").
func newFlags(name string) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return &cmdFlags{FlagSet: fs, config: configFlag(fs)}
}

// parse parses args as parseFlags does; want is how many positionals the
// command takes (-1: any).
func (f *cmdFlags) parse(args []string, want int) error {
	var err error
	f.args, err = parseFlags(f.FlagSet, args, want)
	return err
}

func (f *cmdFlags) Args() []string { return f.args }

func (f *cmdFlags) Arg(i int) string {
	if i < 0 || i >= len(f.args) {
		return ""
	}
	return f.args[i]
}

// load parses args, then loads the config --config names: all of it, or
// with keys, only what the keys name must be valid (see loadConfigFor).
func (f *cmdFlags) load(args []string, want int, keys ...string) (*config.Config, error) {
	if err := f.parse(args, want); err != nil {
		return nil, err
	}
	var cfg *config.Config
	var err error
	if len(keys) == 0 {
		cfg, f.used, err = loadConfig(*f.config)
	} else {
		cfg, f.used, err = loadConfigFor(*f.config, keys...)
	}
	return cfg, err
}

// open parses args, then loads the config and opens its existing
// database, for a command that works beside a running daemon. Only the
// database settings and the keys named must be valid.
func (f *cmdFlags) open(ctx context.Context, args []string, want int, keys ...string) (*config.Config, *dbutil.DB, error) {
	if err := f.parse(args, want); err != nil {
		return nil, nil, err
	}
	return openConfigured(ctx, *f.config, keys...)
}

func newLogger(w io.Writer, c config.Log) *slog.Logger {
	var level slog.Level
	switch strings.ToLower(c.Level) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: logVocabulary}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logFields are the log's one vocabulary, whatever name a part of the
// code gives a field: session, run, agent, channel, replica, beside
// component (the part that logs) and ref (the reference a person is given
// for an error).
var logFields = map[string]string{
	"session_id": "session", "run_id": "run", "agent_id": "agent", "adapter": "channel", "adapter_id": "channel", "replica_id": "replica",
}

// logVocabulary renames a record's top-level fields to logFields'.
func logVocabulary(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 {
		if name, ok := logFields[a.Key]; ok {
			a.Key = name
		}
	}
	return a
}

// openExisting opens the configured database for a command that only reads:
// it changes nothing, and says so when the database is missing or its
// schema is not the one this binary knows.
func openExisting(ctx context.Context, cfg *config.Config) (*dbutil.DB, error) {
	if t, err := dbutil.ParseURL(cfg.Database.URL.Reveal()); err == nil && t.Dialect == dbutil.SQLite {
		if _, err := os.Stat(t.Path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s yet; start \"parley run\" or run \"parley migrate\" to create it, or check database.url", t.Path)
		}
	}
	db, err := daemon.Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := migrations.Check(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// openConfigured loads the config at path and opens its existing database,
// for commands that work beside a running daemon. Only the database
// settings and the keys named must be valid.
func openConfigured(ctx context.Context, path string, keys ...string) (*config.Config, *dbutil.DB, error) {
	cfg, _, err := loadConfigFor(path, append([]string{"database"}, keys...)...)
	if err != nil {
		return nil, nil, err
	}
	db, err := openExisting(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

// localDaemon parses args, loads the config and makes the daemon of it
// with no channels, for a command that does one job in process.
func (f *cmdFlags) localDaemon(ctx context.Context, args []string, want int, stderr io.Writer) (*daemon.Daemon, error) {
	cfg, err := f.load(args, want)
	if err != nil {
		return nil, err
	}
	return daemon.New(ctx, cfg, newLogger(stderr, cfg.Log), daemon.WithChannels(nil))
}

// resolveSecrets replaces cfg's ${secret:NAME} values with the stored
// secrets, for a command that uses them without a daemon (parley mcp ls).
func resolveSecrets(ctx context.Context, cfg *config.Config) error {
	if len(cfg.SecretRefs()) == 0 {
		return nil
	}
	v, db, err := openVault(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer db.Close()
	return v.ResolveConfig(ctx, cfg)
}

// openVault opens cfg's existing database and the secrets store in it;
// closing the database closes the store.
func openVault(ctx context.Context, cfg *config.Config, write bool) (*vault.Store, *dbutil.DB, error) {
	var db *dbutil.DB
	var err error
	if write {
		// A secret set before the first parley run finds the schema made,
		// as run would make it.
		db, _, err = daemon.OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	} else {
		db, err = openExisting(ctx, cfg)
	}
	if err != nil {
		return nil, nil, err
	}
	v, err := vault.Open(db, cfg.Secrets.KeyFile)
	if err == nil && write {
		err = v.CheckKey(ctx)
	}
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return v, db, nil
}
