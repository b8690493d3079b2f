package daemon

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/parleyd/parley/clienttools"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/sessionsql"
	"github.com/parleyd/parley/skills"
	"github.com/parleyd/parley/tools"
)

// sessionTools are the parts behind session storage and client tools.
type sessionTools struct {
	// kv is session storage (the kv_* tools and the API's /kv routes).
	kv *kv.Store
	// files is the session file store (the file_* tools, the API's /files
	// routes, files kept with messages and sent back).
	files *files.Store
	// sql keeps each session's own SQL database.
	sql *sessionsql.Store
	// clientTools keeps API sessions' declared tools and their calls.
	clientTools *clienttools.Hub
	// toolTaken says a name is one of parley's tools, which a client tool
	// may not take.
	toolTaken func(name string) bool
}

// openSessionTools builds session storage and the client tools' hub on the
// database, and says which configured skills folders are missing.
func (d *Daemon) openSessionTools(cfg *config.Config, reg *tools.Registry) {
	d.kv = kv.NewStore(d.db, kv.WithLogger(d.named("kv")))
	d.files = files.NewStore(d.db, files.Limits{}, d.named("files"))
	d.sql = sessionsql.NewStore(d.db, sessionsql.Limits{})
	d.clientTools = clienttools.New(d.db, clienttools.Options{})
	d.applySessionTools(cfg)
	d.toolTaken = func(name string) bool {
		_, ok := reg.Tool(name)
		return ok || name == skills.ToolName || strings.Contains(name, mcptools.Sep)
	}
	for _, dir := range cfg.Skills.Dirs {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("a skills folder does not exist; its agents have no skills from it until it does", "dir", dir)
		}
	}
}

// applySessionTools sets the limits and the timeout cfg gives, at start and
// on a reload.
func (d *Daemon) applySessionTools(cfg *config.Config) {
	s := cfg.Sessions
	d.kv.SetLimits(kv.Limits{MaxValueBytes: s.KV.MaxValueBytes, MaxSessionBytes: s.KV.MaxSessionBytes, MaxKeys: s.KV.MaxKeys})
	d.clientTools.SetTimeout(s.ClientTools.Timeout.Std())
	d.files.SetLimits(files.Limits{MaxFileBytes: s.Files.MaxFileBytes, MaxSessionBytes: s.Files.MaxSessionBytes, MaxTotalBytes: s.Files.MaxTotalBytes})
	d.sql.SetLimits(sessionsql.Limits{MaxBytes: s.SQL.MaxBytes, MaxRows: s.SQL.MaxRows, Timeout: s.SQL.StatementTimeout.Std()})
}
