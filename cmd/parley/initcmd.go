package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/doctor"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/llm"
)

// setup is what parley init asks, and writes.
type setup struct {
	path, database, listen    string
	apiToken, callbackSecret  string
	hookSecret                string
	telegramToken, tgEndpoint string
	telegramBot               string // what getMe said
	discordToken              string
	whatsapp                  bool
	provider, apiKey, baseURL string
	model                     string
	compatible                bool // an OpenAI-compatible server at baseURL
}

// cmdInit is a guided first run: it asks which channels and which model
// provider to set up, checks each token and key as it is entered, writes a
// config with random secrets, and says what to do next.
func cmdInit(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	path := fs.String("config", "parley.yaml", "the config file to write")
	yes := fs.Bool("yes", false, "ask nothing: take the flags and the defaults (for scripts)")
	force := fs.Bool("force", false, "overwrite the config file if it exists")
	s := setup{}
	fs.StringVar(&s.listen, "listen", "127.0.0.1:8080", "the address of the API, the web chat and the webhooks")
	fs.StringVar(&s.database, "database", "data/parley.db", "a SQLite file, or a postgres:// URL")
	fs.StringVar(&s.telegramToken, "telegram-token", "", "a Telegram bot token from @BotFather")
	fs.StringVar(&s.tgEndpoint, "telegram-api-endpoint", "", "a Telegram Bot API server other than api.telegram.org (a local one)")
	fs.StringVar(&s.discordToken, "discord-token", "", "a Discord bot token from the Developer Portal")
	fs.BoolVar(&s.whatsapp, "whatsapp", false, "add a WhatsApp channel (link it with parley whatsapp link)")
	// The providers registered (llm.Register), each with its key's
	// variable and a small model of its own; "compatible" is an
	// OpenAI-compatible server.
	providers := llm.Registered()
	var names, keyEnvs []string
	for _, p := range providers {
		names = append(names, p.Name)
		if p.KeyEnv != "" {
			keyEnvs = append(keyEnvs, "$"+p.KeyEnv)
		}
	}
	choices := strings.Join(names, ", ") + ", compatible or echo"
	fs.StringVar(&s.provider, "provider", "", "the model provider: "+strings.Join(names, ", ")+", compatible (an OpenAI-compatible server at --base-url: Ollama, LM Studio, vLLM) or echo (offline; default when no key is given)")
	fs.StringVar(&s.apiKey, "api-key", "", "the provider's API key (default: "+strings.Join(keyEnvs, " or ")+")")
	fs.StringVar(&s.baseURL, "base-url", "", "an OpenAI-compatible server instead of the provider's (Ollama: http://localhost:11434/v1)")
	fs.StringVar(&s.model, "model", "", "the model, e.g. gpt-4o-mini or claude-sonnet-4-5 (default: the provider's small one)")
	skipChecks := fs.Bool("no-check", false, "don't check the tokens and the key online")
	if _, err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	s.path = *path
	if _, err := os.Stat(s.path); err == nil && !*force {
		return fmt.Errorf("%s exists; run with --force to overwrite it, or --config to write another file", s.path)
	}
	var err error
	for _, v := range []*string{&s.apiToken, &s.callbackSecret, &s.hookSecret} {
		if *v, err = randomSecret(); err != nil {
			return err
		}
	}
	in := &asker{r: bufio.NewReader(stdin), w: stdout, file: stdin}
	if !*yes {
		fmt.Fprintln(stdout, "parley init: a few questions, then a config file. Press Enter to take the [default].")
		s.listen = in.ask("Address for the API, web chat and webhooks", s.listen)
		s.database = in.ask("Database (a SQLite file, or a postgres:// URL)", s.database)
	}
	check := func(what string, fn func() (string, error)) error {
		if *skipChecks {
			return nil
		}
		fmt.Fprintf(stdout, "checking %s... ", what)
		who, err := fn()
		if err != nil {
			fmt.Fprintln(stdout, "no")
			return err
		}
		fmt.Fprintln(stdout, "ok", who)
		return nil
	}
	// channelToken asks for a channel's token until it checks out or is
	// skipped, and returns who the channel says the bot is.
	channelToken := func(channel, name, prompt string, token *string) (string, error) {
		for first := true; ; first = false {
			if !*yes {
				*token = in.secret(prompt, *token, first)
			}
			if *token == "" {
				return "", nil
			}
			var who string
			err := check("the "+name+" token", func() (string, error) {
				var err error
				who, err = doctor.CheckChannel(ctx, s.partial(), channel)
				return who, err
			})
			if err == nil {
				return who, nil
			}
			if *yes {
				return "", fmt.Errorf("%s: %w", channel, err)
			}
			fmt.Fprintf(stdout, "  %v\n", err)
			if in.yesNo("Keep this token anyway, and check it later with parley doctor?", false) {
				return "", nil
			}
			*token = ""
		}
	}
	if s.telegramBot, err = channelToken("telegram", "Telegram", "Telegram bot token from @BotFather (Enter to skip)", &s.telegramToken); err != nil {
		return err
	}
	if _, err := channelToken("discord", "Discord", "Discord bot token (Enter to skip)", &s.discordToken); err != nil {
		return err
	}
	linkNow := false
	if !*yes {
		s.whatsapp = in.yesNo("Set up WhatsApp (link a phone by QR code)?", s.whatsapp)
		if s.whatsapp {
			linkNow = in.yesNo("Link it now?", true)
		}
	}
	// The model.
	if s.provider == "" {
		s.provider = "echo"
		if s.baseURL != "" {
			s.provider = "openai"
		}
		for _, p := range providers {
			if p.KeyEnv != "" && os.Getenv(p.KeyEnv) != "" && s.provider == "echo" {
				s.provider = p.Name
			}
		}
	}
	for first := true; ; first = false {
		if !*yes {
			s.provider = in.ask("Model provider: "+strings.Join(names, ", ")+", compatible (an OpenAI-compatible server: Ollama, LM Studio, vLLM), or echo (offline, repeats what it's told)", s.provider)
		}
		if s.provider == "echo" {
			break
		}
		if s.provider == "compatible" || s.provider == "openai-compatible" {
			s.provider, s.compatible = "openai", true
		}
		provider, known := llm.Lookup(s.provider)
		if !known {
			if *yes {
				return fmt.Errorf("%w: --provider %q; use %s", errUsage, s.provider, choices)
			}
			fmt.Fprintf(stdout, "  %s, please\n", choices)
			continue
		}
		if s.compatible {
			if err := s.askServer(ctx, in, stdout, *yes, first); err != nil {
				if *yes {
					return err
				}
				fmt.Fprintf(stdout, "  %v\n", err)
				continue
			}
		} else {
			if s.apiKey == "" && provider.KeyEnv != "" {
				s.apiKey = os.Getenv(provider.KeyEnv)
			}
			if s.model == "" {
				s.model = provider.SmallModel
			}
			if !*yes {
				s.apiKey = in.secret("API key", s.apiKey, first)
				s.model = in.ask("Model", s.model)
			}
			if s.apiKey == "" && s.baseURL == "" {
				if *yes {
					return fmt.Errorf("%w: --provider %s needs --api-key (or $%s), or --base-url", errUsage, s.provider, cmp.Or(provider.KeyEnv, strings.ToUpper(s.provider)+"_API_KEY"))
				}
				fmt.Fprintln(stdout, "  an API key is needed (or answer echo)")
				continue
			}
		}
		what := "the key"
		if s.compatible {
			what = "the server"
		}
		err := check(what+" with a one-token call of "+s.model, func() (string, error) {
			return "", doctor.CheckAgentModel(ctx, s.partial(), "default")
		})
		if err == nil {
			break
		}
		if *yes {
			return fmt.Errorf("%s: %w", s.provider, err)
		}
		fmt.Fprintf(stdout, "  %v\n", err)
		if in.yesNo("Keep these answers anyway, and check them later with parley doctor?", false) {
			break
		}
		s.apiKey = ""
	}

	if err := s.write(); err != nil {
		return err
	}
	// What was written is what parley run will read.
	cfg, err := config.Load(s.path)
	if err == nil {
		err = daemon.Check(cfg)
	}
	if err != nil {
		return fmt.Errorf("the config written to %s has problems (please report this):\n%w", s.path, err)
	}
	fmt.Fprintf(stdout, "\nWrote %s (readable by you only: it holds the tokens).\n", s.path)
	if linkNow {
		if err := cmdWhatsApp(ctx, []string{"link", "--config", s.path}, stdout, stderr); err != nil {
			fmt.Fprintf(stdout, "WhatsApp isn't linked yet (%v); run parley whatsapp link --config %s\n", err, s.path)
		}
	}
	s.nextSteps(stdout, linkNow)
	return nil
}

