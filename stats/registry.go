package stats

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/netio-go/netio"
)

// The kinds of the library's endpoints (Endpoint.Kind, Kind.Kind).
const (
	KindBuffered     = "buffered"     // endpoint.SendEndpointBuffered, coalescing or not
	KindZeroCopy     = "zerocopy"     // endpoint.SendEndpointZeroCopy
	KindRMA          = "rma"          // endpoint.RMAEndpoint
	KindReceive      = "receive"      // endpoint.ReceiveEndpoint: one accepted connection
	KindReconnecting = "reconnecting" // endpoint.ReconnectingSender
	KindRDM          = "rdm"          // rdm.Endpoint
)

// The reasons an endpoint closed (Kind.Closed, CloseReason).
const (
	ReasonLocal   = "local"   // closed by its owner (netio.ErrClosed)
	ReasonPeer    = "peer"    // the peer closed it, or the connection broke
	ReasonTimeout = "timeout" // IdleTimeout or ProgressTimeout ended it
	ReasonError   = "error"   // anything else
)

// CloseReason classifies why an endpoint ended, for Kind.Closed: a nil
// error or netio.ErrClosed is ReasonLocal, netio.ErrTimeout ReasonTimeout,
// netio.ErrConnectionClosed ReasonPeer, anything else ReasonError.
func CloseReason(err error) string {
	switch {
	case err == nil || errors.Is(err, netio.ErrClosed):
		return ReasonLocal
	case errors.Is(err, netio.ErrTimeout):
		return ReasonTimeout
	case errors.Is(err, netio.ErrConnectionClosed):
		return ReasonPeer
	}
	return ReasonError
}

// Registry is the list of what is open on one manager, and the totals of
// what closed (domain.Manager.Registry). Every part adds itself when it
// opens, with a fill function, and removes itself when it closes; a
// Snapshot calls every fill function under the registry's lock.
//
// A fill function reads the part's counters (atomics, or state under a
// lock the data path never takes) into the record it is given, which
// already holds what the part was added with. It must not block and must
// not call the Registry. Parts of an application may add themselves too.
// A nil *Registry adds nothing. It is safe for concurrent use.
type Registry struct {
	mu   sync.Mutex
	next uint64

	endpoints   section[Endpoint]
	kinds       map[string]*Kind // what closed endpoints counted, by kind
	pollers     section[Poller]
	pollerSums  map[string]*Poller // what closed pollers counted, by name
	listeners   section[Listener]
	listenerSum Listener // what closed listeners counted
	caches      section[Cache]
	pools       section[Pool]
	publishers  section[Publisher]
	subscribers section[Subscriber]
}

// source is one registered part: the record it was added with and its
// fill function.
type source[T any] struct {
	proto T
	fill  func(*T)
}

// section is the parts of one type, by ID.
type section[T any] map[uint64]*source[T]

// read fills every record of s, in the order of their IDs.
func (s section[T]) read() []T {
	out := make([]T, 0, len(s))
	for _, id := range slices.Sorted(maps.Keys(s)) {
		out = append(out, s[id].read())
	}
	return out
}

func (src *source[T]) read() T {
	v := src.proto
	if src.fill != nil {
		src.fill(&v)
	}
	return v
}

// Entry is a part's place in a Registry; Remove it when the part closes.
type Entry struct {
	once   sync.Once
	remove func(reason error)
}

// Remove takes the part out of the registry, once, and folds what it
// counted into the totals; reason says why it ended (nil: closed by its
// owner). Call it once the part's counters are final. A nil Entry does
// nothing.
func (e *Entry) Remove(reason error) {
	if e == nil || e.remove == nil {
		return
	}
	e.once.Do(func() { e.remove(reason) })
}

// add registers src in s under a new ID and returns the entry that removes
// it, running fold (under the lock, with the final record) first.
func add[T any](r *Registry, s *section[T], proto T, setID func(*T, uint64), fill func(*T), fold func(T, error)) *Entry {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	id := r.next
	setID(&proto, id)
	if *s == nil {
		*s = section[T]{}
	}
	src := &source[T]{proto: proto, fill: fill}
	(*s)[id] = src
	return &Entry{remove: func(reason error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if fold != nil {
			fold(src.read(), reason)
		}
		delete(*s, id)
	}}
}

// AddEndpoint registers an endpoint: e gives its Kind, Peer and Poller,
// fill its counters and gauges. When it is removed, its counters go to
// its kind's totals and the reason to Kind.Closed.
func (r *Registry) AddEndpoint(e Endpoint, fill func(*Endpoint)) *Entry {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	r.kind(e.Kind).Opened++
	r.mu.Unlock()
	return add(r, &r.endpoints, e, func(e *Endpoint, id uint64) { e.ID = id }, fill, func(final Endpoint, reason error) {
		k := r.kind(final.Kind)
		k.Counters.Add(final.Counters)
		k.Closed[CloseReason(reason)]++
	})
}

