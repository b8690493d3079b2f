package media

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"
)

func pngOf(t *testing.T, w, h int, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPrepare(t *testing.T) {
	small := pngOf(t, 64, 32, color.RGBA{200, 10, 10, 255})
	img, err := Prepare(small, "image/png")
	if err != nil || img.MediaType != "image/png" || !bytes.Equal(img.Data, small) {
		t.Fatalf("a small image should pass as it is: %v %s", err, img.MediaType)
	}

	big := pngOf(t, 3000, 1500, color.RGBA{10, 200, 10, 255})
	img, err = Prepare(big, "image/png")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width != MaxSide || cfg.Height != MaxSide/2 {
		t.Fatalf("scaled to %dx%d (%v), want %dx%d", cfg.Width, cfg.Height, err, MaxSide, MaxSide/2)
	}
	got, _, _ := image.Decode(bytes.NewReader(img.Data))
	if r, g, _, _ := got.At(100, 100).RGBA(); r>>8 != 10 || g>>8 != 200 {
		t.Fatalf("the colour changed: %d %d", r>>8, g>>8)
	}

	var jb bytes.Buffer
	tall := image.NewRGBA(image.Rect(0, 0, 1000, 5000))
	if err := jpeg.Encode(&jb, tall, nil); err != nil {
		t.Fatal(err)
	}
	img, err = Prepare(jb.Bytes(), "image/jpeg")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _, _ := image.DecodeConfig(bytes.NewReader(img.Data)); cfg.Height != MaxSide || cfg.Width != 1000*MaxSide/5000 || img.MediaType != "image/jpeg" {
		t.Fatalf("tall image scaled to %dx%d %s", cfg.Width, cfg.Height, img.MediaType)
	}

	if _, err := Prepare(make([]byte, MaxFetchBytes+1), "image/jpeg"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an oversized image: %v", err)
	}
	// WebP can't be decoded here; a small one goes as it is, a big one is refused.
	if img, err := Prepare([]byte("RIFF....WEBPVP8 "), "image/webp"); err != nil || img.MediaType != "image/webp" {
		t.Fatalf("a small webp: %v", err)
	}
	if _, err := Prepare(make([]byte, MaxSendBytes+1), "image/webp"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a big webp: %v", err)
	}
	if _, err := Prepare([]byte("not an image"), "application/pdf"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a pdf: %v", err)
	}
}

func TestDownscaleAverages(t *testing.T) {
	img := image.NewGray(image.Rect(0, 0, 4, 2))
	img.Pix = []uint8{0, 255, 0, 255, 0, 255, 0, 255}
	small := Downscale(img, 2)
	if b := small.Bounds(); b.Dx() != 2 || b.Dy() != 1 {
		t.Fatalf("size %v", b)
	}
	if r, _, _, _ := small.At(0, 0).RGBA(); r>>8 < 120 || r>>8 > 135 {
		t.Fatalf("average %d, want about 127", r>>8)
	}
	if Downscale(img, 10) != image.Image(img) {
		t.Fatal("a small image was copied")
	}
}
