package turns

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/media"
)

// turnImages fetches the photos of a turn's messages for a vision model, in
// message order, and says in a line for the user what it couldn't show:
// a photo is never dropped without a word.
func (b *Bridge) turnImages(ctx context.Context, a config.Agent, ft *turnFetch) ([][]llm.Image, []string) {
	msgs := ft.msgs
	images := make([][]llm.Image, len(msgs))
	var notices []string
	note := func(s string) {
		for _, n := range notices {
			if n == s {
				return
			}
		}
		notices = append(notices, s)
	}
	total := 0
	limit := cmp.Or(a.Images.MaxPerTurn, config.DefaultMaxImagesPerTurn)
	for i, m := range msgs {
		if countImages(m) == 0 {
			continue
		}
		if !a.Vision {
			note("(This agent's model can't see images, so I read only the text of your message.)")
			continue
		}
		for j, f := range m.Files {
			if !media.IsImage(f.MediaType) {
				continue
			}
			if total == limit {
				note(fmt.Sprintf("(I looked at the first %d images only.)", limit))
				break
			}
			name := cmp.Or(f.Name, "your image")
			got := ft.file(i, j)
			if got.noFetcher {
				note("(I can't fetch images from this channel, so I read only the text of your message.)")
				break
			}
			err := got.err
			var img llm.Image
			if err == nil {
				img, err = media.Prepare(got.data, cmp.Or(got.typ, f.MediaType))
			}
			switch {
			case errors.Is(err, adapters.ErrTooLarge) || errors.Is(err, media.ErrTooLarge):
				note(fmt.Sprintf("(%s is over %d MB, so I couldn't look at it.)", name, media.MaxFetchBytes>>20))
			case errors.Is(err, media.ErrUnsupported):
				note(fmt.Sprintf("(%s is in a format I can't read (%s); a JPEG or PNG works.)", name, f.MediaType))
			case err != nil:
				b.log.WarnContext(ctx, "fetch an image for the model", "adapter", m.Adapter, "chat_id", m.ChatID, "error", err)
				note(fmt.Sprintf("(I couldn't fetch %s; please send it again.)", name))
			default:
				images[i] = append(images[i], img)
				total++
			}
		}
	}
	return images, notices
}

func countImages(m adapters.Inbound) int {
	n := 0
	for _, f := range m.Files {
		if media.IsImage(f.MediaType) {
			n++
		}
	}
	return n
}
