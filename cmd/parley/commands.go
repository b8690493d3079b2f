package main

import (
	"context"
	"io"
)

// streams are a command's standard input and outputs.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// A command is one line of parley's command table, the one place its
// usage, help, examples and shell completion come from.
type command struct {
	name     string
	args     string // what follows the name in the usage line
	summary  string // one line, for lists
	about    string // what it does, for its help
	examples []string
	subs     []*command // a group's subcommands
	// run runs the command; a group's gets its arguments with the
	// subcommand first.
	run func(ctx context.Context, s streams, args []string) error
}

// commandTable is every command, in the order `parley help` lists them.
// It is filled in init, since help and completion read it.
var commandTable []*command

func init() {
	commandTable = []*command{
		{name: "init", args: "[--yes] [flags]", summary: "set parley up: write a config, checking each token",
			about: "A guided first run: asks which channels to set up (Telegram, Discord, WhatsApp) and which model provider, checks each token and key as it is entered " +
				"(Telegram getMe, Discord's bot user, a one-token call of the model), writes the config with random API token, callback and hook secrets " +
				"(mode 0600), and prints the next steps. With --yes it asks nothing and takes the flags.",
			examples: []string{"parley init", "parley init --yes --telegram-token $TELEGRAM_BOT_TOKEN --provider openai --api-key $OPENAI_API_KEY",
				"parley init --yes --provider openai --base-url http://localhost:11434/v1 --model llama3.2 --config /etc/parley/parley.yaml"},
			run: func(ctx context.Context, s streams, args []string) error {
				return cmdInit(ctx, args, s.in, s.out, s.err)
			}},
		{name: "run", args: "[--config FILE]", summary: "start the daemon",
			about: "Starts parley: the configured channels, cron, webhooks, the HTTP API and the web chat, on the configured database. " +
				"It runs until SIGINT or SIGTERM, then stops accepting, finishes the turns in flight and sends their replies.",
			examples: []string{"parley run", "parley run --config /etc/parley/parley.yaml", "PARLEY_CONFIG=parley.yaml parley run"},
			run:      func(ctx context.Context, s streams, args []string) error { return cmdRun(ctx, args, s.err) }},
		{name: "chat", args: "[--config FILE] | --server URL [--token T]", summary: "talk to an agent in this terminal",
			about: "Talks to the default agent in the session cli:chat, kept across runs: in process on the configured database, " +
				"or, with --server (or when a daemon holds the database), through a running parley's HTTP API. /help lists the chat commands.",
			examples: []string{"parley chat", "parley chat --server 127.0.0.1:8080 --token $PARLEY_API_TOKEN"},
			run: func(ctx context.Context, s streams, args []string) error {
				return cmdChat(ctx, args, s.in, s.out, s.err)
			}},
		{name: "ask", args: "[flags] QUESTION...", summary: "ask one question and print the answer",
			about: "Answers once in a fresh session (cli:run:<time>) and exits: through a running daemon's API when one runs on this config, " +
				"else in process. The question is the arguments, or standard input when there are none (or \"-\"). Exits 1 if the turn failed.",
			examples: []string{`parley ask "What is the capital of Peru?"`, "git diff | parley ask --json", `parley ask --server 10.0.0.5:8080 --token $TOKEN "status of the build?"`},
			run: func(ctx context.Context, s streams, args []string) error {
				return cmdAsk(ctx, args, s.in, s.out, s.err)
			}},
		{name: "status", args: "[--server ADDR] [--token T] [--json]", summary: "a running daemon's live state",
			about: "Asks the daemon running on this config (its run file records its address) for its channels and their health, busy lanes and queued messages, " +
				"runs in progress, the outbox backlog and cron jobs' next fires. Needs an API token (http.tokens).",
			examples: []string{"parley status", "parley status --json | jq .outbox"},
			run:      func(ctx context.Context, s streams, args []string) error { return cmdStatus(ctx, args, s.out) }},
		{name: "doctor", args: "[--config FILE] [--json]", summary: "check everything parley needs, and say what to fix",
			about: "Checks the config, the database (reachable, schema version, free space for SQLite), each provider key (a one-token call of an agent's model), " +
				"each channel's token (and, for a Telegram webhook, whether Telegram reaches it), and the clock. Each finding says what is wrong and what to do; exits 1 if any failed.",
			examples: []string{"parley doctor", "parley doctor --config /etc/parley/parley.yaml --json"},
			run:      func(ctx context.Context, s streams, args []string) error { return cmdDoctor(ctx, args, s.out) }},
		{name: "reload", args: "[--config FILE] [--token T]", summary: "make the running daemon read its config again",
			about: "Sends SIGHUP to the daemon running on this config. Agents, bindings, access lists, cron jobs and hooks change at once; " +
				"what only a restart changes (the database, listen addresses, channels and their tokens, API tokens, providers) is named in its log. " +
				"A config with problems changes nothing. With an API token it waits and says how it went.",
			examples: []string{"parley reload", "systemctl reload parley"},
			run:      func(ctx context.Context, s streams, args []string) error { return cmdReload(ctx, args, s.out) }},
		{name: "healthcheck", args: "[--config FILE] [--url ADDR]", summary: "exit 0 if the running daemon is ready",
			about:    "GETs /readyz of the daemon on this config (http.ops_listen, else http.listen): a container's HEALTHCHECK, which has no curl.",
			examples: []string{"parley healthcheck", "parley healthcheck --url 127.0.0.1:9090"},
			run:      func(ctx context.Context, s streams, args []string) error { return cmdHealthcheck(ctx, args, s.out) }},
		{name: "config", summary: "check the configuration", subs: []*command{
			{name: "check", args: "[--config FILE]", summary: "report every problem parley run would refuse",
				about:    "Reads the config as parley run does and lists every problem at its line, with what to do; exits 1 if there is any.",
				examples: []string{"parley config check --config parley.yaml"}},
			{name: "print", args: "[--config FILE]", summary: "print the effective config, secrets redacted",
				about:    "Prints the config parley run would use, defaults filled in and ${VAR} expanded, as YAML; tokens, keys and database passwords print as [redacted].",
				examples: []string{"parley config print", "parley config print --config parley.yaml > effective.yaml"}},
		}, run: func(ctx context.Context, s streams, args []string) error { return cmdConfig(args, s.out) }},
		{name: "migrate", args: "[--config FILE]", summary: "apply pending database migrations",
			about:    "Brings the database's schema up to date; parley run does the same at start. Safe to run again.",
			examples: []string{"parley migrate --config parley.yaml"},
			run:      func(ctx context.Context, s streams, args []string) error { return cmdMigrate(ctx, args, s.out) }},
		{name: "sessions", summary: "list, read, compact and prune sessions", subs: []*command{
			{name: "ls", args: "[flags]", summary: "list sessions", examples: []string{"parley sessions ls", "parley sessions ls --agent default --limit 20"}},
			{name: "show", args: "ID [--archived]", summary: "show a session and its messages", examples: []string{"parley sessions show 01a200f4-...", "parley sessions show 01a200f4-... --archived"}},
			{name: "compact", args: "ID", summary: "summarize a session's older messages now", examples: []string{"parley sessions compact 01a200f4-..."}},
			{name: "prune", args: "--older-than AGE", summary: "delete sessions archived longer ago than AGE", examples: []string{"parley sessions prune --older-than 30d"}},
		}, run: func(ctx context.Context, s streams, args []string) error { return cmdSessions(ctx, args, s.out, s.err) }},
		{name: "memory", summary: "manage long-term memory", subs: []*command{
			{name: "reindex", args: "[--config FILE]", summary: "rebuild the memory search index from the database",
				about: "Rebuilds the configured memory index (built-in or Typesense) from the memories stored in the database.", examples: []string{"parley memory reindex"}},
		}, run: func(ctx context.Context, s streams, args []string) error { return cmdMemory(ctx, args, s.out, s.err) }},
		{name: "cron", summary: "manage scheduled jobs and read their receipts",
			about: "Works beside a running daemon, which picks up changes (and runs asked for) within 15 s. Jobs from the config can't be removed or disabled here: change the config.",
			subs: []*command{
				{name: "add", args: "--id ID --schedule SPEC --prompt TEXT [flags]", summary: "add a stored job",
					examples: []string{`parley cron add --id morning --schedule "0 9 * * *" --prompt "Summarize today's calendar" --notify telegram:12345`,
						`parley cron add --id tick --schedule "@every 1h" --prompt "Check the queue" --timezone Europe/Paris`}},
				{name: "ls", summary: "list the jobs, their schedules and next fires", examples: []string{"parley cron ls"}},
				{name: "rm", args: "ID", summary: "remove a stored job", examples: []string{"parley cron rm tick"}},
				{name: "enable", args: "ID", summary: "enable a stored job", examples: []string{"parley cron enable tick"}},
				{name: "disable", args: "ID", summary: "disable a stored job", examples: []string{"parley cron disable tick"}},
				{name: "run", args: "ID", summary: "run a job now (a running daemon starts it)", examples: []string{"parley cron run morning"}},
				{name: "runs", args: "ID [--limit N] [--full]", summary: "a job's latest receipts, with their notes' delivery (and why one wasn't sent)", examples: []string{"parley cron runs morning --limit 5", "parley cron runs morning --limit 1 --full"}},
			}, run: func(ctx context.Context, s streams, args []string) error { return cmdCron(ctx, args, s.out) }},
		{name: "hooks", summary: "list incoming webhooks and their deliveries", subs: []*command{
			{name: "ls", args: "[--config FILE]", summary: "list the incoming webhooks and their URLs", examples: []string{"parley hooks ls"}},
			{name: "deliveries", args: "ID [--limit N]", summary: "a webhook's latest deliveries, refused ones included", examples: []string{"parley hooks deliveries ci --limit 50"}},
		}, run: func(ctx context.Context, s streams, args []string) error { return cmdHooks(ctx, args, s.out) }},
		{name: "pairing", summary: "approve, revoke and block who may talk to the bot in direct chats", subs: []*command{
			{name: "ls", args: "[--config FILE]", summary: "list direct-chat pairing requests waiting", examples: []string{"parley pairing ls"}},
			{name: "approve", args: "CODE", summary: "let a pairing code's sender talk to the bot", examples: []string{"parley pairing approve K7Q2M9"}},
			{name: "people", args: "[--config FILE]", summary: "list who is approved, waiting or blocked, by channel", examples: []string{"parley pairing people"}},
			{name: "revoke", args: "CHANNEL USER", summary: "take back a person's approval: their next message is refused (and gets a new pairing code)",
				examples: []string{"parley pairing revoke telegram 5550001"}},
			{name: "block", args: "CHANNEL USER", summary: "refuse a person's messages without a pairing code", examples: []string{"parley pairing block telegram 5550001"}},
			{name: "unblock", args: "CHANNEL USER", summary: "let a blocked person ask to pair again", examples: []string{"parley pairing unblock telegram 5550001"}},
		}, run: func(ctx context.Context, s streams, args []string) error { return cmdPairing(ctx, args, s.out) }},
		permissionsCommand,
		replicasCommand,
		secretsCommand,
		{name: "whatsapp", summary: "link a WhatsApp account", subs: []*command{
			{name: "link", args: "[--adapter ID] [--phone NUMBER]", summary: "link a WhatsApp account (QR code, or a pairing code)",
				about:    "Shows a QR code to scan in WhatsApp (Settings, Linked devices), or with --phone a pairing code to type there. The device is stored in parley's database.",
				examples: []string{"parley whatsapp link", "parley whatsapp link --phone +33612345678"}},
		}, run: func(ctx context.Context, s streams, args []string) error { return cmdWhatsApp(ctx, args, s.out, s.err) }},
		{name: "mcp", summary: "the Model Context Protocol: the servers agents use, and parley as one", subs: []*command{
			{name: "ls", args: "[--config FILE] [--json]", summary: "start each MCP server of the config and list its state and tools",
				about:    "Starts every server under mcp.servers (a command over stdio, or a streamable HTTP URL), lists its tools as agents name them (mcp:<server>/<tool>; the model sees <server>__<tool>), and stops them.",
				examples: []string{"parley mcp ls", "parley mcp ls --json"}},
			{name: "serve", args: "[--config FILE] [--server ADDR] [--token T]", summary: "be an MCP server on standard input and output",
				about: "Serves parley to an MCP client (Claude Desktop, an IDE, another agent) over stdio: send_message talks to an agent in the session mcp:default " +
					"(or mcp:<session>) and waits for its reply, list_sessions and read_session read the sessions. It runs parley in process on the configured database, " +
					"or, when a daemon runs on this config (or --server names one), passes each call to that daemon's /mcp with an API token. " +
					"Standard output carries only MCP messages; logs go to standard error. An MCP client starts it as the command parley with the arguments " +
					`["mcp", "serve", "--config", "/path/parley.yaml"].`,
				examples: []string{"parley mcp serve --config /etc/parley/parley.yaml",
					"parley mcp serve --server 10.0.0.5:8080 --token $PARLEY_API_TOKEN"}},
		}, run: func(ctx context.Context, s streams, args []string) error { return cmdMCP(ctx, args, s) }},
		{name: "acp", args: "[--config FILE] [--agent ID] | --server URL [--token T]", summary: "be an Agent Client Protocol agent for an editor, on standard input and output",
			about: "Serves a parley agent to an editor (Zed, a JetBrains IDE, a Neovim plugin) over the Agent Client Protocol on stdio: session/new starts a parley session " +
				"(its id is the session's), session/prompt runs a turn and streams its reply and tool calls, permission questions become session/request_permission, " +
				"session/cancel stops the turn, session/load replays a session's history. It runs parley in process on the configured database, or, when a daemon " +
				"runs on this config (or --server names one), talks to that daemon's HTTP API with an API token. Standard output carries only ACP messages; logs go " +
				`to standard error. In Zed: "agent_servers": {"parley": {"command": "parley", "args": ["acp", "--config", "/path/parley.yaml"]}}.`,
			examples: []string{"parley acp --config /etc/parley/parley.yaml", "parley acp --agent coder",
				"parley acp --server 10.0.0.5:8080 --token $PARLEY_API_TOKEN"},
			run: func(ctx context.Context, s streams, args []string) error {
				return cmdACP(ctx, args, s.in, s.out, s.err)
			}},
		{name: "bench", args: "[--sessions N] [--turns M] [--database URL] [--json] | --idle [--runs N]", summary: "measure the whole path in process",
			about: "Runs a daemon on a fresh database with a channel of its own and reports turns/s, latency, the gateway's overhead, peak RSS " +
				"and the raw durable append limit of the same database. With --idle, starts parley run repeatedly and reports exec-to-ready time and idle RSS.",
			examples: []string{"parley bench --sessions 1000 --turns 10", "parley bench --idle --runs 5 --json"},
			run:      func(ctx context.Context, s streams, args []string) error { return cmdBench(ctx, args, s.out, s.err) }},
		{name: "completion", args: "bash|zsh|fish", summary: "print a shell completion script",
			about: "Prints a script that completes parley's commands, subcommands and flags.",
			examples: []string{"source <(parley completion bash)", "parley completion zsh > \"${fpath[1]}/_parley\"",
				"parley completion fish > ~/.config/fish/completions/parley.fish"},
			run: func(ctx context.Context, s streams, args []string) error { return cmdCompletion(ctx, args, s.out) }},
		{name: "help", args: "[COMMAND [SUBCOMMAND]]", summary: "show help for parley or a command",
			examples: []string{"parley help", "parley help cron add"},
			run:      func(ctx context.Context, s streams, args []string) error { return cmdHelp(args, s.out) }},
		{name: "version", summary: "print the version",
			run: func(ctx context.Context, s streams, args []string) error {
				_, err := io.WriteString(s.out, "parley "+version()+"\n")
				return err
			}},
	}
}

// findCommand is the command at path ("cron", "add"), and how much of
// path named it.
func findCommand(path []string) (*command, int) {
	var found *command
	list := commandTable
	n := 0
	for _, name := range path {
		var next *command
		for _, c := range list {
			if c.name == name {
				next = c
			}
		}
		if next == nil {
			break
		}
		found, list = next, next.subs
		n++
	}
	return found, n
}
