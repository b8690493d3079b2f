package admin

import (
	"cmp"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/webhooks"
)

func (s *server) overview(w http.ResponseWriter, r *http.Request) error {
	ov, err := s.o.Overview(r.Context())
	if err != nil {
		return err
	}
	channels, ct := sortPage(r, "channels_", ov.Channels, "channel",
		col("channel", func(c Channel) string { return c.ID }),
		col("health", func(c Channel) string { return strconv.FormatBool(c.Healthy) }))
	mcp, mt := sortPage(r, "mcp_", ov.MCP, "server",
		col("server", func(m MCPServer) string { return m.ID }),
		col("state", func(m MCPServer) string { return m.State }))
	ov.Channels, ov.MCP = channels, mcp
	s.render(w, r, "overview", map[string]any{"O": ov, "CT": ct, "MT": mt})
	return nil
}

// sessionList lists sessions by status, surface and agent, and finds the
// ones whose key or title holds q.
func (s *server) sessionList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	opts := sessions.ListOptions{Limit: sessions.MaxPageSize, Cursor: q.Get("cursor"), Status: sessions.Status(q.Get("status")),
		Surface: q.Get("surface"), AgentID: q.Get("agent")}
	if opts.Status != "" && opts.Status != sessions.StatusActive && opts.Status != sessions.StatusArchived {
		opts.Status = ""
	}
	page, err := s.o.Sessions.List(r.Context(), opts)
	if err != nil {
		return err
	}
	find := strings.ToLower(strings.TrimSpace(q.Get("q")))
	known := s.names(r.Context())
	var shown []sessions.Session
	for _, ss := range page.Sessions {
		if find == "" || strings.Contains(strings.ToLower(ss.Key.String()+" "+ss.Title+" "+string(ss.ID)+" "+nameOf(known, ss.Key)), find) {
			shown = append(shown, ss)
		}
	}
	shown, table := sortPage(r, "", shown, "-active",
		col("key", func(s sessions.Session) string { return s.Key.String() }),
		col("title", func(s sessions.Session) string { return s.Title }),
		col("status", func(s sessions.Session) string { return string(s.Status) }),
		col("messages", func(s sessions.Session) int64 { return int64(s.MessageCount) }),
		col("tokens", func(s sessions.Session) int64 { return int64(s.Rollup.TokenCount) }),
		col("cost", func(s sessions.Session) float64 { return s.Rollup.CostUSD }),
		col("active", func(s sessions.Session) int64 { return s.LastActiveAt.UnixMilli() }))
	next := ""
	if page.Next != "" {
		nq := url.Values{"cursor": {page.Next}}
		for _, k := range []string{"q", "status", "surface", "agent", "sort"} {
			if v := q.Get(k); v != "" {
				nq.Set(k, v)
			}
		}
		next = "/admin/sessions?" + nq.Encode()
	}
	names := map[sessions.ID]string{}
	for _, ss := range shown {
		names[ss.ID] = cmp.Or(nameOf(known, ss.Key), s.nameIn(r.Context(), ss.Key))
	}
	s.render(w, r, "sessions", map[string]any{"Sessions": shown, "Next": next, "Q": q.Get("q"), "T": table, "Names": names,
		"Shown": table.Rows, "PageSize": sessions.MaxPageSize,
		"Status": string(opts.Status), "Surface": opts.Surface, "Agent": opts.AgentID})
	return nil
}

// session shows a session and every message, archived and hidden ones too.
func (s *server) session(w http.ResponseWriter, r *http.Request) error {
	id := sessions.ID(r.PathValue("id"))
	ss, err := s.o.Sessions.Session(r.Context(), id)
	if err != nil {
		return errNotFound
	}
	msgs, err := s.o.Sessions.Messages(r.Context(), id, sessions.MessagesOptions{Archived: true, Hidden: true, Limit: 1000})
	if err != nil {
		return err
	}
	st := agent.Status{State: agent.StateIdle}
	if s.o.Runs != nil {
		if got, ok := s.o.Runs()[id]; ok {
			st = got
		}
	}
	shown, table := sortPage(r, "", msgs, "seq", col("seq", func(m sessions.Message) int64 { return m.Seq }))
	s.render(w, r, "session", map[string]any{"S": ss, "Messages": shown, "Status": st, "T": table,
		"Name": cmp.Or(nameOf(s.names(r.Context()), ss.Key), s.nameIn(r.Context(), ss.Key))})
	return nil
}

// run is a session whose agent is not idle.
type run struct {
	Session sessions.ID
	Status  agent.Status
}

