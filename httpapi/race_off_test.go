//go:build !race

package httpapi_test

// raceSlack: see race_on_test.go.
const raceSlack = 0.0

// stallRuns is how many calls of each kind a TestStalledReader round makes.
const stallRuns = 5
