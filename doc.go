// Package netio is the shared vocabulary of netio-go: the Status values that
// hot-path calls return, the parameter types that configure endpoints, and the
// sentinel errors that setup calls wrap.
//
// netio-go moves data between processes over libfabric, for data-acquisition
// readout programs. The packages are layered: fabric (the cgo boundary) and
// netio at the bottom; domain (fabric, domain and memory registrations), cq
// (completion pollers), sendbuf (registered send buffers) in the middle; and
// endpoint (connections, sending and receiving) on top. See the README for a
// short example and docs/design.md for how the parts fit.
package netio
