package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// idleResult is what `parley bench --idle --json` prints. The runs restart
// the daemon on the database its first start created and migrated; the
// first start is reported apart.
type idleResult struct {
	FirstReadyMs    float64   `json:"first_start_ready_ms"`
	FirstRSSMB      float64   `json:"first_start_idle_rss_mb"`
	Runs            int       `json:"runs"`
	ReadyMsMedian   float64   `json:"ready_ms_median"`
	ReadyMs         []float64 `json:"ready_ms"`
	IdleRSSMBMedian float64   `json:"idle_rss_mb_median"`
	IdleRSSMB       []float64 `json:"idle_rss_mb"`
	// The start-up peak (VmHWM) and the CPU (user and system) the daemon
	// used from exec until it had idled, medians of the restarts.
	PeakRSSMBMedian float64   `json:"startup_peak_rss_mb_median"`
	PeakRSSMB       []float64 `json:"startup_peak_rss_mb"`
	CPUMsMedian     float64   `json:"cpu_to_idle_ms_median"`
	CPUMs           []float64 `json:"cpu_to_idle_ms"`
	Cgo             bool      `json:"cgo"`
	// Burst is the resident set around a burst of API messages, with
	// --burst.
	Burst *burstResult `json:"burst,omitempty"`
}

// idleRun is one start's figures.
type idleRun struct {
	ready     time.Duration
	rss, peak float64
	cpu       time.Duration
}

// idleSettle is how long a started daemon idles before its RSS is read.
const idleSettle = 3 * time.Second

// BenchIdle starts `parley run` with no channels on a new SQLite database,
// then restarts it runs times on that database. Each time it measures the
// time from exec to the first 200 from /readyz, then the resident set once
// the daemon has idled.
//
// With burst > 0 it then starts the daemon with the API on, sends burst
// messages over it, and reads the resident set for a minute after.
func Idle(ctx context.Context, exe string, runs, burst int, asJSON bool, stdout io.Writer) error {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("find this binary: %w", err)
		}
	}
	cgo, err := builtWithCgo(exe)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "parley-idle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The daemon runs from a copy of the binary, as a deployed one does:
	// its code pages are then its own, not shared with this process's
	// mapping of the same file, and RSS counts what the daemon holds.
	if exe, err = copyBinary(exe, filepath.Join(dir, "parley")); err != nil {
		return err
	}
	r := idleResult{Runs: runs, Cgo: cgo}
	first, err := idleOnce(ctx, exe, dir)
	if err != nil {
		return fmt.Errorf("first start: %w", err)
	}
	r.FirstReadyMs, r.FirstRSSMB = ms(first.ready), first.rss
	for i := range runs {
		run, err := idleOnce(ctx, exe, dir)
		if err != nil {
			return fmt.Errorf("restart %d: %w", i+1, err)
		}
		r.ReadyMs = append(r.ReadyMs, ms(run.ready))
		r.IdleRSSMB = append(r.IdleRSSMB, run.rss)
		r.PeakRSSMB = append(r.PeakRSSMB, run.peak)
		r.CPUMs = append(r.CPUMs, ms(run.cpu))
	}
	r.ReadyMsMedian, r.IdleRSSMBMedian = median(r.ReadyMs), median(r.IdleRSSMB)
	r.PeakRSSMBMedian, r.CPUMsMedian = median(r.PeakRSSMB), median(r.CPUMs)
	if burst > 0 {
		b, err := benchBurst(ctx, exe, dir, burst)
		if err != nil {
			return fmt.Errorf("burst: %w", err)
		}
		r.Burst = &b
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	fmt.Fprintf(stdout, "ready (exec to /readyz 200)  median %.1f ms over %d restarts %v\n", r.ReadyMsMedian, r.Runs, r.ReadyMs)
	fmt.Fprintf(stdout, "idle RSS after %s           median %.1f MB %v\n", idleSettle, r.IdleRSSMBMedian, r.IdleRSSMB)
	fmt.Fprintf(stdout, "start-up peak RSS (VmHWM)    median %.1f MB %v\n", r.PeakRSSMBMedian, r.PeakRSSMB)
	fmt.Fprintf(stdout, "CPU from exec to idle        median %.1f ms %v\n", r.CPUMsMedian, r.CPUMs)
	fmt.Fprintf(stdout, "first start (new database)   ready %.1f ms, idle RSS %.1f MB\n", r.FirstReadyMs, r.FirstRSSMB)
	if b := r.Burst; b != nil {
		fmt.Fprintf(stdout, "burst: %d API messages over %d sessions in %.1f s: RSS idle %.1f MB, at the end %.1f MB, peak %.1f MB\n",
			b.Messages, b.Sessions, b.Seconds, b.IdleRSSMB, b.EndRSSMB, b.PeakRSSMB)
		for _, at := range b.After {
			fmt.Fprintf(stdout, "  %2d s after: %.1f MB\n", at.Seconds, at.RSSMB)
		}
		fmt.Fprintf(stdout, "  of which anonymous %.1f MB; Go heap in use %.1f MB, live %.1f MB\n", b.AfterAnonMB, b.AfterHeapUseMB, b.AfterHeapLiveMB)
	}
	if r.Cgo {
		fmt.Fprintln(stdout, "this binary links libc (cgo); CGO_ENABLED=0 go build gives a static one, which holds a little less")
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func idleOnce(ctx context.Context, exe, dir string) (idleRun, error) {
	p, err := startRun(ctx, exe, dir, "parley", "")
	if err != nil {
		return idleRun{}, err
	}
	defer p.stop()
	time.Sleep(idleSettle)
	run, err := readIdle(p.cmd.Process.Pid)
	run.ready = p.ready
	return run, err
}

// runningDaemon is a `parley run` a bench started.
type runningDaemon struct {
	cmd    *exec.Cmd
	addr   string
	ready  time.Duration // from exec to the first 200 from /readyz
	exited chan error
}

// startRun starts `parley run` on a new config in dir, named name, with
// no channels, the database name.db, and http.tokens [token] when token
// is set, and waits until /readyz answers 200, polling it in a tight loop.
func startRun(ctx context.Context, exe, dir, name, token string) (*runningDaemon, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, name+".yaml")
	body := fmt.Sprintf("database:\n  url: %s\nhttp:\n  listen: %s\n", filepath.Join(dir, name+".db"), addr)
	if token != "" {
		body += fmt.Sprintf("  tokens: [%q]\n", token)
	}
	if err := os.WriteFile(cfg, []byte(body+"log:\n  level: error\n"), 0o600); err != nil {
		return nil, err
	}
	p := &runningDaemon{cmd: exec.Command(exe, "run", "--config", cfg), addr: addr, exited: make(chan error, 1)}
	p.cmd.Env = idleEnv()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + addr + "/readyz"
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exited <- p.cmd.Wait() }()
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.ready = time.Since(start)
				return p, nil
			}
		}
		select {
		case err := <-p.exited:
			return nil, fmt.Errorf("parley run exited before it was ready: %v", err)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
		if time.Since(start) > 30*time.Second {
			p.stop()
			return nil, errors.New("parley run was not ready within 30s")
		}
	}
}

