package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// envRunMain makes the test binary act as the parley binary, so a test can
// run parley as its own process: os.Args[0] with this set and a parley
// command line.
const envRunMain = "PARLEY_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMCPServer) == "1" {
		serveMCP()
		os.Exit(0)
	}
	if path := os.Getenv(envExchanges); path != "" {
		if err := serveExchanges(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(envRunMain) == "1" {
		// What main does; main itself can't be called, the test binary owns it.
		// PARLEY_TEST_CPUPROFILE=FILE writes parley's own CPU profile, for
		// the benchmarks that run it as a process of its own.
		if path := os.Getenv("PARLEY_TEST_CPUPROFILE"); path != "" {
			f, err := os.Create(path)
			if err == nil && pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
		// PARLEY_TEST_MEMPROFILE=FILE writes parley's heap profile after
		// PARLEY_TEST_MEMPROFILE_AFTER (a duration; default 60s), for the
		// benchmarks that watch its memory.
		if path := os.Getenv("PARLEY_TEST_MEMPROFILE"); path != "" {
			after, err := time.ParseDuration(os.Getenv("PARLEY_TEST_MEMPROFILE_AFTER"))
			if err != nil {
				after = time.Minute
			}
			time.AfterFunc(after, func() {
				if f, err := os.Create(path); err == nil {
					runtime.GC()
					_ = pprof.WriteHeapProfile(f)
					f.Close()
				}
			})
		}
		ctx, stop := signal.NotifyContext(context.Background(), stopSignals(os.Args[1:])...)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		pprof.StopCPUProfile()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// parleyCommand is parley run as a process of its own with args.
func parleyCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	return cmd
}

func TestParleyProcessPrintsVersion(t *testing.T) {
	cmd := parleyCommand("version")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("parley version: %v; stderr %q", err, errOut.String())
	}
	if want := "parley " + version() + "\n"; out.String() != want {
		t.Fatalf("parley version printed %q, want %q (stderr %q)", out.String(), want, errOut.String())
	}
}
