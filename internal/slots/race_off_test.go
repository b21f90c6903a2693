//go:build !race

package slots_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
