package gateway

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
)

const (
	checkGroupQuery = `SELECT 1 FROM allowed_groups WHERE adapter = $1 AND chat_id = $2`

	pairGroupQuery = `INSERT INTO allowed_groups (adapter, chat_id, paired_by, approved_at) VALUES ($1, $2, $3, $4)
	ON CONFLICT (adapter, chat_id) DO NOTHING`

	unpairGroupQuery = `DELETE FROM allowed_groups WHERE adapter = $1 AND chat_id = $2`
)

// groupAccess decides whether a group message may go on to the group
// policy (done false), or is settled here: refused, because the group is
// not let in, or answered, a /pair or /unpair. Only an approved person
// (one in allow, or approved by pairing) pairs a group; a stranger in a
// group not let in is told nothing.
func (g *Gateway) groupAccess(ctx context.Context, pol Access, j job) (d decision, done bool, err error) {
	word := groupWord(j.in)
	admitted, err := g.admitsGroup(ctx, pol, j.in)
	if err != nil {
		return deny, true, err
	}
	if word == "" && admitted {
		return admit, false, nil
	}
	if word == "" && !j.in.Mentioned {
		return deny, true, nil
	}
	approved := pol.Allow[j.in.UserID]
	if !approved {
		if approved, err = g.opts.Store.Allowed(ctx, j.in.Adapter, j.in.UserID); err != nil {
			return deny, true, err
		}
	}
	if !approved {
		if admitted {
			return admit, false, nil // an ordinary message of a member
		}
		return deny, true, nil
	}
	var text string
	switch {
	case word == "" && pol.Groups == GroupsAllowlist:
		// An approved person addressing the bot in a group not let in
		// learns why it stays quiet.
		text = "I don't answer in this group: it isn't in the channel's groups.allow. Ask the operator to add it."
	case word == "":
		text = "I don't answer in this group yet. Send /pair here to let me in (you're approved), or ask the operator to add it to groups.allow."
	case pol.Groups == GroupsOpen || pol.AllowGroups[j.in.ChatID]:
		text = "This group is let in by the channel's config; /pair and /unpair change nothing here."
	case pol.Groups == GroupsAllowlist:
		text = "This channel answers only in the groups its config lists (groups.allow); ask the operator to add this one."
	case word == "pair":
		if err := g.opts.Store.PairGroup(ctx, j.in.Adapter, j.in.ChatID, userOf(j.in)); err != nil {
			return deny, true, err
		}
		g.opts.Log.InfoContext(ctx, "group paired", "adapter", j.in.Adapter, "chat_id", j.in.ChatID, "user", userOf(j.in))
		text = "Paired: I take part in this group now. Anyone here can talk to me, and /unpair undoes it."
	default:
		if _, err := g.opts.Store.UnpairGroup(ctx, j.in.Adapter, j.in.ChatID); err != nil {
			return deny, true, err
		}
		g.opts.Log.InfoContext(ctx, "group unpaired", "adapter", j.in.Adapter, "chat_id", j.in.ChatID, "user", userOf(j.in))
		text = "Unpaired: I no longer answer in this group. /pair lets me in again."
	}
	g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, replyTo: j, text: text})
	return answered, true, nil
}

// groupWord is "pair" or "unpair" for a /pair or /unpair addressed to
// the bot (alone, or after a mention of it), else "".
func groupWord(in adapters.Inbound) string {
	fields := strings.Fields(in.Text)
	for len(fields) > 0 && (strings.HasPrefix(fields[0], "@") || strings.HasPrefix(fields[0], "<@")) {
		fields = fields[1:]
	}
	if len(fields) != 1 {
		return ""
	}
	name, bot, named := strings.Cut(fields[0], "@")
	if named && (bot == "" || !in.Mentioned) {
		return "" // "/pair@otherbot"
	}
	switch strings.ToLower(name) {
	case "/pair":
		return "pair"
	case "/unpair":
		return "unpair"
	}
	return ""
}

// admitsGroup says whether the group policy lets the message's group in.
func (g *Gateway) admitsGroup(ctx context.Context, pol Access, in adapters.Inbound) (bool, error) {
	switch {
	case pol.Groups == GroupsOpen || pol.AllowGroups[in.ChatID]:
		return true, nil
	case pol.Groups == GroupsAllowlist:
		return false, nil
	}
	return g.opts.Store.GroupAllowed(ctx, in.Adapter, in.ChatID)
}

// GroupAllowed reports whether an approved person paired the group.
func (s *Store) GroupAllowed(ctx context.Context, adapter adapters.ID, chatID string) (bool, error) {
	var one int
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, checkGroupQuery, adapter, chatID).Scan(&one)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check the paired groups: %w", err)
	}
	return true, nil
}

// PairGroup lets a group in, paired by user ("<surface>:<user id>").
func (s *Store) PairGroup(ctx context.Context, adapter adapters.ID, chatID, user string) error {
	if _, err := s.db.Write().ExecContext(ctx, pairGroupQuery, adapter, chatID, user, dbutil.Millis(s.now())); err != nil {
		return fmt.Errorf("pair group %s: %w", chatID, err)
	}
	return nil
}

// UnpairGroup lets a paired group out again and reports whether it was in.
func (s *Store) UnpairGroup(ctx context.Context, adapter adapters.ID, chatID string) (bool, error) {
	res, err := s.db.Write().ExecContext(ctx, unpairGroupQuery, adapter, chatID)
	if err != nil {
		return false, fmt.Errorf("unpair group %s: %w", chatID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
