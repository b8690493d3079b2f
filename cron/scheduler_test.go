package cron_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func tg(chat string) cron.Target { return cron.Target{Adapter: "tg-main", ChatID: chat} }

func TestFireDeliversInboundAndReplyFinishesReceipt(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T10:30:00Z")
		j := e.add(cron.Job{ID: "report", Schedule: "0 * * * *", Prompt: "Summarize the news.", AgentID: "writer",
			Notify: []cron.Target{tg("123456"), {Adapter: "dc-main", ChatID: "987"}}})
		s := e.start()
		e.sink.none(t)

		e.clk.Step(t, 30*time.Minute)
		at := mustTime(t, "2025-06-02T11:00:00Z")
		in := e.sink.next(t)
		wantChat := fmt.Sprintf("report:%d", at.UnixMilli())
		if in.Adapter != "cron" || in.Surface != sessions.SurfaceCron || in.ChatID != wantChat || in.MessageID != wantChat ||
			in.UserID != "cron" || !in.Group || in.AgentID != "writer" || in.Text != j.Prompt || !in.Time.Equal(at) {
			t.Fatalf("inbound = %+v", in)
		}
		r := e.onlyRun("report")
		if r.Status != cron.StatusStarted || r.Kind != cron.KindSchedule || !r.ScheduledAt.Equal(at) ||
			!r.DeadlineAt.Equal(at.Add(cron.DefaultTimeout)) || r.ChatID() != wantChat {
			t.Fatalf("receipt while running = %+v", r)
		}
		if got := r.SessionKey(); got != sessions.CronKey("report", at, "writer") || got.String() != "cron:"+wantChat {
			t.Fatalf("session key = %v", got)
		}
		if len(s.Running()) != 1 {
			t.Fatalf("Running() = %v", s.Running())
		}

		e.clk.Step(t, 20*time.Second)
		e.reply(s, wantChat, "Here is the news.")
		r = e.onlyRun("report")
		if r.Status != cron.StatusOK || r.Result != "Here is the news." || r.Error != "" || r.EndedAt.IsZero() || r.NotifiedAt.IsZero() ||
			r.SessionID != sessions.ID("session-of-cron:"+wantChat) {
			t.Fatalf("receipt after the reply = %+v", r)
		}
		notes := e.notes.all()
		if len(notes) != 2 {
			t.Fatalf("notices = %+v, want one per target", notes)
		}
		for i, target := range j.Notify {
			n := notes[i]
			if n.Target != target || n.Text != "Here is the news." || n.JobID != "report" || n.RunID != r.ID ||
				n.Status != cron.StatusOK || n.Key != "cron:"+r.ID+":"+target.String() || n.Session != r.SessionKey() {
				t.Fatalf("notice %d = %+v", i, n)
			}
		}
		// The outbox retrying the same reply changes nothing and sends nothing twice.
		e.reply(s, wantChat, "Here is the news.")
		if len(e.notes.all()) != 2 || e.onlyRun("report").Status != cron.StatusOK {
			t.Fatal("a repeated reply was notified again")
		}
		if len(s.Running()) != 0 {
			t.Fatalf("Running() after the reply = %v", s.Running())
		}
		// The next hour fires again, as a new session.
		e.clk.Step(t, time.Hour)
		if in := e.sink.next(t); in.ChatID != fmt.Sprintf("report:%d", at.Add(time.Hour).UnixMilli()) {
			t.Fatalf("second fire = %+v", in)
		}
		if _, err := e.store.Runs(ctx, "report", 0); err != nil {
			t.Fatal(err)
		}
	})
}

func TestNoTargetsSendsNothingButRecordsTheResult(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "quiet", Schedule: "0 11 * * *"})
		s := e.start()
		e.clk.Step(t, time.Minute)
		in := e.sink.next(t)
		e.reply(s, in.ChatID, "All quiet.")
		r := e.onlyRun("quiet")
		if r.Status != cron.StatusOK || r.Result != "All quiet." {
			t.Fatalf("receipt = %+v", r)
		}
		if n := e.notes.all(); len(n) != 0 {
			t.Fatalf("notices = %+v, want none", n)
		}
	})
}