func (s *server) runs(w http.ResponseWriter, r *http.Request) error {
	var out []run
	if s.o.Runs != nil {
		for id, st := range s.o.Runs() {
			out = append(out, run{Session: id, Status: st})
		}
	}
	shown, table := sortPage(r, "", out, "session",
		col("session", func(x run) string { return string(x.Session) }),
		col("state", func(x run) string { return string(x.Status.State) }),
		col("since", func(x run) int64 { return x.Status.StartedAt.UnixMilli() }))
	s.render(w, r, "runs", map[string]any{"Runs": shown, "T": table})
	return nil
}

func (s *server) abort(w http.ResponseWriter, r *http.Request) error {
	id := sessions.ID(r.PathValue("id"))
	if s.o.Abort != nil && s.o.Abort(id) {
		back(w, r, "/admin/runs", "Stopped the run of "+string(id)+".")
	} else {
		back(w, r, "/admin/runs", "Nothing was running in "+string(id)+".")
	}
	return nil
}

// job is a cron job with its next fire and latest receipts.
type job struct {
	cron.Job
	Next string
	Runs []cron.Run
	T    Table
}

// maxReceipts is how many of a job's latest receipts its table sorts and
// pages through.
const maxReceipts = 200

// A job's receipts and a hook's deliveries share their page with the
// others': fewer rows a page.
const (
	receiptsPageSize   = 5
	deliveriesPageSize = 20
)

func (s *server) cron(w http.ResponseWriter, r *http.Request) error {
	var jobs []job
	if s.o.Cron != nil {
		list, err := s.o.Cron.List(r.Context())
		if err != nil {
			return err
		}
		for _, j := range list {
			v := job{Job: j, Next: "disabled"}
			if sch, err := j.ParsedSchedule(); err == nil && j.Enabled() {
				v.Next = sch.Next(nowFunc()).Local().Format("2006-01-02 15:04:05")
			}
			runs, err := s.o.Cron.Runs(r.Context(), j.ID, maxReceipts)
			if err != nil {
				return err
			}
			v.Runs, v.T = sortPageSized(r, j.ID+"_", runs, receiptsPageSize, "-scheduled",
				col("scheduled", func(x cron.Run) int64 { return x.ScheduledAt.UnixMilli() }),
				col("status", func(x cron.Run) string { return string(x.Status) }),
				col("ended", func(x cron.Run) int64 { return x.EndedAt.UnixMilli() }))
			jobs = append(jobs, v)
		}
	}
	s.render(w, r, "cron", map[string]any{"Jobs": jobs, "HasCron": s.o.Cron != nil})
	return nil
}

func (s *server) cronAction(w http.ResponseWriter, r *http.Request) error {
	if s.o.Cron == nil {
		return errNotFound
	}
	id := r.PathValue("id")
	var err error
	var done string
	switch r.PathValue("action") {
	case "run":
		_, err = s.o.Cron.RequestRun(r.Context(), id)
		done = "Asked job " + id + " to run; it starts within 15 s."
	case "enable", "disable":
		en := r.PathValue("action") == "enable"
		err = s.o.Cron.SetEnabled(r.Context(), id, en)
		done = "Job " + id + " " + r.PathValue("action") + "d."
	default:
		return errNotFound
	}
	if err != nil {
		back(w, r, "/admin/cron", err.Error())
		return nil
	}
	back(w, r, "/admin/cron", done)
	return nil
}

// hookView is a hook with its latest deliveries.
type hookView struct {
	ID, Auth, Mode string
	Deliveries     []webhooks.Delivery
	T              Table
}

// maxDeliveries is how many of a hook's latest deliveries its table sorts
// and pages through.
const maxDeliveries = 500

func (s *server) hooks(w http.ResponseWriter, r *http.Request) error {
	var out []hookView
	if s.o.Hooks != nil {
		for _, h := range s.o.Hooks() {
			ds, err := webhooks.Deliveries(r.Context(), s.o.DB, h.ID, maxDeliveries)
			if err != nil {
				return err
			}
			shown, table := sortPageSized(r, h.ID+"_", ds, deliveriesPageSize, "-received",
				col("received", func(d webhooks.Delivery) int64 { return d.ReceivedAt.UnixMilli() }),
				col("status", func(d webhooks.Delivery) string { return d.Status }),
				col("http", func(d webhooks.Delivery) int { return d.HTTPStatus }),
				col("took", func(d webhooks.Delivery) int64 { return int64(d.Duration) }))
			out = append(out, hookView{ID: h.ID, Auth: h.Auth, Mode: h.Mode, Deliveries: shown, T: table})
		}
	}
	var refused []Refusal
	if s.o.Refused != nil {
		refused = s.o.Refused()
	}
	refused, rt := sortPage(r, "refused_", refused, "-at",
		col("at", func(x Refusal) int64 { return x.At.UnixMilli() }),
		col("hook", func(x Refusal) string { return x.Hook }),
		col("http", func(x Refusal) int { return x.Status }),
		col("reason", func(x Refusal) string { return x.Reason }))
	s.render(w, r, "hooks", map[string]any{"Hooks": out, "Refused": refused, "RT": rt})
	return nil
}

