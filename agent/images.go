package agent

import (
	"cmp"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/media"
	"github.com/parleyd/parley/sessions"
)

// attachStoredImages shows a vision model the images kept with earlier
// messages of the prompt (a photo sent turns ago, before a restart, in the
// parent of a branch), newest first, after the run's own: within the
// agent's MaxImages in all and MaxImageBytes for these. Each image of a
// message goes with that message. One that can't be read or prepared is
// left out (the message still names it), with a line in the log.
func (t *turn) attachStoredImages(msgs []sessions.Message) {
	cfg := t.req.Agent
	if t.side != nil || !cfg.Vision || t.r.opts.StoredFile == nil || cfg.MaxImageBytes <= 0 {
		return
	}
	count := cmp.Or(cfg.MaxImages, config.DefaultMaxImagesPerTurn)
	// The prompt's user messages, in order, as toLLM made them: one per
	// stored user message.
	var users []int
	for i, m := range t.call.Messages {
		if m.Role == llm.RoleUser {
			users = append(users, i)
		}
	}
	var stored []sessions.Message
	for _, m := range msgs {
		if m.Role == sessions.RoleUser {
			stored = append(stored, m)
		}
	}
	if len(users) != len(stored) {
		return // never: toLLM keeps every user message
	}
	for _, i := range users {
		count -= len(t.call.Messages[i].Images)
	}
	budget := cfg.MaxImageBytes
	for k := len(stored) - 1; k >= 0 && count > 0 && budget > 0; k-- {
		msg := &t.call.Messages[users[k]]
		if len(msg.Images) > 0 {
			continue // the run's own, attached already
		}
		var imgs []llm.Image
		for _, p := range stored[k].Parts {
			d, ok := p.File()
			if !ok || d.Stored == "" || !media.IsImage(p.MediaType) || count == 0 {
				continue
			}
			data, typ, err := t.r.opts.StoredFile(t.pctx, t.id, d.Stored)
			var img llm.Image
			if err == nil {
				img, err = media.Prepare(data, cmp.Or(typ, p.MediaType))
			}
			if err != nil {
				t.r.log.InfoContext(t.pctx, "an earlier image was not shown again", "session_id", t.id, "file", d.Stored, "error", err)
				continue
			}
			if len(img.Data) > budget {
				continue // a smaller, older one may still fit
			}
			budget -= len(img.Data)
			count--
			imgs = append(imgs, img)
		}
		msg.Images = imgs
	}
}