func TestNoOverlap(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:00:30Z")
		e.add(cron.Job{ID: "slow", Schedule: "* * * * *", Timeout: 10 * time.Minute})
		s := e.start()

		e.clk.Step(t, 30*time.Second) // 10:01
		first := e.sink.next(t)
		e.clk.Step(t, time.Minute) // 10:02: the 10:01 run is still going
		e.sink.none(t)
		runs := e.runs("slow")
		if len(runs) != 2 || runs[0].Status != cron.StatusSkipped || runs[1].Status != cron.StatusStarted ||
			!strings.Contains(runs[0].Error, "still running") || runs[0].EndedAt.IsZero() {
			t.Fatalf("receipts = %+v", runs)
		}
		// A manual run is refused the same way.
		r, err := s.RunNow(context.Background(), "slow")
		if err != nil || r.Status != cron.StatusSkipped || r.Kind != cron.KindManual {
			t.Fatalf("RunNow while running = %+v, %v", r, err)
		}
		e.sink.none(t)

		e.reply(s, first.ChatID, "done")
		e.clk.Step(t, time.Minute) // 10:03 runs again
		if in := e.sink.next(t); in.ChatID == first.ChatID {
			t.Fatalf("fire after the run ended = %+v", in)
		}
	})
}

func TestTimeoutAbortsAndRecords(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "stuck", Schedule: "0 * * * *", Timeout: 2 * time.Minute, Notify: []cron.Target{tg("1")}})
		s := e.start()
		e.clk.Step(t, time.Minute)
		in := e.sink.next(t)
		e.clk.Step(t, time.Minute)
		if r := e.onlyRun("stuck"); r.Status != cron.StatusStarted {
			t.Fatalf("receipt before the timeout = %+v", r)
		}
		e.clk.Step(t, time.Minute)
		r := e.onlyRun("stuck")
		if r.Status != cron.StatusTimeout || !strings.Contains(r.Error, "2m0s") || !r.EndedAt.Equal(mustTime(t, "2025-06-02T11:02:00Z")) {
			t.Fatalf("receipt after the timeout = %+v", r)
		}
		if got := e.abortedKeys(); len(got) != 1 || got[0] != sessions.CronKey("stuck", mustTime(t, "2025-06-02T11:00:00Z"), "main") {
			t.Fatalf("aborted = %v", got)
		}
		notes := e.notes.all()
		if len(notes) != 1 || notes[0].Status != cron.StatusTimeout || !strings.Contains(notes[0].Text, "did not finish within 2m0s") {
			t.Fatalf("notices = %+v", notes)
		}
		// The aborted turn's partial reply arrives late: kept, not notified again.
		e.reply(s, in.ChatID, "partial")
		r = e.onlyRun("stuck")
		if r.Status != cron.StatusTimeout || r.Result != "partial" || len(e.notes.all()) != 1 {
			t.Fatalf("receipt after a late reply = %+v; notices %d", r, len(e.notes.all()))
		}
	})
}

func TestFailureThroughFinish(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "flaky", Schedule: "0 * * * *", Notify: []cron.Target{tg("1")}})
		s := e.start()
		e.clk.Step(t, time.Minute)
		in := e.sink.next(t)
		if err := s.Finish(ctx, in.ChatID, "sess-1", "", errors.New("model unavailable\nstack...")); err != nil {
			t.Fatal(err)
		}
		// The gateway's apology follows through Send: nothing changes.
		e.reply(s, in.ChatID, "Sorry, something went wrong while answering (ref 0a1b2c3d); please try again shortly.")
		r := e.onlyRun("flaky")
		if r.Status != cron.StatusError || !strings.HasPrefix(r.Error, "model unavailable") || r.SessionID != "sess-1" {
			t.Fatalf("receipt = %+v", r)
		}
		notes := e.notes.all()
		// The targets learn the run failed and its ref, never the error's
		// text (it could name a host or carry an SQL error).
		want := "Scheduled job flaky failed (ref " + r.ID + "); the operator can see why with `parley cron runs flaky`."
		if len(notes) != 1 || notes[0].Text != want {
			t.Fatalf("notices = %+v", notes)
		}
	})
}