// askServer asks for an OpenAI-compatible server's base URL, its key (if
// it takes one) and a model from those it lists at GET /models.
func (s *setup) askServer(ctx context.Context, in *asker, stdout io.Writer, yes, first bool) error {
	if !yes {
		fmt.Fprintln(stdout, "  Ollama listens at http://localhost:11434/v1, LM Studio at http://localhost:1234/v1, vLLM at http://localhost:8000/v1")
		s.baseURL = in.ask("The server's base URL", cmpOr(s.baseURL, "http://localhost:11434/v1"))
		s.apiKey = in.secret("Its API key (Enter for none)", s.apiKey, first)
	}
	if s.baseURL == "" {
		return fmt.Errorf("%w: --provider compatible needs --base-url, the server's address, such as http://localhost:11434/v1", errUsage)
	}
	models, err := llm.ListModels(ctx, s.baseURL, s.apiKey)
	switch {
	case err != nil:
		fmt.Fprintf(stdout, "  couldn't list the server's models: %v\n", err)
	case len(models) == 0:
		fmt.Fprintln(stdout, "  the server lists no models; pull one first (ollama pull llama3.2), or name it below")
	default:
		if s.model == "" {
			s.model = models[0]
		}
		if !yes {
			fmt.Fprintln(stdout, "  The server's models:")
			for i, m := range models {
				fmt.Fprintf(stdout, "    %d. %s\n", i+1, m)
			}
		}
	}
	if !yes {
		answer := in.ask("Model (its number or its name)", s.model)
		if n, err := strconv.Atoi(answer); err == nil && n >= 1 && n <= len(models) {
			answer = models[n-1]
		}
		s.model = answer
	}
	if s.model == "" {
		return fmt.Errorf("%w: no model: name one with --model", errUsage)
	}
	return nil
}

