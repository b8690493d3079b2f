package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// outcome is how a message, or a turn's messages, ended: what is recorded
// on their inbound records and the reply (if any) queued to the chat.
type outcome struct {
	jobs    []job
	status  InboundStatus
	session sessions.ID
	// err is the inbound records' error text, for the operator.
	err string
	// replyTo is the message the reply answers, in its chat.
	replyTo job
	// text is the reply ("" for none), chunked at the adapter's limit.
	text string
	// shown is the message the reply's start was shown in as it streamed:
	// the reply's first chunk is its final edit.
	shown string
	// files are what the reply carries, sent after its text.
	files []adapters.OutFile
	// speak makes the reply a voice note.
	speak bool
}

// complete records how o's jobs ended and queues its reply (if any) to the
// chat of o.replyTo, in one transaction; then it wakes the sender. The
// reply's key makes a repeat a no-op.
func (g *Gateway) complete(ctx context.Context, o outcome) {
	ids, replies, rep := g.record(o)
	// Recorded even when the turn was aborted; a database outage is waited
	// out, until shutdown (the next start then answers them again).
	record := context.WithoutCancel(ctx)
	err := g.untilStored(record, g.lanes.ctx, "record the outcome of a message", func() error {
		err := g.opts.Store.CompleteWith(record, ids, o.status, string(o.session), o.err, replies, rep.queue)
		if errors.Is(err, ErrNotFound) && len(ids) > 0 {
			// A try whose commit went through though its answer was lost
			// finished them already; the repeat is a no-op.
			if done, derr := g.opts.Store.Finished(record, ids); derr == nil && done {
				return nil
			}
		}
		return err
	})
	if err != nil {
		g.opts.Log.ErrorContext(ctx, "record the outcome of a message", "adapter", o.replyTo.in.Adapter, "chat_id", o.replyTo.in.ChatID, "error", err)
		return
	}
	g.acknowledged(record, o.jobs)
	rep.done(record)
	if (len(replies) > 0 || rep != nil) && g.opts.Sender != nil {
		g.opts.Sender.Wake()
	}
}

// record is what complete stores of o, as the message's source declares:
// its inbound records' ids and the outbox rows of its reply, chunked at
// the adapter's limit; for a source that reports elsewhere, the report
// that queues the run's notes instead; for one whose caller reads the
// reply, nothing more.
func (g *Gateway) record(o outcome) (ids []string, replies []Reply, rep *report) {
	ids = make([]string, len(o.jobs))
	for i, j := range o.jobs {
		ids[i] = j.inboundID
	}
	for i := range o.files {
		// The files are the turn's session's, wherever they are sent.
		o.files[i].Session = cmp.Or(o.files[i].Session, string(o.session))
	}
	limit := 0
	if ad, ok := g.opts.Channels.Adapter(o.replyTo.in.Adapter); ok {
		switch adapters.SourceOf(ad).Replies {
		case adapters.RepliesToCaller:
			return ids, nil, nil // the caller reads the reply from the session
		case adapters.RepliesReported:
			r, ok := ad.(Reporter)
			if !ok || o.text == "" && len(o.files) == 0 {
				return ids, nil, nil
			}
			return ids, nil, &report{to: r, in: o.replyTo.in, key: o.replyTo.inboundID + ":0", text: o.text, files: o.files, failed: o.status != InboundDone}
		}
		limit = g.capabilities(o.replyTo.in.Adapter).MaxMessageLength
	}
	chunks := adapters.Chunk(o.text, limit)
	replies = make([]Reply, len(chunks))
	for i, c := range chunks {
		replies[i] = Reply{Key: fmt.Sprintf("%s:%d", o.replyTo.inboundID, i), SessionID: string(o.session), InboundID: o.replyTo.inboundID,
			Adapter: o.replyTo.in.Adapter, ChatID: o.replyTo.in.ChatID, ReplyTo: o.replyTo.in.MessageID, Text: c}
	}
	if len(replies) > 0 {
		replies[0].EditMessageID = o.shown
	}
	if o.speak && strings.TrimSpace(o.text) != "" {
		// The voice note first; its text beside it only when it is long
		// or holds code (or already shows, streamed).
		voice := Reply{Key: o.replyTo.inboundID + ":voice", SessionID: string(o.session), InboundID: o.replyTo.inboundID,
			Adapter: o.replyTo.in.Adapter, ChatID: o.replyTo.in.ChatID, ReplyTo: o.replyTo.in.MessageID, Text: o.text, Speak: true}
		switch {
		case o.shown != "":
			replies = append(replies, voice)
		case VoiceWithText(o.text, limit):
			replies = append([]Reply{voice}, replies...)
		default:
			replies = []Reply{voice}
		}
	}
	for i, f := range o.files {
		replies = append(replies, Reply{Key: fmt.Sprintf("%s:f%d", o.replyTo.inboundID, i), SessionID: string(o.session), InboundID: o.replyTo.inboundID,
			Adapter: o.replyTo.in.Adapter, ChatID: o.replyTo.in.ChatID, Text: f.Caption, FileSession: f.Session, FileName: f.Name})
	}
	return ids, replies, nil
}

// report is a reply a Reporter reports.
type report struct {
	to        Reporter
	in        adapters.Inbound
	key, text string
	files     []adapters.OutFile
	failed    bool
}

// queue queues the report's notes in q; nil does nothing.
func (rp *report) queue(ctx context.Context, q dbutil.Querier) error {
	if rp == nil {
		return nil
	}
	return rp.to.Report(ctx, q, rp.in, rp.key, rp.text, rp.files, rp.failed)
}

// done tells the Reporter its report committed.
func (rp *report) done(ctx context.Context) {
	if rp != nil {
		rp.to.Reported(ctx, rp.in, rp.key, rp.text, rp.files, rp.failed)
	}
}