func TestEmptyReplyThroughFinish(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "silent", Schedule: "0 * * * *", Notify: []cron.Target{tg("1")}})
		s := e.start()
		e.clk.Step(t, time.Minute)
		in := e.sink.next(t)
		if err := s.Finish(context.Background(), in.ChatID, "sess-2", "", nil); err != nil {
			t.Fatal(err)
		}
		if r := e.onlyRun("silent"); r.Status != cron.StatusOK || r.Result != "" || r.SessionID != "sess-2" {
			t.Fatalf("receipt = %+v", r)
		}
		if n := e.notes.all(); len(n) != 0 {
			t.Fatalf("an empty reply was notified: %+v", n)
		}
	})
}

func TestDeliveryFailureIsAnError(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "nodb", Schedule: "0 * * * *"})
		e.start()
		e.sink.setErr(errBoom)
		e.clk.Step(t, time.Minute)
		if r := e.onlyRun("nodb"); r.Status != cron.StatusError || !strings.Contains(r.Error, "deliver to the gateway: boom") {
			t.Fatalf("receipt = %+v", r)
		}
	})
}

func TestNotifyFailureIsRetriedBySend(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "retry", Schedule: "0 * * * *", Notify: []cron.Target{tg("1")}})
		s := e.start()
		e.clk.Step(t, time.Minute)
		in := e.sink.next(t)
		e.notes.setFail(errBoom)
		if _, err := s.Send(ctx, outbound(in.ChatID, "result")); err == nil {
			t.Fatal("Send succeeded though the notification failed; the outbox would not retry it")
		}
		if r := e.onlyRun("retry"); r.Status != cron.StatusOK || !r.NotifiedAt.IsZero() {
			t.Fatalf("receipt = %+v", r)
		}
		e.notes.setFail(nil)
		e.reply(s, in.ChatID, "result")
		if n := e.notes.all(); len(n) != 1 || n[0].Text != "result" {
			t.Fatalf("notices = %+v", n)
		}
		if r := e.onlyRun("retry"); r.NotifiedAt.IsZero() {
			t.Fatalf("receipt = %+v", r)
		}
	})
}

func TestUnknownReplyIsDropped(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		s := e.start()
		for _, chat := range []string{"nojob:1700000000000", "garbage", ":5"} {
			if _, err := s.Send(context.Background(), outbound(chat, "x")); err != nil {
				t.Fatalf("Send(%q) = %v, want it dropped", chat, err)
			}
		}
	})
}

