package main

import (
	"context"
	"fmt"
	"io"

	"github.com/parleyd/parley/permissions"
)

// permissionsCommand lists and revokes the "Always" answers people gave
// when asked whether a tool may run.
var permissionsCommand = &command{name: "permissions", summary: "the tools people allowed with \"Always\"", subs: []*command{
	{name: "ls", args: "[--agent ID] [--user USER] [--config FILE]", summary: "list the tools people allowed always, per agent and user",
		about: "Lists the project rules stored when a person answered \"Always\" to a tool's permission question: the agent, the person " +
			"(<channel type>:<user id>), the tool and when. Rules written in the config (permissions.rules) are not listed; read them there.",
		examples: []string{"parley permissions ls", "parley permissions ls --user telegram:123456789"}},
	{name: "revoke", args: "AGENT USER TOOL [--config FILE]", summary: "take an \"Always\" back: the tool asks that person again",
		examples: []string{"parley permissions revoke default telegram:123456789 github__create_issue"}},
}, run: func(ctx context.Context, s streams, args []string) error { return cmdPermissions(ctx, args, s.out) }}

func cmdPermissions(ctx context.Context, args []string, stdout io.Writer) error {
	sub := args[0] // dispatch has checked it against the command table
	fs := newFlags("permissions " + sub)
	var agent, user *string
	want := 0
	switch sub {
	case "ls":
		agent = fs.String("agent", "", "only this agent's")
		user = fs.String("user", "", "only this person's, as <channel type>:<user id>")
	case "revoke":
		want = 3
	}
	_, db, err := fs.open(ctx, args[1:], want)
	if err != nil {
		return err
	}
	defer db.Close()
	store := permissions.NewStore(db)
	if sub == "revoke" {
		rest := fs.Args()
		ok, err := store.RevokeProject(ctx, rest[0], rest[1], rest[2])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no stored permission for %s of agent %s and %s; parley permissions ls lists them", rest[2], rest[0], rest[1])
		}
		fmt.Fprintf(stdout, "revoked: %s asks %s again before it runs for agent %s\n", rest[2], rest[1], rest[0])
		return nil
	}
	grants, err := store.ProjectGrants(ctx, *agent, *user)
	if err != nil {
		return err
	}
	return printTable(stdout, "no stored permissions", "AGENT\tUSER\tTOOL\tACTION\tSINCE", grants, func(g permissions.Grant) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", g.Agent, g.User, g.Tool, g.Decision, g.Created.Local().Format("2006-01-02 15:04"))
	})
}
