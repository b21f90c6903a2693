//go:build !race

package pubsub_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