func TestCatchUpAfterDowntime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		catchUp  time.Duration
		downFor  time.Duration // from 08:00; the job is due at 09:00 daily
		want     cron.Status
		wantKind cron.Kind
		wantAt   string
	}{
		{"the window covers the miss", 2 * time.Hour, 150 * time.Minute, cron.StatusStarted, cron.KindCatchUp, "2025-06-02T09:00:00Z"},
		{"the window is too short", time.Hour, 150 * time.Minute, cron.StatusSkipped, cron.KindSchedule, "2025-06-02T09:00:00Z"},
		{"catch_up off", 0, 150 * time.Minute, cron.StatusSkipped, cron.KindSchedule, "2025-06-02T09:00:00Z"},
		{"back within the grace", 0, 60*time.Minute + 30*time.Second, cron.StatusStarted, cron.KindSchedule, "2025-06-02T09:00:00Z"},
		// Three days down: one receipt, for the most recent miss.
		{"long downtime, covered", 6 * time.Hour, 3*24*time.Hour + 2*time.Hour, cron.StatusStarted, cron.KindCatchUp, "2025-06-05T09:00:00Z"},
		{"long downtime, not covered", 30 * time.Minute, 3*24*time.Hour + 2*time.Hour, cron.StatusSkipped, cron.KindSchedule, "2025-06-05T09:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
				e := newEnv(t, open(t), "2025-06-01T08:00:00Z")
				e.add(cron.Job{ID: "daily", Schedule: "0 9 * * *", CatchUp: tc.catchUp})
				// Day one runs normally.
				s := e.start()
				e.clk.Step(t, time.Hour)
				e.reply(s, e.sink.next(t).ChatID, "day one")
				e.clk.Step(t, 23*time.Hour) // 2025-06-02 08:00
				s.stop()

				e.clk.Advance(tc.downFor) // parley is down
				s = e.start()
				runs := e.runs("daily")
				if len(runs) != 2 {
					t.Fatalf("receipts = %+v, want day one's and one for the miss", runs)
				}
				r := runs[0]
				if r.Status != tc.want || r.Kind != tc.wantKind || !r.ScheduledAt.Equal(mustTime(t, tc.wantAt)) {
					t.Fatalf("receipt for the miss = %+v", r)
				}
				if tc.want == cron.StatusSkipped {
					if !strings.Contains(r.Error, "missed") {
						t.Fatalf("skipped receipt says %q", r.Error)
					}
					e.sink.none(t)
				} else if in := e.sink.next(t); !in.Time.Equal(r.ScheduledAt) || in.ChatID != r.ChatID() {
					t.Fatalf("catch-up fire = %+v", in)
				}
				// A second restart doesn't handle the same miss again.
				s.stop()
				e.clk.Advance(time.Minute)
				e.start()
				if n := len(e.runs("daily")); n != 2 {
					t.Fatalf("a second restart left %d receipts", n)
				}
			})
		})
	}
}

func TestJobCreatedWhileDownStartsFromItsCreation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T09:30:00Z")
		e.add(cron.Job{ID: "new", Schedule: "0 9 * * *", CatchUp: 24 * time.Hour}) // the CLI, with no daemon running
		e.clk.Advance(time.Hour)
		e.start()
		if rs := e.runs("new"); len(rs) != 0 {
			t.Fatalf("a fire from before the job existed was handled: %+v", rs)
		}
	})
}

func TestRestartRecoversOpenRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "a", Schedule: "0 * * * *", Timeout: 10 * time.Minute})
		e.add(cron.Job{ID: "b", Schedule: "0 * * * *", Timeout: 2 * time.Minute})
		s := e.start()
		e.clk.Step(t, time.Minute)
		first := []string{e.sink.next(t).ChatID, e.sink.next(t).ChatID}
		s.stop()

		// Back after 3 minutes: a's run is inside its timeout and is
		// delivered again (the gateway drops it if it has it); b's is past.
		e.clk.Advance(3 * time.Minute)
		s = e.start()
		if d := e.sink.duplicates(); d != 1 {
			t.Fatalf("the open run was delivered again %d times, want 1 (dropped as a duplicate)", d)
		}
		if r := e.onlyRun("b"); r.Status != cron.StatusTimeout || !strings.Contains(r.Error, "parley stopped") {
			t.Fatalf("b's receipt = %+v", r)
		}
		if r := e.onlyRun("a"); r.Status != cron.StatusStarted {
			t.Fatalf("a's receipt = %+v", r)
		}
		chatA := first[0]
		if !strings.HasPrefix(chatA, "a:") {
			chatA = first[1]
		}
		e.reply(s, chatA, "late but fine")
		if r := e.onlyRun("a"); r.Status != cron.StatusOK {
			t.Fatalf("a's receipt after the reply = %+v", r)
		}
	})
}

func TestRestartTimesOutRecoveredRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "a", Schedule: "0 * * * *", Timeout: 10 * time.Minute})
		s := e.start()
		e.clk.Step(t, time.Minute)
		e.sink.next(t)
		s.stop()
		e.clk.Advance(time.Minute)
		e.start()
		e.clk.Step(t, 9*time.Minute) // the original deadline, 11:10
		if r := e.onlyRun("a"); r.Status != cron.StatusTimeout {
			t.Fatalf("receipt = %+v", r)
		}
	})
}

