//go:build race

package pubsub_test

// raceEnabled: the race detector allocates on synchronization, so
// allocation counts are checked only without it.
const raceEnabled = true