// stop ends the daemon with SIGTERM, or SIGKILL after 10 s.
func (p *runningDaemon) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// readIdle reads a daemon's resident set, its peak and the CPU it has used
// (Linux: /proc/PID/status and /proc/PID/stat).
func readIdle(pid int) (idleRun, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return idleRun{}, fmt.Errorf("read the daemon's memory: %w (the idle figures need Linux's /proc)", err)
	}
	run := idleRun{rss: statusMB(string(b), "VmRSS:"), peak: statusMB(string(b), "VmHWM:")}
	if b, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil {
		return idleRun{}, fmt.Errorf("read the daemon's CPU time: %w", err)
	}
	run.cpu = statCPU(b)
	if cpu := threadsCPU(pid); cpu > 0 {
		run.cpu = cpu
	}
	return run, nil
}

// threadsCPU sums the time each of a process's threads has run, from
// /proc/PID/task/*/schedstat, in nanoseconds (the stat file counts in
// ticks of 10 ms, too coarse for a start-up). A Go process keeps its
// threads, so none of the start's time is missed; 0 when unreadable.
func threadsCPU(pid int) time.Duration {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		sum += time.Duration(ns)
	}
	return sum
}

func copyBinary(from, to string) (string, error) {
	src, err := os.Open(from)
	if err != nil {
		return "", fmt.Errorf("copy the binary: %w", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", fmt.Errorf("copy the binary: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", fmt.Errorf("copy the binary: %w", err)
	}
	return to, dst.Close()
}

// idleEnv is this environment without provider keys, so the daemon starts
// on its offline defaults.
func idleEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "PARLEY_") {
			env = append(env, kv)
		}
	}
	return env
}

// statusMB reads a kB figure from /proc/*/status text, in MB.
func statusMB(status, field string) float64 {
	for _, line := range strings.Split(status, "\n") {
		if strings.HasPrefix(line, field) {
			if f := strings.Fields(line); len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// builtWithCgo reports whether the binary at path links libc, as a Go
// binary built with cgo does: its ELF program headers ask for an
// interpreter (PT_INTERP), the dynamic loader. A static binary has none.
// Reading the header by hand spares the daemon debug/elf and its DWARF and
// object-format siblings, which only this check used.
func builtWithCgo(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("read %s: %w; --binary takes a parley binary", path, err)
	}
	defer f.Close()
	var hdr [64]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil || string(hdr[:4]) != "\x7fELF" || hdr[4] != 2 || hdr[5] != 1 {
		return false, fmt.Errorf("%s is not a 64-bit little-endian ELF binary; --binary takes a parley binary built for Linux", path)
	}
	phoff := binary.LittleEndian.Uint64(hdr[0x20:])
	phentsize := int64(binary.LittleEndian.Uint16(hdr[0x36:]))
	phnum := int64(binary.LittleEndian.Uint16(hdr[0x38:]))
	const ptInterp = 3
	var typ [4]byte
	for i := range phnum {
		if _, err := f.ReadAt(typ[:], int64(phoff)+i*phentsize); err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		if binary.LittleEndian.Uint32(typ[:]) == ptInterp {
			return true, nil
		}
	}
	return false, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
