package sessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func TestCreateUpdateList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		st := sessions.NewStore(open(t))
		key := sessions.Key{UserID: "u1", Surface: sessions.SurfaceAPI, SurfaceID: "a1", AgentID: "main"}
		s, err := st.Create(ctx, key, sessions.CreateOptions{Title: "hello", Metadata: json.RawMessage(`{"model":"echo","x":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if s.Title != "hello" || !sameJSON(s.Metadata, `{"model":"echo","x":1}`) || s.Status != sessions.StatusActive {
			t.Fatalf("created %+v", s)
		}
		if _, err := st.Create(ctx, key, sessions.CreateOptions{}); !errors.Is(err, sessions.ErrConflict) {
			t.Fatalf("second create: %v, want ErrConflict", err)
		}
		if _, err := st.Create(ctx, sessions.Key{Surface: "api", SurfaceID: "a2", AgentID: "main"},
			sessions.CreateOptions{Metadata: json.RawMessage(`[1]`)}); !errors.Is(err, sessions.ErrInvalidMetadata) {
			t.Fatalf("array metadata: %v", err)
		}
		other, err := st.Create(ctx, sessions.Key{UserID: "u2", Surface: "api", SurfaceID: "a3", AgentID: "main"}, sessions.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(other.Metadata, "{}") {
			t.Fatalf("default metadata %s", other.Metadata)
		}

		title, agent, model := "renamed", "helper", ""
		u, err := st.Update(ctx, s.ID, sessions.Update{Title: &title, AgentID: &agent, Model: &model,
			Metadata: json.RawMessage(`{"x":null,"y":"z"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if u.Title != "renamed" || u.Key.AgentID != "helper" || !sameJSON(u.Metadata, `{"y":"z"}`) {
			t.Fatalf("updated %+v metadata %s", u, u.Metadata)
		}
		model = "openai/gpt-4o"
		if u, err = st.Update(ctx, s.ID, sessions.Update{Model: &model}); err != nil || !sameJSON(u.Metadata, `{"model":"openai/gpt-4o","y":"z"}`) {
			t.Fatalf("model: %v %s", err, u.Metadata)
		}
		if _, err := st.Update(ctx, "0190a0a0-0000-7000-8000-000000000000", sessions.Update{Title: &title}); !errors.Is(err, sessions.ErrNotFound) {
			t.Fatalf("update missing: %v", err)
		}
		// Moving onto a key that already has an active session conflicts.
		if _, err := st.Create(ctx, sessions.Key{UserID: "u1", Surface: "api", SurfaceID: "a1", AgentID: "main"}, sessions.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		back := "main"
		if _, err := st.Update(ctx, s.ID, sessions.Update{AgentID: &back}); !errors.Is(err, sessions.ErrConflict) {
			t.Fatalf("move onto active key: %v", err)
		}

		page, err := st.List(ctx, sessions.ListOptions{Limit: 10, UserID: "u2"})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Sessions) != 1 || page.Sessions[0].ID != other.ID {
			t.Fatalf("user filter: %+v", page.Sessions)
		}
	})
}

func sameJSON(got json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