func TestJobsSurviveRestartAndChangesArePickedUp(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		e := newEnv(t, db, "2025-06-02T10:30:00Z")
		e.add(cron.Job{ID: "kept", Schedule: "0 * * * *"})
		s := e.start()
		s.stop()

		// A new process on the same database: the job is still there and fires.
		e2 := newEnvClock(t, db, e.clk)
		jobs, err := e2.store.List(ctx)
		if err != nil || len(jobs) != 1 || jobs[0].ID != "kept" {
			t.Fatalf("jobs after restart = %+v, %v", jobs, err)
		}
		s2 := e2.start()
		// Added while running, from this process: Reload picks it up now.
		mark := e2.clk.Mark()
		e2.add(cron.Job{ID: "added", Schedule: "0 * * * *"})
		s2.Reload()
		e2.clk.WaitIdle(t, mark)
		// Disabled and removed jobs don't fire.
		e2.add(cron.Job{ID: "off", Schedule: "0 * * * *", Disabled: true})
		e2.add(cron.Job{ID: "gone", Schedule: "0 * * * *"})
		if err := e2.store.Remove(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		mark = e2.clk.Mark()
		s2.Reload()
		e2.clk.WaitIdle(t, mark)

		e2.clk.Step(t, 30*time.Minute)
		got := map[string]bool{}
		for range 2 {
			id, _, _ := cron.ParseChatID(e2.sink.next(t).ChatID)
			got[id] = true
		}
		e2.sink.none(t)
		if !got["kept"] || !got["added"] {
			t.Fatalf("fired %v, want kept and added", got)
		}
	})
}

func TestPollPicksUpJobsFromAnotherProcess(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		e := newEnv(t, db, "2025-06-02T10:30:00Z")
		e.start() // polls every hour
		// `parley cron add` in another process writes the job directly.
		other := cron.NewStore(db, e.clk.Now)
		if _, err := other.Add(context.Background(), cron.Job{ID: "cli", Schedule: "45 * * * *", Timezone: "UTC", AgentID: "main", Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
		e.clk.Step(t, 15*time.Minute) // 10:45: not read yet
		e.sink.none(t)
		// 11:30: the poll reads it. Its 10:45 fire was missed (polling
		// every hour here; 15s by default) and is recorded as such.
		e.clk.Step(t, 45*time.Minute)
		e.sink.none(t)
		if r := e.onlyRun("cli"); r.Status != cron.StatusSkipped || !r.ScheduledAt.Equal(mustTime(t, "2025-06-02T10:45:00Z")) {
			t.Fatalf("receipt = %+v", r)
		}
		e.clk.Step(t, 15*time.Minute)
		if in := e.sink.next(t); !strings.HasPrefix(in.ChatID, "cli:") {
			t.Fatalf("fire = %+v", in)
		}
	})
}

