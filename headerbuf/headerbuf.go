// Package headerbuf holds the HeaderBuffer of the zero-copy send path
// (netio3's HeaderBuffer).
//
// A zero-copy send takes its payload straight from the caller's memory, but
// most messages also carry a small header (a tag, a sequence number, a
// length) that the caller builds on the stack or the Go heap, where the NIC
// must not read it. The header is therefore copied into a header slot: a
// fixed-size piece of one region that was registered once for sending. The
// send is then one fi_sendv of two iovecs — the header from its slot
// (Result.Addr, with Desc), the payload from the caller's memory — so the
// wire carries header and payload as one message and nothing large is
// copied.
//
// A slot is taken per send with GetHeader, which remembers the caller's key
// (the send's completion context). When the send completes, ReturnHeader
// frees the slot and gives the key back, so the completion can be reported
// to its owner. Every slot has one owner at a time: the HeaderBuffer (free)
// or a send in flight.
package headerbuf

import (
	"fmt"
	"math"
	"sync"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/slots"
)

// Result is what GetHeader returns: the status and, when it is OK, the slot
// holding the header.
type Result struct {
	// Status is OK when the header was copied into a slot, NoResources when
	// no slot is free, InvalidArgument when the data is larger than a slot,
	// and Closed after Close. Only OK takes a slot.
	Status netio.Status
	// Index is the slot, to hand to ReturnHeader when the send completes.
	Index uint32
	// Header is the slot's bytes holding the copied header: len(Header) is
	// len(data), cap(Header) is the slot size. It is valid until
	// ReturnHeader(Index); do not touch it after that.
	Header []byte
	// Addr is the address of Header[0] — the slot's first byte, also when
	// Header is empty — for the header's iovec.
	Addr uintptr
}

// holder is the HeaderBuffer's identity in its slot set: one owner takes
// and returns every slot, and the zero-copy endpoint claims them as it.
const holder = slots.SoleHolder

// HeaderBuffer is one registered region (one registration, send access
// only) cut into fixed-size, cache-line aligned header slots. It is safe
// for concurrent use; GetHeader and ReturnHeader do not allocate.
type HeaderBuffer struct {
	mgr     *domain.Manager
	mem     *slots.Memory
	set     *slots.Set
	closeMu sync.Mutex // one Close at a time: the second waits for the first
}

func init() {
	slots.Expose(func(public any) *slots.Set {
		if h, ok := public.(*HeaderBuffer); ok && h != nil {
			return h.set
		}
		return nil
	})
}

// New allocates slotCount slots of slotSize bytes in one region registered
// in mgr for sending. Sizes out of range (not positive, slotSize above
// netio.MaxBufferSize, slotCount above netio.MaxBufferCount) give an error
// wrapping netio.ErrInvalidArgument and register nothing.
func New(mgr *domain.Manager, slotSize, slotCount int) (*HeaderBuffer, error) {
	if mgr == nil {
		return nil, fmt.Errorf("%w: headerbuf: no domain", netio.ErrInvalidArgument)
	}
	if slotSize <= 0 || slotSize > netio.MaxBufferSize || slotCount <= 0 ||
		slotCount > netio.MaxBufferCount || slotCount > math.MaxUint32 {
		return nil, fmt.Errorf("%w: headerbuf: %d slots of %d bytes", netio.ErrInvalidArgument, slotCount, slotSize)
	}
	mem, err := slots.Cut(mgr, slotSize, slotCount, domain.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("headerbuf: %w", err)
	}
	return &HeaderBuffer{mgr: mgr, mem: mem, set: slots.NewSet(slotCount)}, nil
}

// GetHeader takes a free slot, copies data into it and remembers key, the
// caller's completion context, for ReturnHeader. Zero-length data is
// allowed and still takes a slot. Data larger than a slot gives
// InvalidArgument (as an oversize send does everywhere), no free slot
// gives NoResources, and Close gives Closed; none of them takes a slot. It
// does not allocate.
func (h *HeaderBuffer) GetHeader(data []byte, key uint64) Result {
	if len(data) > h.mem.Size() {
		return Result{Status: netio.InvalidArgument}
	}
	idx, ok := h.set.TakePosted(holder, key)
	if !ok {
		if h.set.Closed() {
			return Result{Status: netio.Closed}
		}
		return Result{Status: netio.NoResources}
	}
	// The slot is ours now, and Close refuses while it is in use, so the
	// memory stays mapped: copy outside any lock.
	piece := h.mem.Piece(idx)
	hdr := piece.Bytes[:len(data)]
	copy(hdr, data)
	return Result{Status: netio.OK, Index: idx, Header: hdr, Addr: piece.Addr}
}

// ReturnHeader frees slot idx after its send completed and gives back the
// key GetHeader remembered. An index out of range or of a free slot gives
// InvalidArgument and changes nothing, so a completion is never applied
// twice. It does not allocate.
func (h *HeaderBuffer) ReturnHeader(idx uint32) (key uint64, st netio.Status) {
	key, ok := h.set.Complete(idx, holder)
	if !ok {
		return 0, netio.InvalidArgument
	}
	return key, netio.OK
}

// NumAvailable returns the fewest free slots seen since the previous call
// (netio3's get_num_available_buffers), and starts a new interval at the
// number free now.
func (h *HeaderBuffer) NumAvailable() int { return h.set.NumAvailable() }

// PendingSends returns the keys of the slots in use, in slot order. It
// allocates; it is meant for diagnostics and for reporting pending sends
// when an endpoint closes.
func (h *HeaderBuffer) PendingSends() []uint64 {
	ids := h.set.Posted(nil, holder)
	keys := make([]uint64, len(ids))
	for i, id := range ids {
		keys[i] = h.set.Key(id)
	}
	return keys
}

// Desc returns the registration descriptor to pass with a header's iovec.
func (h *HeaderBuffer) Desc() uintptr { return h.mem.Piece(0).Desc }

// Region returns the address of the region's first byte (slot 0).
func (h *HeaderBuffer) Region() uintptr { return h.mem.Piece(0).Addr }

// RegionSize returns the size of the region in bytes: SlotCount slots of
// SlotSize rounded up to a multiple of 64.
func (h *HeaderBuffer) RegionSize() int { return h.mem.Region().Len() }

// SlotSize returns the size of each slot, the largest header GetHeader
// accepts.
func (h *HeaderBuffer) SlotSize() int { return h.mem.Size() }

// SlotCount returns the number of slots, the most sends that can hold a
// header at once.
func (h *HeaderBuffer) SlotCount() int { return h.mem.Len() }

// Domain returns the Manager the region is registered in.
func (h *HeaderBuffer) Domain() *domain.Manager { return h.mgr }

// Close deregisters and unmaps the region. Slots still in use make it fail
// with an error wrapping netio.ErrNoResources and change nothing: the
// provider may still read them. It is idempotent.
func (h *HeaderBuffer) Close() error {
	h.closeMu.Lock()
	defer h.closeMu.Unlock()
	if h.set.Closed() {
		return nil
	}
	if err := h.set.Close(); err != nil {
		return fmt.Errorf("headerbuf: %w", err)
	}
	return h.mem.Close()
}
