// Package pool holds pools of registered buffers with the semantics of Mochi
// Thallium's bulk_buffer_pool, bounded by a memory budget.
//
// # The Thallium model
//
// A pool has one or more tiers. Every buffer of a tier has the tier's size;
// tiers are kept sorted by size. A single-tier pool has Count buffers of Size
// bytes; a multi-tier pool has NumTiers tiers of PerTier buffers whose sizes
// grow geometrically (FirstSize × SizeMultiple^t), so that a request for n
// bytes wastes at most a factor SizeMultiple.
//
// Every buffer is its own memory registration (FI_SEND by default: ask for
// the least access that works), so a single buffer can be deregistered and
// unmapped on its own. The configured buffers of a tier share one mapping to
// save memory for small sizes; buffers added later get a mapping each.
//
// A request names the smallest size it can use. Get, TryGet and GetOrExtend
// look at the smallest tier that fits first, then at larger ones:
//
//   - TryGet never blocks: NoResources when every fitting tier is empty.
//   - Get blocks until a fitting buffer is released, the context ends, or the
//     pool is closed.
//   - GetOrExtend never blocks either: when nothing fitting is free it
//     registers a new buffer in the smallest fitting tier, or adds a tier of
//     exactly the requested size when none fits (Thallium's
//     extend_if_needed). Later requests reuse that tier.
//
// A leased Buffer is shared by reference count, like Thallium's bulk_buffer:
// Ref returns another handle to the same memory, and the buffer goes back to
// its tier when the last handle is released.
//
// # Handles and release safety
//
// A Buffer is a small value naming one lease of one buffer: every lease
// bumps the buffer's generation, and each handle of the lease owns one bit
// of a live-handle mask (at most 32 live handles per lease; Ref returns the
// zero Buffer beyond that). Release and Ref check generation and bit in one
// atomic step, so a second release of the same handle is a no-op, never a
// double free, and a stale handle (a copy kept past its lease, a deferred
// Release after an explicit one) that is released after the buffer was
// leased again leaves the new lease alone. (Within a lease, Ref reuses the
// bits of released handles round robin; see Buffer.Ref.) The zero Buffer is "no buffer":
// failed Gets return it, and releasing it is a no-op.
//
// Accessors such as Bytes and Addr do not check the lease: touching the
// memory after Release is a misuse, as with any pool, since it may belong
// to another lease by then.
//
// # Waiting
//
// Blocked Gets wait in one FIFO queue. A buffer released while somebody
// waits is handed directly to the oldest waiter it fits (its size is at
// least the waiter's minimum), so a waiter is never overtaken by a later one
// that wants a buffer it could use too, and newcomers cannot take it from
// under the queue. A small waiter is therefore woken by a release in a
// larger tier when that is the first fitting release, and a large waiter is
// never passed over for a small one that queued after it.
//
// # Budget and shrinking
//
// Budget caps the bytes the pool keeps registered (the sum of the sizes of
// its buffers, leased or free). Growth that would pass it, or the domain's
// registration limits, fails with an error wrapping netio.ErrNoResources and
// changes nothing. Buffers added by GetOrExtend above the configured counts
// are shrunk again when they sit free for IdleTimeout: deregistered and
// unmapped, giving their bytes back to the budget. The configured buffers
// stay until Close.
//
// # Lifetime
//
// The pool's state outlives Close while buffers are leased: Close stops new
// leases (ErrClosed / netio.Closed), wakes every waiter, and frees the free
// buffers at once; each leased buffer stays mapped and registered, so late
// writes are safe, and is freed when its last handle is released.
//
// # Hot path
//
// TryGet, GetOrExtend and a Get that find a free buffer, Release and Ref do
// not allocate: a handle is a value, and a buffer's lease state is one
// atomic word. Each tier has its own short mutex, so borrowers of different
// tiers do not contend.
package pool
