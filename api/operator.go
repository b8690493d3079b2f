package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/vault"
)

// Operator is what the daemon answers beyond the sessions store: its live
// state, the replicas, what a session's spend caps have left, and people's
// own tokens. Without one those routes answer 503.
type Operator interface {
	// Status is the daemon's live state (GET /v1/status).
	Status(ctx context.Context) (any, error)
	// Replicas lists the replicas sharing the database (GET /v1/replicas).
	Replicas(ctx context.Context) (any, error)
	// Budget is what s's spend caps have left today.
	Budget(ctx context.Context, s sessions.Session) (any, error)
	// Connect stores u's token for provider; vault.ErrNoKey when parley
	// has no secrets key.
	Connect(ctx context.Context, u vault.User, provider, token string) error
	// Disconnect forgets u's token for provider, saying whether one was
	// kept.
	Disconnect(ctx context.Context, u vault.User, provider string) (bool, error)
}

// maxTokenBody bounds a PUT of a person's token.
const maxTokenBody = 16 << 10

func (s *server) operator() (Operator, error) {
	if s.opts.Operator == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "this server has no daemon behind it")
	}
	return s.opts.Operator, nil
}

// unavailable is a read the daemon couldn't make: logged for the
// operator, answered 503 in plain words.
func (s *server) unavailable(r *http.Request, what string, err error) error {
	s.log.WarnContext(r.Context(), what, "error", err)
	return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the database didn't answer; try again, and see the daemon's log if it persists")
}

// daemonStatus is GET /v1/status.
func (s *server) daemonStatus(o Operator, w http.ResponseWriter, r *http.Request) error {
	v, err := o.Status(r.Context())
	if err != nil {
		return s.unavailable(r, "status snapshot", err)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// replicas is GET /v1/replicas.
func (s *server) replicas(o Operator, w http.ResponseWriter, r *http.Request) error {
	v, err := o.Replicas(r.Context())
	if err != nil {
		return s.unavailable(r, "list replicas", err)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// budget is GET /v1/sessions/{id}/budget: what the session's caps have
// left today.
func (s *server) budget(o Operator, w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	b, err := o.Budget(r.Context(), sess)
	if err != nil {
		return s.unavailable(r, "read a session's spend", err)
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

// connectionTarget is the person and provider of a connections route.
func connectionTarget(r *http.Request) (vault.User, string, error) {
	u := vault.User{Surface: r.PathValue("surface"), ID: r.PathValue("user")}
	provider := r.PathValue("provider")
	if _, err := vault.ParseUser(u.String()); err != nil {
		return vault.User{}, "", badRequest(err.Error())
	}
	if err := vault.CheckProvider(provider); err != nil {
		return vault.User{}, "", badRequest(err.Error())
	}
	return u, provider, nil
}

// ConnectRequest is the body of PUT
// /v1/users/{surface}/{user}/connections/{provider}.
type ConnectRequest struct {
	Token string `json:"token"`
}

// Connection is the answer of the connections routes; the token is never
// sent back.
type Connection struct {
	User      vault.User `json:"user"`
	Provider  string     `json:"provider"`
	Connected bool       `json:"connected"`
}

// connect is PUT /v1/users/{surface}/{user}/connections/{provider}: it
// stores a person's own token, as /connect does in a chat.
func (s *server) connect(o Operator, w http.ResponseWriter, r *http.Request) error {
	u, provider, err := connectionTarget(r)
	if err != nil {
		return err
	}
	var body ConnectRequest
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenBody)
	if err := s.decode(w, r, &body, false); err != nil {
		// The decoder's message may quote the body: never echo it.
		if ae := (*apiError)(nil); errors.As(err, &ae) && ae.code == CodeBadRequest {
			return badRequest(`send {"token": "..."} as JSON`)
		}
		return err
	}
	body.Token = strings.TrimSpace(body.Token)
	if body.Token == "" || strings.ContainsAny(body.Token, " \t\r\n") {
		return badRequest("token is empty or has spaces")
	}
	switch err := o.Connect(r.Context(), u, provider, body.Token); {
	case errors.Is(err, vault.ErrNoKey):
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "parley has no secrets key: set "+vault.EnvKey+" (or secrets.key_file) and restart it")
	case err != nil:
		s.log.ErrorContext(r.Context(), "store a user connection", "user", u.String(), "provider", provider, "error", err)
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the connection was not stored; try again")
	}
	s.log.InfoContext(r.Context(), "user connected a provider", "user", u.String(), "provider", provider, "via", "api")
	writeJSON(w, http.StatusOK, Connection{User: u, Provider: provider, Connected: true})
	return nil
}

// disconnect is DELETE /v1/users/{surface}/{user}/connections/{provider}.
func (s *server) disconnect(o Operator, w http.ResponseWriter, r *http.Request) error {
	u, provider, err := connectionTarget(r)
	if err != nil {
		return err
	}
	found, err := o.Disconnect(r.Context(), u, provider)
	if err != nil {
		s.log.ErrorContext(r.Context(), "delete a user connection", "user", u.String(), "provider", provider, "error", err)
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the connection was not deleted; try again")
	}
	if !found {
		return errorf(http.StatusNotFound, CodeNotFound, u.String()+" has no "+provider+" connection")
	}
	writeJSON(w, http.StatusOK, Connection{User: u, Provider: provider, Connected: false})
	return nil
}
