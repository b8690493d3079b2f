package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/internal/sleep"
)

const (
	// batchLimit is the most updates one getUpdates returns (Telegram's
	// own maximum).
	batchLimit = 100
	// maxParallel bounds the chats of one batch delivered at once: all of
	// them, so a batch's messages share the database's group commits (one
	// wait for a commit, not one for every 32 chats).
	maxParallel = batchLimit
	// ackTimeout bounds the getUpdates that confirms the last batch when
	// the adapter stops.
	ackTimeout = 5 * time.Second
)

// poller is the state of one polling run.
type poller struct {
	a    *Adapter
	sink adapters.Sink
	// offset is the first update not yet taken by the sink; Telegram is
	// told it with the next getUpdates, which confirms everything before.
	offset int
	// told is the offset the last successful getUpdates carried.
	told int
	// taken holds updates at or past offset that the sink already took,
	// so a batch fetched again after a failure isn't delivered twice.
	taken map[int]bool
}

// poll long-polls getUpdates until ctx ends. The offset moves past an
// update only once the sink took it; a chat whose delivery failed is
// retried, from its first untaken update, after a backoff, while the
// other chats of the batch go on.
func (a *Adapter) poll(ctx context.Context, sink adapters.Sink) error {
	p := &poller{a: a, sink: sink, taken: map[int]bool{}}
	defer p.ackOnStop(ctx)
	fetchFailures, deliverFailures := 0, 0
	for ctx.Err() == nil {
		updates, err := p.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if !isTransient(err) {
				a.setHealth(false, "getUpdates refused: "+err.Error())
				return err
			}
			fetchFailures++
			wait := a.backoff(fetchFailures)
			var rl *adapters.RateLimitError
			if errors.As(err, &rl) && rl.RetryAfter > wait {
				wait = rl.RetryAfter
			}
			a.setHealth(false, "getUpdates failing: "+err.Error())
			var ae *APIError
			if errors.As(err, &ae) && ae.Code == http.StatusConflict {
				a.log.ErrorContext(ctx, "telegram getUpdates refused: another process polls this bot, or a webhook is set; run one poller per token", "retry_in", wait, "error", err)
			} else {
				a.log.WarnContext(ctx, "telegram getUpdates failed; retrying", "attempt", fetchFailures, "retry_in", wait, "error", err)
			}
			if sleep.For(ctx, wait) != nil {
				break
			}
			continue
		}
		fetchFailures = 0
		a.setHealth(true, "polling as @"+a.identity().username)
		if p.deliver(ctx, updates) {
			deliverFailures = 0
			continue
		}
		deliverFailures++
		if sleep.For(ctx, a.backoff(deliverFailures)) != nil {
			break
		}
	}
	return nil
}

// fetch asks for the updates from offset on, which confirms the ones
// before it.
func (p *poller) fetch(ctx context.Context) ([]json.RawMessage, error) {
	timeout := p.a.cfg.pollTimeout
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Second+15*time.Second)
	defer cancel()
	params := tgbotapi.Params{
		"limit":           strconv.Itoa(batchLimit),
		"timeout":         strconv.Itoa(timeout),
		"allowed_updates": allowedUpdates,
	}
	params.AddNonZero("offset", p.offset)
	var raw []json.RawMessage
	if err := p.a.api.callInto(ctx, "getUpdates", params, &raw); err != nil {
		return nil, err
	}
	p.told = p.offset
	return raw, nil
}

// pending is one update of a batch on its way to the sink.
type pending struct {
	id int
	in adapters.Inbound
}

