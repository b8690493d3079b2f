package metrics

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
)

// userHZ is the kernel's clock tick for /proc times, 100 on every Linux
// platform Go supports.
const userHZ = 100

// writeProcess writes the process_* families the Prometheus Go client's
// process collector gives, read from /proc; one that can't be read is left
// out.
func writeProcess(e *exposer) {
	stat, statErr := readProcStat()
	if statErr == nil {
		e.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", stat.cpu)
	}
	openFiles, addressSpace, limitsErr := readLimits()
	if limitsErr == nil {
		e.gauge("process_max_fds", "Maximum number of open file descriptors.", openFiles)
	}
	if in, out, err := readNetstat(); err == nil {
		e.counter("process_network_receive_bytes_total", "Number of bytes received by the process over the network.", in)
		e.counter("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.", out)
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds)))
	}
	if statErr == nil {
		e.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", stat.rss)
		if stat.start > 0 {
			e.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", stat.start)
		}
		e.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", stat.vsize)
	}
	if limitsErr == nil {
		e.gauge("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", addressSpace)
	}
}

type procStat struct{ cpu, rss, vsize, start float64 }

// readProcStat reads /proc/self/stat (see proc(5)); start needs the boot
// time from /proc/stat and is 0 without it.
func readProcStat() (procStat, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'. fields[0] is then the state, field 3 of proc(5).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, os.ErrInvalid
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 22 {
		return procStat{}, os.ErrInvalid
	}
	num := func(field int) float64 { // field as numbered in proc(5)
		v, _ := strconv.ParseFloat(fields[field-3], 64)
		return v
	}
	s := procStat{
		cpu:   (num(14) + num(15)) / userHZ,
		vsize: num(23),
		rss:   num(24) * float64(os.Getpagesize()),
	}
	if boot, err := bootTime(); err == nil {
		s.start = boot + num(22)/userHZ
	}
	return s, nil
}

func bootTime() (float64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, os.ErrNotExist
}

// readLimits returns the soft limits on open files and address space;
// "unlimited" reads as 2^64-1, as the Prometheus client has it.
func readLimits() (openFiles, addressSpace float64, err error) {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0, 0, err
	}
	soft := func(rest string) float64 {
		f := strings.Fields(rest)
		if len(f) == 0 || f[0] == "unlimited" {
			return math.MaxUint64
		}
		v, _ := strconv.ParseFloat(f[0], 64)
		return v
	}
	var seen int
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Max open files "); ok {
			openFiles = soft(rest)
			seen++
		} else if rest, ok := strings.CutPrefix(line, "Max address space "); ok {
			addressSpace = soft(rest)
			seen++
		}
	}
	if seen != 2 {
		return 0, 0, os.ErrInvalid
	}
	return openFiles, addressSpace, nil
}

// readNetstat returns IpExt's InOctets and OutOctets from
// /proc/self/net/netstat: the network namespace's bytes in and out.
func readNetstat() (in, out float64, err error) {
	b, err := os.ReadFile("/proc/self/net/netstat")
	if err != nil {
		return 0, 0, err
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "IpExt:")
		if !ok {
			continue
		}
		if names == nil {
			names = strings.Fields(rest)
			continue
		}
		for i, v := range strings.Fields(rest) {
			if i >= len(names) {
				break
			}
			switch names[i] {
			case "InOctets":
				in, _ = strconv.ParseFloat(v, 64)
			case "OutOctets":
				out, _ = strconv.ParseFloat(v, 64)
			}
		}
		return in, out, nil
	}
	return 0, 0, os.ErrNotExist
}