// On a SQLite file this process holds, a poll with nothing written since
// the last one reads nothing; one after a write reads the jobs again.
func TestIdlePollsLeaveTheDatabaseAlone(t *testing.T) {
	db := dbtest.SQLite(t)
	db.HoldsFile()
	reads := dbtest.CountReads(db)
	e := newEnv(t, db, "2025-06-02T10:30:00Z")
	// A config job: on a file no other process uses, its declaration is
	// not renewed, and stays.
	if err := e.store.SyncConfig(context.Background(), []cron.Job{{ID: "nightly", Schedule: "0 3 * * *", Timezone: "UTC", AgentID: "main", Prompt: "p"}}); err != nil {
		t.Fatal(err)
	}
	e.start() // polls every hour
	before, mark := reads.Load(), db.Mark()
	for range 5 {
		e.clk.Step(t, time.Hour)
	}
	if n := reads.Load() - before; n != 0 {
		t.Fatalf("five idle polls read the database %d times", n)
	}
	if !db.Unchanged(mark) {
		t.Fatal("an idle scheduler wrote to the database")
	}
	if _, err := e.store.Job(context.Background(), "nightly"); err != nil {
		t.Fatalf("the config job: %v", err)
	}
	// A job written without a reload (this process's API, say) is read by
	// the next poll, since the write changed the database.
	if _, err := cron.NewStore(db, e.clk.Now).Add(context.Background(), cron.Job{ID: "late", Schedule: "45 * * * *", Timezone: "UTC", AgentID: "main", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(t, 15*time.Minute) // 15:45: not read yet
	e.sink.none(t)
	e.clk.Step(t, 45*time.Minute) // 16:30: read, and its 15:45 fire recorded as missed
	if r := e.onlyRun("late"); r.Status != cron.StatusSkipped {
		t.Fatalf("receipt = %+v", r)
	}
	e.clk.Step(t, 15*time.Minute)
	if in := e.sink.next(t); !strings.HasPrefix(in.ChatID, "late:") {
		t.Fatalf("fire = %+v", in)
	}
}

func TestManualRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T10:30:00Z")
		e.add(cron.Job{ID: "m", Schedule: "0 0 1 1 *", Disabled: true})

		// Without a running scheduler RunNow says how to queue instead.
		idle, _ := cron.New(cron.Options{Store: e.store, Clock: e.clk})
		if _, err := idle.RunNow(ctx, "m"); !errors.Is(err, cron.ErrNotRunning) {
			t.Fatalf("RunNow before Start = %v", err)
		}
		s := e.start()
		if _, err := s.RunNow(ctx, "nope"); !errors.Is(err, cron.ErrNotFound) {
			t.Fatalf("RunNow(unknown) = %v", err)
		}
		mark := e.clk.Mark()
		r, err := s.RunNow(ctx, "m")
		if err != nil || r.Status != cron.StatusStarted || r.Kind != cron.KindManual || !r.ScheduledAt.Equal(e.clk.Now()) {
			t.Fatalf("RunNow = %+v, %v", r, err)
		}
		e.clk.WaitIdle(t, mark)
		in := e.sink.next(t)
		e.reply(s, in.ChatID, "manual result")

		// `parley cron run` from another process queues; the poll starts it.
		e.clk.Advance(time.Second)
		q, err := cron.NewStore(e.db, e.clk.Now).RequestRun(ctx, "m")
		if err != nil || q.Status != cron.StatusQueued {
			t.Fatalf("RequestRun = %+v, %v", q, err)
		}
		if _, err := e.store.RequestRun(ctx, "nope"); !errors.Is(err, cron.ErrNotFound) {
			t.Fatalf("RequestRun(unknown) = %v", err)
		}
		e.clk.Step(t, time.Hour)
		in = e.sink.next(t)
		if in.ChatID != q.ChatID() {
			t.Fatalf("queued run fired as %s, want %s", in.ChatID, q.ChatID())
		}
		got, err := e.store.Run(ctx, q.ID)
		if err != nil || got.Status != cron.StatusStarted || got.StartedAt.IsZero() {
			t.Fatalf("queued run after the poll = %+v, %v", got, err)
		}
	})
}

func TestFireAcrossSpringForward(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-03-29T23:00:00Z") // 00:00 CET on the 30th
		e.add(cron.Job{ID: "night", Schedule: "30 2 * * *", Timezone: "Europe/Berlin"})
		e.start()
		e.clk.Step(t, time.Hour+59*time.Minute) // 00:59 UTC
		e.sink.none(t)
		e.clk.Step(t, time.Minute) // 01:00 UTC, 03:00 CEST: the gap has ended
		in := e.sink.next(t)
		if !in.Time.Equal(mustTime(t, "2025-03-30T01:00:00Z")) {
			t.Fatalf("fire = %+v", in)
		}
	})
}

func TestTwoSchedulersOnOneDatabaseFireOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		e := newEnv(t, db, "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "shared", Schedule: "0 * * * *"})
		e.start()
		e2 := newEnvClock(t, db, e.clk)
		e2.start()
		e.clk.Step(t, time.Minute) // waits for both
		fired := len(e.sink.got) + len(e2.sink.got)
		if fired != 1 || len(e.runs("shared")) != 1 {
			t.Fatalf("fired %d times with %d receipts, want once", fired, len(e.runs("shared")))
		}
	})
}
