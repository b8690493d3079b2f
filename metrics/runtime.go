package metrics

import (
	"runtime"
	"runtime/debug"
	rm "runtime/metrics"
	"time"
)

// The Go runtime's metrics, under the names, help and values the Prometheus
// Go client's default Go collector gives them (go_memstats_* derived from
// runtime/metrics as it derives them), so existing dashboards keep working.

// The runtime/metrics values read at each scrape.
const (
	rmTinyAllocs    = "/gc/heap/tiny/allocs:objects"
	rmAllocsObjects = "/gc/heap/allocs:objects"
	rmFreesObjects  = "/gc/heap/frees:objects"
	rmAllocsBytes   = "/gc/heap/allocs:bytes"
	rmHeapObjects   = "/gc/heap/objects:objects"
	rmHeapGoal      = "/gc/heap/goal:bytes"
	rmTotal         = "/memory/classes/total:bytes"
	rmHeapInUse     = "/memory/classes/heap/objects:bytes"
	rmHeapUnused    = "/memory/classes/heap/unused:bytes"
	rmHeapReleased  = "/memory/classes/heap/released:bytes"
	rmHeapFree      = "/memory/classes/heap/free:bytes"
	rmHeapStacks    = "/memory/classes/heap/stacks:bytes"
	rmOSStacks      = "/memory/classes/os-stacks:bytes"
	rmMSpanInUse    = "/memory/classes/metadata/mspan/inuse:bytes"
	rmMSpanFree     = "/memory/classes/metadata/mspan/free:bytes"
	rmMCacheInUse   = "/memory/classes/metadata/mcache/inuse:bytes"
	rmMCacheFree    = "/memory/classes/metadata/mcache/free:bytes"
	rmProfBuckets   = "/memory/classes/profiling/buckets:bytes"
	rmMetadataOther = "/memory/classes/metadata/other:bytes"
	rmOther         = "/memory/classes/other:bytes"
	rmGOGC          = "/gc/gogc:percent"
	rmGOMEMLIMIT    = "/gc/gomemlimit:bytes"
	rmGOMAXPROCS    = "/sched/gomaxprocs:threads"
)

var rmNames = [...]string{
	rmTinyAllocs, rmAllocsObjects, rmFreesObjects, rmAllocsBytes, rmHeapObjects, rmHeapGoal, rmTotal,
	rmHeapInUse, rmHeapUnused, rmHeapReleased, rmHeapFree, rmHeapStacks, rmOSStacks, rmMSpanInUse,
	rmMSpanFree, rmMCacheInUse, rmMCacheFree, rmProfBuckets, rmMetadataOther, rmOther,
	rmGOGC, rmGOMEMLIMIT, rmGOMAXPROCS,
}

// writeGo writes the go_* families, in name order.
func writeGo(e *exposer) {
	var samples [len(rmNames)]rm.Sample
	for i, name := range rmNames {
		samples[i].Name = name
	}
	rm.Read(samples[:])
	v := func(name string) float64 {
		for _, s := range samples {
			if s.Name == name {
				switch s.Value.Kind() {
				case rm.KindUint64:
					return float64(s.Value.Uint64())
				case rm.KindFloat64:
					return s.Value.Float64()
				}
			}
		}
		return 0
	}
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)

	e.header("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", typeSummary)
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		e.sample("go_gc_duration_seconds", nil, nil, nil, "quantile", q, gc.PauseQuantiles[i].Seconds())
	}
	e.sample("go_gc_duration_seconds_sum", nil, nil, nil, "", "", gc.PauseTotal.Seconds())
	e.sample("go_gc_duration_seconds_count", nil, nil, nil, "", "", float64(gc.NumGC))
	e.gauge("go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.", v(rmGOGC))
	e.gauge("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.", v(rmGOMEMLIMIT))
	e.gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	e.header("go_info", "Information about the Go environment.", typeGauge)
	e.sample("go_info", []string{"version"}, []string{runtime.Version()}, []int{0}, "", "", 1)

	heapAlloc := v(rmHeapInUse)
	heapInUse := heapAlloc + v(rmHeapUnused)
	heapIdle := v(rmHeapReleased) + v(rmHeapFree)
	tiny := v(rmTinyAllocs)
	for _, g := range []struct {
		name, help string
		counter    bool
		v          float64
	}{
		{"go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", false, heapAlloc},
		{"go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", true, v(rmAllocsBytes)},
		{"go_memstats_buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", false, v(rmProfBuckets)},
		{"go_memstats_frees_total", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", true, v(rmFreesObjects) + tiny},
		{"go_memstats_gc_sys_bytes", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", false, v(rmMetadataOther)},
		{"go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", false, heapAlloc},
		{"go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", false, heapIdle},
		{"go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", false, heapInUse},
		{"go_memstats_heap_objects", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", false, v(rmHeapObjects)},
		{"go_memstats_heap_released_bytes", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", false, v(rmHeapReleased)},
		{"go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", false, heapInUse + heapIdle},
		{"go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", false, float64(gc.LastGC.UnixNano()) / 1e9},
		{"go_memstats_mallocs_total", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", true, v(rmAllocsObjects) + tiny},
		{"go_memstats_mcache_inuse_bytes", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", false, v(rmMCacheInUse)},
		{"go_memstats_mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", false, v(rmMCacheInUse) + v(rmMCacheFree)},
		{"go_memstats_mspan_inuse_bytes", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", false, v(rmMSpanInUse)},
		{"go_memstats_mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", false, v(rmMSpanInUse) + v(rmMSpanFree)},
		{"go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", false, v(rmHeapGoal)},
		{"go_memstats_other_sys_bytes", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", false, v(rmOther)},
		{"go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", false, v(rmHeapStacks)},
		{"go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", false, v(rmHeapStacks) + v(rmOSStacks)},
		{"go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", false, v(rmTotal)},
	} {
		if g.counter {
			e.counter(g.name, g.help, g.v)
		} else {
			e.gauge(g.name, g.help, g.v)
		}
	}
	e.gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", v(rmGOMAXPROCS))
	threads, _ := runtime.ThreadCreateProfile(nil)
	e.gauge("go_threads", "Number of OS threads created.", float64(threads))
}
