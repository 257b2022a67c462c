//go:build !race

package httpapi_test

// raceSlack: see race_on_test.go.
const raceSlack = 0.0
