// Package media prepares images for a model: it checks their size, and
// scales down those larger than a model takes, so a photo from any channel
// can be shown to a vision model.
package media

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // decodes GIF photos
	"image/jpeg"
	"image/png"
	"strings"

	"github.com/parleyd/parley/llm"
)

// Limits for an image sent to a model.
const (
	// MaxFetchBytes is the largest image parley fetches from a channel.
	MaxFetchBytes = 20 << 20
	// MaxSendBytes is the largest image sent to a model as it is; larger
	// ones are scaled down.
	MaxSendBytes = 4 << 20
	// MaxSide is the longest side, in pixels, an image keeps; providers
	// scale larger ones down anyway, and pay for the pixels first.
	MaxSide = 2048
)

var (
	// ErrTooLarge means an image is over MaxFetchBytes.
	ErrTooLarge = errors.New("image too large")
	// ErrUnsupported means an image is in a format parley can't read.
	ErrUnsupported = errors.New("image format not supported")
)

// IsImage reports whether a media type is an image.
func IsImage(mediaType string) bool {
	return strings.HasPrefix(strings.ToLower(mediaType), "image/")
}

// Prepare turns an image's bytes into what a model is sent: as it is when
// it is small enough, otherwise scaled down (to at most MaxSide pixels on
// its longest side) and re-encoded as JPEG.
func Prepare(data []byte, mediaType string) (llm.Image, error) {
	if len(data) > MaxFetchBytes {
		return llm.Image{}, fmt.Errorf("%w: %.1f MB; the limit is %d MB", ErrTooLarge, float64(len(data))/(1<<20), MaxFetchBytes>>20)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		// A format Go can't read (WebP, HEIC) goes as it is when small.
		if IsImage(mediaType) && len(data) <= MaxSendBytes && mediaType != "image/heic" {
			return llm.Image{MediaType: mediaType, Data: data}, nil
		}
		return llm.Image{}, fmt.Errorf("%w: %s", ErrUnsupported, mediaType)
	}
	typ := "image/" + format
	if len(data) <= MaxSendBytes && max(cfg.Width, cfg.Height) <= MaxSide {
		return llm.Image{MediaType: typ, Data: data}, nil
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return llm.Image{}, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	small := Downscale(img, MaxSide)
	var out bytes.Buffer
	if format == "png" && len(data) <= MaxSendBytes*2 {
		err = png.Encode(&out, small)
		typ = "image/png"
	} else {
		err = jpeg.Encode(&out, small, &jpeg.Options{Quality: 85})
		typ = "image/jpeg"
	}
	if err != nil {
		return llm.Image{}, fmt.Errorf("re-encode image: %w", err)
	}
	return llm.Image{MediaType: typ, Data: out.Bytes()}, nil
}

// Downscale returns img scaled so its longest side is at most side pixels,
// averaging the source pixels each target pixel covers. A smaller image is
// returned as it is.
func Downscale(img image.Image, side int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if max(w, h) <= side || w == 0 || h == 0 {
		return img
	}
	nw, nh := side, h*side/w
	if h > w {
		nw, nh = w*side/h, side
	}
	nw, nh = max(nw, 1), max(nh, 1)
	dst := image.NewRGBA(image.Rect(0, 0, nw, nh))
	for y := range nh {
		y0, y1 := b.Min.Y+y*h/nh, b.Min.Y+max((y+1)*h/nh, y*h/nh+1)
		for x := range nw {
			x0, x1 := b.Min.X+x*w/nw, b.Min.X+max((x+1)*w/nw, x*w/nw+1)
			var r, g, bl, a, n uint64
			for sy := y0; sy < y1; sy++ {
				for sx := x0; sx < x1; sx++ {
					cr, cg, cb, ca := img.At(sx, sy).RGBA()
					r, g, bl, a = r+uint64(cr), g+uint64(cg), bl+uint64(cb), a+uint64(ca)
					n++
				}
			}
			i := dst.PixOffset(x, y)
			dst.Pix[i+0] = uint8(r / n >> 8)
			dst.Pix[i+1] = uint8(g / n >> 8)
			dst.Pix[i+2] = uint8(bl / n >> 8)
			dst.Pix[i+3] = uint8(a / n >> 8)
		}
	}
	return dst
}
