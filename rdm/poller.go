package rdm

import (
	"fmt"
	"sync"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
)

// The connectionless providers of libfabric 1.17 here (tcp;ofi_rxm,
// udp;ofi_rxd, shm) crash the process (SIGSEGV inside fi_cq_readfrom) when
// several threads call into one domain at once, although they announce
// FI_THREAD_SAFE: in tests, half the runs of a few endpoints in one process
// with a poller each, or with sends posted from the caller's goroutine;
// none with every call on one goroutine, which is how their C users (and
// fabtests) drive them. So every endpoint of a domain shares one poller,
// and every call into the provider runs on its goroutine: sends and injects
// are handed to it (sendcore.Options.PostOnPoller; an inject is copied into
// the inject queue first) unless they are made there, from a callback,
// where they are posted at once; and Open, AddPeer and RemovePeer run
// there through Do.
//
// Rechecked once quirks.StaleWaitEntries had removed the fi_trywait crash:
// a build that posted SendBuffer from the caller's goroutine passed 16 of
// 16 stress runs on tcp;ofi_rxm and udp;ofi_rxd, but stalled in 2 of 16 on
// shm and on sockets (the first send never taken), and was no faster
// (docs/performance.md, "rdm (issue 18 item 7): where the time goes"). The
// time went to the poller's waiting instead (internal/poll: blind.go,
// afterwork.go). So no provider gets a quirk to post from the caller.
//
// One exception: memory registration for zero-copy sends. SendZeroCopy(V)
// attaches each data piece outside ZeroCopyConfig.Region and SharedRegion
// through the registration cache on the caller's goroutine, holding the
// post guard: a cache miss registers it there (fi_mr_reg on the domain),
// and may close the least recently used registration (fi_close) to make
// room; and when the send fails before it is queued (a piece that cannot
// be registered, no room), the pieces already attached go back to the
// cache there, which deregisters (fi_close) an entry invalidated or merged
// meanwhile, or every one with KeepGoRegistrations false. Completions and
// Close let go of them on the poller goroutine. Moving the miss to the poller would need Do from under the
// post guard, which deadlocks with a teardown running on the poller (see
// onPoller), or registering at post time, which turns Send's synchronous
// NoResources into a later Failed completion; and cache hits, the steady
// state, call no provider function. Memory registration is a domain
// call, not an endpoint or completion-queue call; the crashes above are in
// fi_cq_readfrom, and two goroutines sending fresh memory on tcp;ofi_rxm
// for 3x8 s showed none. A program that wants no provider call off the
// poller declares its data memory as Region or SharedRegion (registered
// at Open, on the poller, or once by the caller before the endpoints
// send), or sends with SendBuffer and Inject.

// domainPollers is the poller each domain's endpoints share, with the
// number of endpoints using it.
var domainPollers = struct {
	sync.Mutex
	m map[*domain.Manager]*sharedPoller
}{m: map[*domain.Manager]*sharedPoller{}}

type sharedPoller struct {
	p     *cq.Poller
	own   bool // opened here, and closed with the last endpoint
	users int
}

// acquirePoller returns the poller of mgr's endpoints: the one given
// (which every endpoint of the domain must then be given), or one opened
// with cfg and shared by the domain's endpoints.
func acquirePoller(mgr *domain.Manager, given *cq.Poller, cfg cq.Config) (*cq.Poller, error) {
	domainPollers.Lock()
	defer domainPollers.Unlock()
	if sp := domainPollers.m[mgr]; sp != nil {
		if given != nil && given != sp.p {
			return nil, fmt.Errorf("%w: rdm: the endpoints of a domain share one poller, and this one is another", netio.ErrInvalidArgument)
		}
		sp.users++
		return sp.p, nil
	}
	sp := &sharedPoller{p: given, users: 1}
	if given == nil {
		p, err := cq.Open(mgr, cfg)
		if err != nil {
			return nil, err
		}
		sp.p, sp.own = p, true
	}
	domainPollers.m[mgr] = sp
	return sp.p, nil
}

// releasePoller ends one endpoint's use of mgr's poller; the last closes
// a poller opened here.
func releasePoller(mgr *domain.Manager) error {
	domainPollers.Lock()
	defer domainPollers.Unlock()
	sp := domainPollers.m[mgr]
	if sp == nil {
		return nil
	}
	if sp.users--; sp.users > 0 {
		return nil
	}
	delete(domainPollers.m, mgr)
	if sp.own {
		return sp.p.Close()
	}
	return nil
}
