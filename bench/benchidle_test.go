package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
)

// builtWithCgo reads the ELF header: this test binary links libc exactly
// when it was built with cgo.
func TestBuiltWithCgo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads an ELF binary")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info")
	}
	want := false
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			want = s.Value == "1"
		}
	}
	got, err := builtWithCgo(exe)
	if err != nil || got != want {
		t.Fatalf("builtWithCgo(test binary) = %v, %v; the build says cgo %v", got, err, want)
	}
	text := filepath.Join(t.TempDir(), "not-a-binary")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := builtWithCgo(text); err == nil {
		t.Fatal("a shell script was read as a binary")
	}
}