func (s *server) pairing(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.o.Outbox.Pairings(r.Context())
	if err != nil {
		return err
	}
	shown, table := sortPage(r, "", ps, "asked",
		col("code", func(p gateway.Pairing) string { return p.Code }),
		col("channel", func(p gateway.Pairing) string { return string(p.Adapter) }),
		col("who", func(p gateway.Pairing) string { return cmp.Or(p.DisplayName, p.UserID) }),
		col("asked", func(p gateway.Pairing) int64 { return p.CreatedAt.UnixMilli() }),
		col("expires", func(p gateway.Pairing) int64 { return p.ExpiresAt.UnixMilli() }))
	s.render(w, r, "pairing", map[string]any{"Pairings": shown, "T": table})
	return nil
}

func (s *server) pairingAction(w http.ResponseWriter, r *http.Request) error {
	code := r.PathValue("code")
	switch r.PathValue("decision") {
	case "approve":
		p, err := s.o.Outbox.ApprovePairing(r.Context(), code)
		if err != nil {
			back(w, r, "/admin/pairing", err.Error())
			return nil
		}
		if s.o.Wake != nil {
			s.o.Wake() // the approval's line to its sender
		}
		back(w, r, "/admin/pairing", "Approved "+cmp.Or(p.DisplayName, p.UserID)+" on "+string(p.Adapter)+".")
	case "deny":
		if err := s.o.Outbox.DenyPairing(r.Context(), code); err != nil {
			back(w, r, "/admin/pairing", err.Error())
			return nil
		}
		back(w, r, "/admin/pairing", "Denied "+code+".")
	default:
		return errNotFound
	}
	return nil
}

// maxUnsent is how many pending or failed replies the outbox page sorts
// and pages through.
const maxUnsent = 500

func (s *server) outbox(w http.ResponseWriter, r *http.Request) error {
	b, err := s.o.Outbox.Backlog(r.Context())
	if err != nil {
		return err
	}
	pending, err := s.o.Outbox.Unsent(r.Context(), "pending", maxUnsent)
	if err != nil {
		return err
	}
	failed, err := s.o.Outbox.Unsent(r.Context(), "failed", maxUnsent)
	if err != nil {
		return err
	}
	type row = gateway.Unsent
	cols := []column[row]{
		col("queued", func(x row) int64 { return x.CreatedAt.UnixMilli() }),
		col("channel", func(x row) string { return string(x.Adapter) }),
		col("chat", func(x row) string { return x.ChatID }),
		col("tries", func(x row) int { return x.Attempts }),
		col("next", func(x row) int64 { return x.NextAt.UnixMilli() }),
	}
	pending, pt := sortPage(r, "pending_", pending, "queued", cols...)
	failed, ft := sortPage(r, "failed_", failed, "-queued", cols...)
	s.render(w, r, "outbox", map[string]any{"Backlog": b, "Pending": pending, "Failed": failed, "PT": pt, "FT": ft})
	return nil
}

func (s *server) retry(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.o.Outbox.Retry(r.Context(), id); err != nil {
		back(w, r, "/admin/outbox", err.Error())
		return nil
	}
	if s.o.Wake != nil {
		s.o.Wake()
	}
	back(w, r, "/admin/outbox", "Sending "+id+" again.")
	return nil
}

// fileView is a file or an image a message carries, as the session page
// names it.
type fileView struct {
	Name, MediaType, Size, Note string
}

// filesOf lists the files and images of a message's parts.
func filesOf(m sessions.Message) []fileView {
	var out []fileView
	for _, p := range m.Parts {
		if d, ok := p.File(); ok {
			v := fileView{Name: cmp.Or(p.Name, "a file"), MediaType: p.MediaType, Note: d.Note}
			if d.Size > 0 {
				v.Size = sessions.ByteSize(d.Size)
			}
			out = append(out, v)
		} else if p.Type == "image" {
			out = append(out, fileView{Name: cmp.Or(p.Name, "an image"), MediaType: p.MediaType})
		}
	}
	return out
}
