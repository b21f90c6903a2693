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
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// Result is what GetHeader returns: the status and, when it is OK, the slot
// holding the header.
type Result struct {
	// Status is OK when the header was copied into a slot, NoResources when
	// no slot is free, Failed when the data is larger than a slot, and Closed
	// after Close. Only OK takes a slot.
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

// slot is the bookkeeping of one slot; it is guarded by HeaderBuffer.mu.
type slot struct {
	key   uint64
	inUse bool
}

// HeaderBuffer is one registered region (one registration, send access
// only) cut into fixed-size, cache-line aligned header slots. It is safe
// for concurrent use; GetHeader and ReturnHeader do not allocate.
type HeaderBuffer struct {
	mgr      *domain.Manager
	reg      *domain.Registration
	mem      []byte // the region; unmapped by Close, never touched after
	region   uintptr
	desc     uintptr
	slotSize int
	stride   int
	count    int

	mu      sync.Mutex
	slots   []slot
	free    []uint32 // stack of free slot indices
	minFree int      // fewest free slots since the last NumAvailable
	closed  bool
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
	stride := domain.AlignUp(slotSize, domain.CacheLine)
	reg, err := mgr.AllocRegistered(stride*slotCount, domain.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("headerbuf: %w", err)
	}
	mem := reg.Bytes()
	h := &HeaderBuffer{
		mgr:      mgr,
		reg:      reg,
		mem:      mem,
		region:   uintptr(unsafe.Pointer(&mem[0])),
		desc:     reg.Desc(),
		slotSize: slotSize,
		stride:   stride,
		count:    slotCount,
		slots:    make([]slot, slotCount),
		free:     make([]uint32, slotCount),
		minFree:  slotCount,
	}
	for i := range slotCount {
		h.free[slotCount-1-i] = uint32(i) // hand out low indices first
	}
	return h, nil
}

// GetHeader takes a free slot, copies data into it and remembers key, the
// caller's completion context, for ReturnHeader. Zero-length data is
// allowed and still takes a slot. Data larger than a slot gives Failed,
// no free slot gives NoResources, and Close gives Closed; none of them takes
// a slot. It does not allocate.
func (h *HeaderBuffer) GetHeader(data []byte, key uint64) Result {
	if len(data) > h.slotSize {
		return Result{Status: netio.Failed}
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return Result{Status: netio.Closed}
	}
	n := len(h.free)
	if n == 0 {
		h.minFree = 0
		h.mu.Unlock()
		return Result{Status: netio.NoResources}
	}
	idx := h.free[n-1]
	h.free = h.free[:n-1]
	h.minFree = min(h.minFree, n-1)
	h.slots[idx] = slot{key: key, inUse: true}
	h.mu.Unlock()

	// The slot is ours now, and Close refuses while it is in use, so the
	// memory stays mapped: copy outside the lock.
	off := int(idx) * h.stride
	hdr := h.mem[off : off+len(data) : off+h.slotSize]
	copy(hdr, data)
	return Result{Status: netio.OK, Index: idx, Header: hdr, Addr: h.region + uintptr(off)}
}

// ReturnHeader frees slot idx after its send completed and gives back the
// key GetHeader remembered. An index out of range or of a free slot gives
// InvalidArgument and changes nothing, so a completion is never applied
// twice. It does not allocate.
func (h *HeaderBuffer) ReturnHeader(idx uint32) (key uint64, st netio.Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if uint64(idx) >= uint64(len(h.slots)) || !h.slots[idx].inUse {
		return 0, netio.InvalidArgument
	}
	key = h.slots[idx].key
	h.slots[idx] = slot{}
	h.free = append(h.free, idx)
	return key, netio.OK
}

// NumAvailable returns the fewest free slots seen since the previous call
// (netio3's get_num_available_buffers), and starts a new interval at the
// number free now.
func (h *HeaderBuffer) NumAvailable() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.minFree
	h.minFree = len(h.free)
	return n
}

// PendingSends returns the keys of the slots in use, in slot order. It
// allocates; it is meant for diagnostics and for reporting pending sends
// when an endpoint closes.
func (h *HeaderBuffer) PendingSends() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]uint64, 0, len(h.slots)-len(h.free))
	for i := range h.slots {
		if h.slots[i].inUse {
			keys = append(keys, h.slots[i].key)
		}
	}
	return keys
}

// Desc returns the registration descriptor to pass with a header's iovec.
func (h *HeaderBuffer) Desc() uintptr { return h.desc }

// Region returns the address of the region's first byte (slot 0).
func (h *HeaderBuffer) Region() uintptr { return h.region }

// RegionSize returns the size of the region in bytes: SlotCount slots of
// SlotSize rounded up to a multiple of 64.
func (h *HeaderBuffer) RegionSize() int { return h.stride * h.count }

// SlotSize returns the size of each slot, the largest header GetHeader
// accepts.
func (h *HeaderBuffer) SlotSize() int { return h.slotSize }

// SlotCount returns the number of slots, the most sends that can hold a
// header at once.
func (h *HeaderBuffer) SlotCount() int { return h.count }

// Domain returns the Manager the region is registered in.
func (h *HeaderBuffer) Domain() *domain.Manager { return h.mgr }

// Close deregisters and unmaps the region. Slots still in use make it fail
// with an error wrapping netio.ErrNoResources and change nothing: the
// provider may still read them. It is idempotent.
func (h *HeaderBuffer) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	if used := len(h.slots) - len(h.free); used > 0 {
		return fmt.Errorf("%w: headerbuf: %d of %d slots still in use", netio.ErrNoResources, used, len(h.slots))
	}
	h.closed = true
	mem, err := h.reg.Detach()
	return errors.Join(err, domain.Free(mem))
}
