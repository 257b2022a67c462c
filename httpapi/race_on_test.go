//go:build race

package httpapi_test

// raceSlack is the extra allocation allowed under the race detector, whose
// sync.Pool drops cached buffers at random, so that encoding/json makes new ones.
const raceSlack = 1.5

// stallRuns is how many calls of each kind a TestStalledReader round makes. Under
// the race detector each 10 MiB call costs about 15 s of the 2 cores (its JSON and
// copies, every byte checked; 1.2 s without it), so a round makes 3 of each (the
// median of 3) instead of 5: the round took 164 s with 5.
const stallRuns = 3
