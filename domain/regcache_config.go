package domain

// DefaultStaleLimit is the number of stale registrations a cache keeps for
// reuse when CacheConfig.StaleLimit is 0 (the GNIX default).
const DefaultStaleLimit = 128

// CacheConfig configures a RegistrationCache.
type CacheConfig struct {
	// Access is the access of the cache's registrations; 0 selects
	// AccessSend, which is what zero-copy sends need and no more.
	Access Access
	// MaxRegistrations is a hard limit on the cache's registrations, stale
	// ones included. 0 leaves only the domain's own limit.
	MaxRegistrations int
	// StaleLimit is the number of stale (unused) registrations kept for
	// reuse. 0 selects DefaultStaleLimit; a negative value keeps none, so
	// every registration is deregistered at its last release.
	StaleLimit int
	// Merge makes a miss that overlaps or is adjacent to cached
	// registrations register the union of the ranges instead, so that later
	// requests anywhere in it hit. Without it, overlapping registrations
	// simply coexist.
	Merge bool
}
