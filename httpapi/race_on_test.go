//go:build race

package httpapi_test

// raceSlack is the extra allocation allowed under the race detector, whose
// sync.Pool drops cached buffers at random, so that encoding/json makes new ones.
const raceSlack = 1.5
