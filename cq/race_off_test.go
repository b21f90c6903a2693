//go:build !race

package cq_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