// partial is the config as answered so far, for checking what was entered.
func (s *setup) partial() *config.Config {
	cfg, err := config.Parse([]byte(s.yaml()), s.path, func(string) (string, bool) { return "", false })
	if err != nil {
		// The answers make a config the loader reports on; the checks
		// then say what is missing.
		cfg = config.Default()
	}
	return cfg
}

// yaml is the config file.
func (s *setup) yaml() string {
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "# parley's config, written by parley init on %s.\n# config.example.yaml documents every key; parley doctor checks it all.\n\n", time.Now().Format(time.DateOnly))
	fmt.Fprintf(&b, "database:\n  url: %s\n\n", q(s.database))
	fmt.Fprintf(&b, "http:\n  listen: %s\n", q(s.listen))
	fmt.Fprintf(&b, "  # The API's and the web chat's token. Keep it secret.\n  tokens: [%s]\n", q(s.apiToken))
	fmt.Fprintf(&b, "  # Signs the reply callbacks POSTed to API sessions' webhook_url.\n  callback_secret: %s\n\n", q(s.callbackSecret))
	if _, known := llm.Lookup(s.provider); known {
		fmt.Fprintf(&b, "providers:\n  %s:\n", s.provider)
		if s.apiKey != "" {
			fmt.Fprintf(&b, "    api_key: %s\n", q(s.apiKey))
		}
		if s.baseURL != "" {
			fmt.Fprintf(&b, "    base_url: %s\n", q(s.baseURL))
		}
		fmt.Fprintf(&b, "\nagents:\n  - id: default\n    model: %s\n\n", q(s.provider+"/"+s.model))
	} else {
		fmt.Fprintf(&b, "agents:\n  - id: default\n    # echo answers offline by repeating the message; set a provider to talk to a model.\n    model: echo\n\n")
	}
	if s.telegramToken != "" || s.discordToken != "" || s.whatsapp {
		b.WriteString("# In direct chats, strangers get a pairing code an operator approves\n# (parley pairing approve CODE).\nadapters:\n")
	}
	if s.telegramToken != "" {
		fmt.Fprintf(&b, "  - id: telegram\n    type: telegram\n    token: %s\n    dm_policy: pairing\n", q(s.telegramToken))
		if s.tgEndpoint != "" {
			fmt.Fprintf(&b, "    api_endpoint: %s\n", q(s.tgEndpoint))
		}
	}
	if s.discordToken != "" {
		fmt.Fprintf(&b, "  - id: discord\n    type: discord\n    token: %s\n    dm_policy: pairing\n", q(s.discordToken))
	}
	if s.whatsapp {
		b.WriteString("  - id: whatsapp\n    type: whatsapp\n    dm_policy: pairing\n")
	}
	fmt.Fprintf(&b, "\n# An incoming webhook, signed with this secret (uncomment to use):\n# hooks:\n#   - id: ci\n#     auth: hmac\n#     secret: %s\n#     prompt: \"CI failed on {{.repository}}: {{.message}}. Say what probably broke.\"\n", q(s.hookSecret))
	return b.String()
}

