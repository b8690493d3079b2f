package permissions

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyd/parley/dbutil"
)

const (
	grantSessionQuery = `INSERT INTO permission_session_rules (session_id, tool, decision, granted_by, created_at)
	VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (session_id, tool, granted_by) DO UPDATE SET decision = excluded.decision, created_at = excluded.created_at`
	grantProjectQuery = `INSERT INTO permission_project_rules (agent_id, user_id, tool, decision, created_at)
	VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (agent_id, user_id, tool) DO UPDATE SET decision = excluded.decision, created_at = excluded.created_at`
	// grantsQuery reads a call's stored rules in one round trip: the
	// session's ("s"), anyone's or those $4 granted, and the agent and
	// user's ("p").
	grantsQuery = `SELECT 's', tool, decision FROM permission_session_rules WHERE session_id = $1 AND ($4 = '' OR granted_by = $4)
	UNION ALL
	SELECT 'p', tool, decision FROM permission_project_rules WHERE agent_id = $2 AND user_id = $3`
	listProjectQuery = `SELECT agent_id, user_id, tool, decision, created_at FROM permission_project_rules
	WHERE ($1 = '' OR agent_id = $1) AND ($2 = '' OR user_id = $2)
	ORDER BY agent_id, user_id, tool`
	revokeProjectQuery = `DELETE FROM permission_project_rules WHERE agent_id = $1 AND user_id = $2 AND tool = $3`
)

// Store keeps the rules people set by answering: per session
// (permission_session_rules) and per agent and user
// (permission_project_rules). Only allow is stored.
type Store struct {
	db  *dbutil.DB
	now func() time.Time
}

// NewStore returns a Store on db.
func NewStore(db *dbutil.DB) *Store { return &Store{db: db, now: time.Now} }

// GrantSession allows tool (a name or pattern) in a session from now on;
// by says who answered, for the record.
func (s *Store) GrantSession(ctx context.Context, sessionID, tool, by string) error {
	if _, err := s.db.Write().ExecContext(ctx, grantSessionQuery, sessionID, tool, string(Allow), by, dbutil.Millis(s.now())); err != nil {
		return fmt.Errorf("store the permission for %s in session %s: %w", tool, sessionID, err)
	}
	return nil
}

// GrantProject allows tool for an agent and a user from now on, in every
// session.
func (s *Store) GrantProject(ctx context.Context, agentID, user, tool string) error {
	if _, err := s.db.Write().ExecContext(ctx, grantProjectQuery, agentID, user, tool, string(Allow), dbutil.Millis(s.now())); err != nil {
		return fmt.Errorf("store the permission for %s of agent %s: %w", tool, agentID, err)
	}
	return nil
}

// Stored are the rules stored for one call, compiled.
type Stored struct {
	Session, Project Set
}

// Grants reads the rules stored for a session (those grantedBy gave, or,
// with grantedBy "", anyone's) and for an agent and user. A stored rule
// that doesn't compile (written by hand) is skipped.
func (s *Store) Grants(ctx context.Context, sessionID, agentID, user, grantedBy string) (Stored, error) {
	type row struct {
		layer string
		rule  Rule
	}
	var rows []row
	err := s.db.View(ctx, func(q dbutil.Querier) (err error) {
		rows, err = dbutil.Query(s.db.Brief(ctx), q, grantsQuery, func(sc dbutil.Scanner) (row, error) {
			var r row
			var d string
			err := sc.Scan(&r.layer, &r.rule.Tool, &d)
			r.rule.Decision = Decision(d)
			return r, err
		}, sessionID, agentID, user, grantedBy)
		return err
	})
	if err != nil {
		return Stored{}, fmt.Errorf("read the stored permissions of session %s: %w", sessionID, err)
	}
	var st Stored
	for _, r := range rows {
		p, err := compilePattern(r.rule.Tool)
		if err != nil || !r.rule.Decision.Valid() {
			continue
		}
		if r.layer == "s" {
			st.Session.add(compiled{rule: r.rule, pat: p})
		} else {
			st.Project.add(compiled{rule: r.rule, pat: p})
		}
	}
	return st, nil
}

// Grant is one stored project rule, as `parley permissions ls` shows it.
type Grant struct {
	Agent    string    `json:"agent"`
	User     string    `json:"user"`
	Tool     string    `json:"tool"`
	Decision Decision  `json:"decision"`
	Created  time.Time `json:"created_at"`
}

// ProjectGrants lists the stored project rules, of one agent and one user
// when they are given ("" for all).
func (s *Store) ProjectGrants(ctx context.Context, agentID, user string) ([]Grant, error) {
	out, err := dbutil.ViewQuery(ctx, s.db, listProjectQuery, func(sc dbutil.Scanner) (Grant, error) {
		var g Grant
		var d string
		var ms int64
		err := sc.Scan(&g.Agent, &g.User, &g.Tool, &d, &ms)
		g.Decision, g.Created = Decision(d), dbutil.Time(ms)
		return g, err
	}, agentID, user)
	if err != nil {
		return nil, fmt.Errorf("list stored permissions: %w", err)
	}
	return out, nil
}

// RevokeProject removes a stored project rule and reports whether there
// was one.
func (s *Store) RevokeProject(ctx context.Context, agentID, user, tool string) (bool, error) {
	res, err := s.db.Write().ExecContext(ctx, revokeProjectQuery, agentID, user, tool)
	if err != nil {
		return false, fmt.Errorf("revoke the permission for %s of agent %s: %w", tool, agentID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