// deliver hands a batch to the sink, one goroutine per chat (at most
// maxParallel at once) so each chat keeps its order, and moves the offset
// to the first update not taken. It reports whether all were taken.
func (p *poller) deliver(ctx context.Context, batch []json.RawMessage) bool {
	me := p.a.identity()
	ids := make([]int, 0, len(batch))
	var chats [][]pending
	byChat := map[string]int{}
	for _, raw := range batch {
		var u update
		if err := json.Unmarshal(raw, &u); err != nil {
			// Taking it is the only way past it; say so loudly.
			var head struct {
				UpdateID int `json:"update_id"`
			}
			if json.Unmarshal(raw, &head) != nil || head.UpdateID == 0 {
				p.a.log.ErrorContext(ctx, "telegram sent an update without an update_id; ignored", "error", err)
				continue
			}
			p.a.log.ErrorContext(ctx, "telegram update could not be read; skipped", "update_id", head.UpdateID, "error", err)
			ids = append(ids, head.UpdateID)
			p.taken[head.UpdateID] = true
			continue
		}
		ids = append(ids, u.UpdateID)
		if p.taken[u.UpdateID] {
			continue
		}
		if u.CallbackQuery != nil {
			// A press waits for no message: it is answered at once.
			p.a.press(ctx, p.sink, u.CallbackQuery)
			p.taken[u.UpdateID] = true
			continue
		}
		in, ok := toInbound(p.a.id, me, &u)
		if ok {
			ok = p.a.valid(ctx, u.UpdateID, in)
		}
		if !ok {
			p.taken[u.UpdateID] = true
			continue
		}
		i, seen := byChat[in.ChatID]
		if !seen {
			i = len(chats)
			byChat[in.ChatID] = i
			chats = append(chats, nil)
		}
		chats[i] = append(chats[i], pending{u.UpdateID, in})
	}

	done := make([][]bool, len(chats))
	deliverChat := func(i int) {
		done[i] = make([]bool, len(chats[i]))
		for j, pu := range chats[i] {
			if !p.a.deliverOne(ctx, p.sink, pu.id, pu.in) {
				return // later messages of this chat wait for this one
			}
			done[i][j] = true
		}
	}
	if len(chats) == 1 {
		deliverChat(0)
	} else if len(chats) > 1 {
		var wg sync.WaitGroup
		slots := make(chan struct{}, maxParallel)
		for i := range chats {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				deliverChat(i)
			})
		}
		wg.Wait()
	}
	for i, c := range chats {
		for j, pu := range c {
			if done[i][j] {
				p.taken[pu.id] = true
			}
		}
	}

	// The new offset: the first update not taken, else past the last.
	slices.Sort(ids)
	all := true
	next := p.offset
	for _, id := range ids {
		if id < p.offset {
			continue
		}
		if !p.taken[id] {
			next, all = id, false
			break
		}
		next = id + 1
	}
	p.offset = next
	for id := range p.taken {
		if id < p.offset {
			delete(p.taken, id)
		}
	}
	return all
}

// deliverOne hands one message to the sink and reports whether it was
// taken, or refused as invalid (taken too: sending it again can't help).
func (a *Adapter) deliverOne(ctx context.Context, sink adapters.Sink, updateID int, in adapters.Inbound) bool {
	err := sink.Deliver(ctx, in)
	switch {
	case err == nil:
		return true
	case errors.Is(err, adapters.ErrInvalidInbound):
		a.log.WarnContext(ctx, "telegram message refused by the gateway; skipped", "update_id", updateID, "chat_id", in.ChatID, "message_id", in.MessageID, "error", err)
		return true
	case ctx.Err() == nil:
		a.log.WarnContext(ctx, "telegram message not taken; it will be delivered again", "update_id", updateID, "chat_id", in.ChatID, "message_id", in.MessageID, "error", err)
	}
	return false
}

// valid checks a message before delivery; an invalid one is logged and
// skipped, since Telegram would only send it again.
func (a *Adapter) valid(ctx context.Context, updateID int, in adapters.Inbound) bool {
	if err := in.Validate(); err != nil {
		a.log.WarnContext(ctx, "telegram message skipped", "update_id", updateID, "chat_id", in.ChatID, "message_id", in.MessageID, "error", err)
		return false
	}
	return true
}

// ackOnStop confirms, on the way out, the updates taken since the last
// getUpdates, so a restart doesn't fetch them again. Were it to fail (or
// the process die first) they come again, and the gateway drops them as
// duplicates.
func (p *poller) ackOnStop(ctx context.Context) {
	if p.offset <= p.told || errors.Is(context.Cause(ctx), adapters.ErrChannelLost) {
		// Nothing to confirm, or another replica polls the bot now: a
		// getUpdates here would cut its poll off (409), and the updates
		// it fetches again are dropped as duplicates.
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	// limit 1 and no wait: whatever comes back is not confirmed by this
	// call and is left for the next run.
	params := tgbotapi.Params{"offset": strconv.Itoa(p.offset), "limit": "1", "timeout": "0", "allowed_updates": allowedUpdates}
	if _, err := p.a.api.call(ctx, "getUpdates", params); err != nil {
		p.a.log.WarnContext(ctx, "telegram updates taken but not confirmed at stop; they will come again and be dropped as duplicates", "offset", p.offset, "error", err)
	}
}