// write writes the config, readable by its owner only, and its directory.
func (s *setup) write() error {
	if dir := filepath.Dir(s.path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.yaml()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	return nil
}

func (s *setup) nextSteps(w io.Writer, linked bool) {
	fmt.Fprintf(w, "\nNext:\n  1. Start it:      parley run --config %s\n", s.path)
	fmt.Fprintf(w, "  2. Web chat:      %s/#token=%s\n", httpserve.LocalURL(s.listen), s.apiToken)
	fmt.Fprintf(w, "     Dashboard:     %s/admin (sign in with the same token)\n", httpserve.LocalURL(s.listen))
	n := 3
	if s.telegramToken != "" {
		fmt.Fprintf(w, "  %d. Telegram:      message %s; it answers with a pairing code, which you approve with\n                    parley pairing ls --config %s  and  parley pairing approve CODE --config %s\n", n, cmpOr(s.telegramBot, "your bot"), s.path, s.path)
		n++
	}
	if s.discordToken != "" {
		fmt.Fprintf(w, "  %d. Discord:       invite the bot to a server or message it; approve pairing codes as above\n", n)
		n++
	}
	if s.whatsapp && !linked {
		fmt.Fprintf(w, "  %d. WhatsApp:      parley whatsapp link --config %s\n", n, s.path)
		n++
	}
	fmt.Fprintf(w, "  %d. Check it all:  parley doctor --config %s\n", n, s.path)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// randomSecret is 32 random bytes, URL-safe.
func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// asker asks questions on a terminal or a script's input.
type asker struct {
	r    *bufio.Reader
	w    io.Writer
	file io.Reader
}

func (a *asker) line() string {
	s, err := a.r.ReadString('\n')
	if err != nil && errors.Is(err, io.EOF) && s == "" {
		return ""
	}
	return strings.TrimSpace(s)
}

// ask asks a question with a default.
func (a *asker) ask(q, def string) string {
	if def != "" {
		fmt.Fprintf(a.w, "%s [%s]: ", q, def)
	} else {
		fmt.Fprintf(a.w, "%s: ", q)
	}
	if v := a.line(); v != "" {
		return v
	}
	return def
}

// secret asks for a token without echoing it on a terminal; a value given
// by flag is kept on the first asking.
func (a *asker) secret(q, def string, first bool) string {
	if def != "" && first {
		return def
	}
	fmt.Fprintf(a.w, "%s: ", q)
	if f, ok := a.file.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.w)
		if err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return a.line()
}

func (a *asker) yesNo(q string, def bool) bool {
	d := "y/N"
	if def {
		d = "Y/n"
	}
	fmt.Fprintf(a.w, "%s [%s]: ", q, d)
	switch strings.ToLower(a.line()) {
	case "y", "yes":
		return true
	case "n", "no":
		return false
	}
	return def
}
