package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
	"github.com/parleyd/parley/turns"
)

// openPermissions builds the permission checker on the config's rules and
// the database's stored answers, and makes reg check every call with it.
func (d *Daemon) openPermissions(cfg *config.Config, reg *tools.Registry) error {
	pol, err := cfg.PermissionPolicy()
	if err != nil {
		return fmt.Errorf("permission rules: %w", err)
	}
	d.perms = permissions.NewChecker(permissions.Options{Policy: pol, Store: permissions.NewStore(d.db),
		AskTimeout: cfg.Permissions.AskTimeout.Std(), External: isMCPTool, SharedGroupGrants: cfg.Permissions.SharedGroupGrants, Log: d.named("permissions")})
	d.desk = permissions.NewDesk()
	reg.SetPermissions(d.perms)
	return nil
}

// isMCPTool says whether a tool is an MCP server's: those ask by default.
func isMCPTool(name string) bool { return strings.Contains(name, mcptools.Sep) }

// reloadPermissions puts a reloaded config's rules and ask timeout in place.
func (d *Daemon) reloadPermissions(cfg *config.Config) {
	if pol, err := cfg.PermissionPolicy(); err == nil {
		d.perms.SetPolicy(pol)
	}
	d.perms.SetAskTimeout(cfg.Permissions.AskTimeout.Std())
	d.perms.SetSharedGroupGrants(cfg.Permissions.SharedGroupGrants)
}

// cronUnattended is a cron fire's answerer: its job's allow_tools.
func (d *Daemon) cronUnattended(chatID string) *permissions.Unattended {
	jobID, _, _ := cron.ParseChatID(chatID)
	u := &permissions.Unattended{What: fmt.Sprintf("cron job %q", jobID),
		Key: "allow_tools on the job in the config (only jobs written in the config can allow tools)"}
	for i, j := range d.cfg().Cron.Jobs {
		if j.ID == jobID {
			u.Key, u.Allow = fmt.Sprintf("cron.jobs[%d].allow_tools", i), j.AllowTools
		}
	}
	return u
}

// apiPermissions answers questions for the API's route.
type apiPermissions struct{ d *Daemon }

var _ api.Permissions = apiPermissions{}

func (a apiPermissions) Answer(_ context.Context, id sessions.ID, requestID, answer string) (string, error) {
	ans, err := permissions.ParseAnswer(answer)
	if err != nil {
		return "", fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	q, ok := a.d.desk.Question(requestID)
	if !ok || q.SessionID != string(id) {
		return "", fmt.Errorf("%w: no permission request %q waits in session %s (answered, expired, or never asked)", sessions.ErrNotFound, requestID, id)
	}
	switch _, err := a.d.desk.Answer(requestID, "", ans); {
	case errors.Is(err, permissions.ErrNotOffered):
		return "", fmt.Errorf("%w: %q is not offered for this request; answer with one of its choices", api.ErrInvalid, answer)
	case errors.Is(err, permissions.ErrNoRequest):
		return "", fmt.Errorf("%w: permission request %q was answered or expired meanwhile", sessions.ErrNotFound, requestID)
	case err != nil:
		return "", err
	}
	return q.Tool, nil
}

// channelSink is what the channels deliver to: the gateway, with the
// answers to permission questions taken out on the way, a press on a
// question's button or a numbered reply to its list.
type channelSink struct{ d *Daemon }

var (
	_ adapters.Sink      = channelSink{}
	_ adapters.PressSink = channelSink{}
)

// Deliver takes a numbered reply to a question waiting in the chat for
// its sender as the answer; anything else goes to the gateway.
func (s channelSink) Deliver(ctx context.Context, in adapters.Inbound) error {
	if s.d.desk != nil && s.d.desk.Waiting() > 0 {
		place := permissions.Place{Adapter: string(in.Adapter), Chat: in.ChatID}
		if q, a, ok := s.d.desk.AnswerNumber(place, in.Surface+":"+in.UserID, in.Text); ok {
			s.d.log.InfoContext(ctx, "permission answered", "adapter", in.Adapter, "chat_id", in.ChatID, "tool", q.Tool, "answer", a, "request_id", q.ID)
			return nil
		}
	}
	return s.d.gw.Deliver(ctx, in)
}

// DeliverWith is the gateway's, for the webhooks' record.
func (s channelSink) DeliverWith(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier) error) error {
	return s.d.gw.DeliverWith(ctx, in, also)
}

// Press answers the question whose button was pressed, if the presser is
// the person asked; the note says what happened.
func (s channelSink) Press(ctx context.Context, p adapters.Press) string {
	rest, ok := strings.CutPrefix(p.Data, turns.PressPrefix)
	id, answer, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return "This button no longer does anything."
	}
	q, err := s.d.desk.Answer(id, p.Surface+":"+p.UserID, permissions.Answer(answer))
	switch {
	case errors.Is(err, permissions.ErrNotYours):
		return "Only the person who was asked can answer this."
	case errors.Is(err, permissions.ErrNoRequest):
		return "This question was already answered, or it expired."
	case err != nil:
		return "That answer isn't offered for this question."
	}
	s.d.log.InfoContext(ctx, "permission answered", "adapter", p.Adapter, "chat_id", p.ChatID, "tool", q.Tool, "answer", answer, "request_id", id)
	return permissions.Answer(answer).Done()
}
