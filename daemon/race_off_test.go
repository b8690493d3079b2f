//go:build !race

package daemon

// raceEnabled says the tests (and the parley processes they start, built
// from the same binary) run under the race detector.
const raceEnabled = false
