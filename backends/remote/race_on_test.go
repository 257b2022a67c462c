//go:build race

package remote_test

// raceEnabled: the race detector slows the Go side of every call several times
// over, which distorts latency ratios.
const raceEnabled = true
