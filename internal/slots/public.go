package slots

// Of returns the Set behind a public type of a package that keeps its
// slots' state transitions unexported (sendbuf.Pool, headerbuf.HeaderBuffer),
// or nil. Those packages install their lookups with Expose when they are
// initialized: they import this package, so it cannot name their types.
// The pattern keeps Take, MarkPosted, Claim and the rest out of the public
// API, where a caller could corrupt a buffer's ownership, while the
// endpoint packages of this module drive them.
func Of(public any) *Set {
	for _, f := range lookups {
		if s := f(public); s != nil {
			return s
		}
	}
	return nil
}

var lookups []func(any) *Set

// Expose installs a lookup for Of. Call it from an init function only.
func Expose(lookup func(public any) *Set) { lookups = append(lookups, lookup) }