// kind returns the totals of kind, made on first use; r.mu is held.
func (r *Registry) kind(kind string) *Kind {
	if r.kinds == nil {
		r.kinds = map[string]*Kind{}
	}
	k := r.kinds[kind]
	if k == nil {
		k = &Kind{Kind: kind, Closed: map[string]uint64{}}
		r.kinds[kind] = k
	}
	return k
}

// AddPoller registers a poller named name (cq.Config.Name); when it is
// removed, its counters go to the totals of its name.
func (r *Registry) AddPoller(name string, fill func(*Poller)) *Entry {
	return add(r, &r.pollers, Poller{Name: name}, func(p *Poller, id uint64) { p.ID = id }, fill, func(final Poller, _ error) {
		if r.pollerSums == nil {
			r.pollerSums = map[string]*Poller{}
		}
		sum := r.pollerSums[name]
		if sum == nil {
			sum = &Poller{Name: name}
			r.pollerSums[name] = sum
		}
		sum.addCounters(final)
	})
}

// addCounters sums o's counters into p.
func (p *Poller) addCounters(o Poller) {
	p.Completions += o.Completions
	p.Errors += o.Errors
	p.Events += o.Events
	p.Dropped += o.Dropped
	p.Unreported += o.Unreported
	p.Spins += o.Spins
	p.Blocks += o.Blocks
	p.WakeUps += o.WakeUps
	p.Timeouts += o.Timeouts
	p.Callbacks.add(o.Callbacks)
}

// AddListener registers a listener on addr; when it is removed, its
// counters go to the listeners' totals.
func (r *Registry) AddListener(addr string, fill func(*Listener)) *Entry {
	return add(r, &r.listeners, Listener{Addr: addr}, func(l *Listener, id uint64) { l.ID = id }, fill, func(final Listener, _ error) {
		r.listenerSum.Accepted += final.Accepted
		r.listenerSum.Refused += final.Refused
	})
}

// AddCache registers a registration cache.
func (r *Registry) AddCache(fill func(*Cache)) *Entry {
	return add(r, &r.caches, Cache{}, func(c *Cache, id uint64) { c.ID = id }, fill, nil)
}

// AddPool registers a buffer pool.
func (r *Registry) AddPool(fill func(*Pool)) *Entry {
	return add(r, &r.pools, Pool{}, func(p *Pool, id uint64) { p.ID = id }, fill, nil)
}

// AddPublisher registers a publisher serving subscriptions on addr.
func (r *Registry) AddPublisher(addr string, fill func(*Publisher)) *Entry {
	return add(r, &r.publishers, Publisher{Addr: addr}, func(p *Publisher, id uint64) { p.ID = id }, fill, nil)
}

// AddSubscriber registers a subscriber.
func (r *Registry) AddSubscriber(fill func(*Subscriber)) *Entry {
	return add(r, &r.subscribers, Subscriber{}, func(s *Subscriber, id uint64) { s.ID = id }, fill, nil)
}

// Read fills s's sections from every registered part and the totals; the
// caller fills the rest (provider, address, registrations, time). A nil
// Registry leaves them empty.
func (r *Registry) Read(s *Snapshot) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Caches = r.caches.read()
	s.Pools = r.pools.read()
	s.Pollers = r.pollers.read()
	s.PollerTotals = r.pollerTotals(s.Pollers)
	s.Listeners = r.listeners.read()
	s.ListenerTotals = r.listenerSum
	for _, l := range s.Listeners {
		s.ListenerTotals.Accepted += l.Accepted
		s.ListenerTotals.Refused += l.Refused
		s.ListenerTotals.Active += l.Active
	}
	s.Endpoints = r.endpoints.read()
	s.Kinds = r.kindTotals(s.Endpoints)
	s.Publishers = r.publishers.read()
	s.Subscribers = r.subscribers.read()
}

// pollerTotals sums the live pollers and the closed ones by name, in the
// order of the names.
func (r *Registry) pollerTotals(live []Poller) []Poller {
	sums := map[string]*Poller{}
	get := func(name string) *Poller {
		if sums[name] == nil {
			sums[name] = &Poller{Name: name}
		}
		return sums[name]
	}
	for name, closed := range r.pollerSums {
		get(name).addCounters(*closed)
	}
	for _, p := range live {
		sum := get(p.Name)
		sum.Live++
		sum.addCounters(p)
	}
	out := make([]Poller, 0, len(sums))
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		out = append(out, *sums[name])
	}
	return out
}

// kindTotals sums the live endpoints and the closed ones by kind, in the
// order of the kinds.
func (r *Registry) kindTotals(live []Endpoint) []Kind {
	sums := map[string]*Kind{}
	for name, k := range r.kinds {
		sum := *k
		sum.Closed = maps.Clone(k.Closed)
		sums[name] = &sum
	}
	for _, e := range live {
		sum := sums[e.Kind] // made by AddEndpoint
		sum.Live++
		sum.Counters.Add(e.Counters)
	}
	out := make([]Kind, 0, len(sums))
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		out = append(out, *sums[name])
	}
	return out
}
