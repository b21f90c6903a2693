//go:build !race

package rdm_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
