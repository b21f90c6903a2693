package endpoint

import (
	"fmt"
	"unsafe"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pool"
)

// checkBufferPool refuses a pool.Pool an endpoint of mgr cannot draw its
// buffers from: one of another domain, whose descriptors mean nothing to
// mgr's endpoints, or one not registered with exactly the access the
// buffers need (domain.AccessSend for send buffers, domain.AccessRecv for
// receive buffers). Exactly, not at least: registrations ask for the least
// access that works, and a pool that also allowed remote write (or
// receiving into send buffers) would let a peer write into memory the
// endpoint hands to the application. Errors wrap netio.ErrInvalidArgument.
func checkBufferPool(src *pool.Pool, mgr *domain.Manager, need domain.Access) error {
	switch {
	case src.Domain() != mgr:
		return fmt.Errorf("%w: endpoint: the buffer pool belongs to another domain", netio.ErrInvalidArgument)
	case src.Access() != need:
		return fmt.Errorf("%w: endpoint: the buffer pool is registered for %s, the endpoint's buffers need %s and nothing more",
			netio.ErrInvalidArgument, accessString(src.Access()), accessString(need))
	}
	return nil
}

// recvBuffer is one receive buffer: its memory (Params.BufferSize bytes),
// address and registration descriptor.
type recvBuffer struct {
	mem  []byte
	addr uintptr
	desc uintptr
}

// recvBuffers are the buffers a receive endpoint keeps posted, by key:
// cut from one region registered for the endpoint, or leased from a
// pool.Pool (each with its own registration).
type recvBuffers struct {
	bufs   []recvBuffer
	region *domain.Registration // the endpoint's own region, or nil
	leases []pool.Buffer        // the lease behind each buffer, or nil
}

// allocRecvBuffers registers one region of count buffers of size bytes,
// for receiving only.
func allocRecvBuffers(mgr *domain.Manager, size, count int) (*recvBuffers, error) {
	stride := domain.AlignUp(size, domain.CacheLine)
	region, err := mgr.AllocRegistered(stride*count, domain.AccessRecv)
	if err != nil {
		return nil, err
	}
	mem := region.Bytes()
	r := &recvBuffers{region: region}
	r.cut(count, func(i int) ([]byte, uintptr) { return mem[i*stride : i*stride+size], region.Desc() })
	return r, nil
}

// leaseRecvBuffers leases count buffers of at least size bytes from src,
// all or none (see pool.Pool.GetOrExtendN).
func leaseRecvBuffers(src *pool.Pool, size, count int) (*recvBuffers, error) {
	leases, err := src.GetOrExtendN(make([]pool.Buffer, 0, count), size, count)
	if err != nil {
		return nil, fmt.Errorf("endpoint: receive buffers from the pool: %w", err)
	}
	r := &recvBuffers{leases: leases}
	r.cut(count, func(i int) ([]byte, uintptr) { return leases[i].Bytes()[:size], leases[i].Desc() })
	return r, nil
}

// cut describes the count buffers; at returns the memory and descriptor of
// buffer i.
func (r *recvBuffers) cut(count int, at func(i int) ([]byte, uintptr)) {
	r.bufs = make([]recvBuffer, count)
	for i := range r.bufs {
		b := &r.bufs[i]
		b.mem, b.desc = at(i)
		b.mem = b.mem[:len(b.mem):len(b.mem)] // OnData's slice cannot reach past it
		b.addr = uintptr(unsafe.Pointer(&b.mem[0]))
	}
}

// free deregisters and unmaps the region, or hands the leases back. Call it
// only once the endpoint is closed: the provider may write the buffers
// until then.
func (r *recvBuffers) free() error {
	if r.region != nil {
		return r.region.Close()
	}
	for _, b := range r.leases {
		b.Release()
	}
	return nil
}
