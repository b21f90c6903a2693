//go:build !race

package poll_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
