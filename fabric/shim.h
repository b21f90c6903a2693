// Shim functions over libfabric's static-inline calls, so that cgo can call
// them, and a few helpers that keep Go pointers out of C memory: every
// operation context is an integer key cast to void*, never a Go pointer.
#ifndef NETIO_FABRIC_SHIM_H
#define NETIO_FABRIC_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

struct netio_hints {
	const char *prov;
	const char *node;
	const char *service;
	const char *fabric;
	const char *domain;
	uint64_t caps;
	uint64_t flags;
	int ep_type;
};

int netio_getinfo(const struct netio_hints *h, struct fi_info **out);

int netio_fabric(struct fi_info *info, struct fid_fabric **fab);
int netio_domain(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom);
int netio_eq_open(struct fid_fabric *fab, size_t size, int wait_fd, struct fid_eq **eq);
int netio_cq_open(struct fid_domain *dom, size_t size, int wait_fd, struct fid_cq **cq);
int netio_close(struct fid *fid);
int netio_getwait(struct fid *fid, int *fd);
int netio_trywait(struct fid_fabric *fab, struct fid *a, struct fid *b);

// EQ: one event or error entry per call.
struct netio_event {
	uint32_t event;     // FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN, or 0 for an error entry
	uint64_t context;   // the fid's context (our integer key)
	struct fi_info *info;
	int err;            // positive FI_ errno for an error entry
	int prov_errno;
};
ssize_t netio_eq_read(struct fid_eq *eq, struct netio_event *ev);
int netio_info_set_prov(struct fi_info *info, const char *name);
const char *netio_eq_strerror(struct fid_eq *eq, int prov_errno);

// Hot-path calls take their libfabric objects and C arrays as uintptr_t
// (NETIO_H): cgo checks every pointer argument for Go pointers before the
// call (cgoCheckPointer, 20-30% of a cgo call's cost here), and these
// point to C memory only. Each kind of handle is a struct of its own
// around the integer, which cgo makes a distinct Go type, so that Go
// cannot pass one where another is expected (cgo makes a typedef of an
// integer type an alias of it, which would not do); passed by value, it
// costs what the bare integer does, and holding no pointer, cgo does not
// check it.
typedef struct netio_ep_h { uintptr_t v; } netio_ep_h;                 // struct fid_ep *
typedef struct netio_cq_h { uintptr_t v; } netio_cq_h;                 // struct fid_cq *
typedef struct netio_cq_entries_h { uintptr_t v; } netio_cq_entries_h; // struct fi_cq_msg_entry[count]
typedef struct netio_cq_srcs_h { uintptr_t v; } netio_cq_srcs_h;       // uint64_t[count]
#define NETIO_H(type, h) ((type)(h).v)

// Receives queued for the next read of a CQ (CQ.QueueRecv): the read posts
// them (fi_recv, in order) before it reads, so that a poller reposting a
// buffer after delivering it pays no call into C of its own for the post.
// Refused posts are listed in failed for the caller to report.
#define NETIO_RECV_QUEUE 64
struct netio_queued_recv {
	uintptr_t ep; // struct fid_ep *
	uintptr_t buf;
	uint64_t len;
	uintptr_t desc;
	uint64_t ctx;
};
struct netio_recv_failure {
	uint64_t ctx;
	int64_t err; // positive FI_ errno
};
struct netio_recv_queue {
	uint32_t n;       // queued, posted by the next read
	uint32_t nfailed; // refused posts in failed, emptied by the caller
	struct netio_queued_recv q[NETIO_RECV_QUEUE];
	struct netio_recv_failure failed[NETIO_RECV_QUEUE];
};
typedef struct netio_recv_queue_h { uintptr_t v; } netio_recv_queue_h; // struct netio_recv_queue *

// CQ: post the queued receives, then batch read into C arrays (struct
// fi_cq_msg_entry, uint64_t) owned by the caller.
ssize_t netio_cq_read(netio_cq_h cq, netio_recv_queue_h rq, netio_cq_entries_h buf, netio_cq_srcs_h src, size_t count, size_t dirty);
ssize_t netio_cq_read_spin(netio_cq_h cq, netio_recv_queue_h rq, netio_cq_entries_h buf, netio_cq_srcs_h src, size_t count, size_t dirty, int64_t spin_ns);
struct netio_cq_err {
	uint64_t context;
	uint64_t flags;
	uint64_t len;
	int err;
	int prov_errno;
};
ssize_t netio_cq_readerr(struct fid_cq *cq, struct netio_cq_err *out);

int netio_pep_open(struct fid_fabric *fab, struct fi_info *info, uint64_t ctx, struct fid_pep **pep);
int netio_pep_bind(struct fid_pep *pep, struct fid_eq *eq);
int netio_listen(struct fid_pep *pep);
int netio_reject(struct fid_pep *pep, struct fi_info *info);
int netio_getname(struct fid *fid, char *buf, size_t len);
int netio_info_dest(struct fi_info *info, char *buf, size_t len);

int netio_ep_open(struct fid_domain *dom, struct fi_info *info, uint64_t ctx, struct fid_ep **ep);
int netio_ep_bind(struct fid_ep *ep, struct fid *obj, uint64_t flags);
int netio_ep_enable(struct fid_ep *ep);
int netio_connect(struct fid_ep *ep, struct fi_info *info);
int netio_accept(struct fid_ep *ep);
int netio_shutdown(struct fid_ep *ep);

ssize_t netio_send(netio_ep_h ep, uintptr_t buf, size_t len, uintptr_t desc, uint64_t ctx);
ssize_t netio_sendv(struct fid_ep *ep, const struct iovec *iov, const uintptr_t *desc, size_t count, uint64_t ctx);
ssize_t netio_inject(struct fid_ep *ep, const void *buf, size_t len);
ssize_t netio_inject_counted(struct fid_ep *ep, const void *buf, size_t len, uint64_t ctx);
ssize_t netio_send_completion(netio_ep_h ep, uintptr_t buf, size_t len, uintptr_t desc, uint64_t ctx);
int netio_cntr_open(struct fid_domain *dom, struct fid_cntr **cntr);
uint64_t netio_cntr_read(struct fid_cntr *cntr);
uint64_t netio_cntr_readerr(struct fid_cntr *cntr);
ssize_t netio_recv(netio_ep_h ep, uintptr_t buf, size_t len, uintptr_t desc, uint64_t ctx);
ssize_t netio_recv_batch(struct fid_ep *ep, const uintptr_t *bufs, const uint64_t *lens,
                         const uintptr_t *descs, const uint64_t *ctxs, size_t n);

// RMA: one contiguous transfer between local registered memory and a peer's
// exposed region (addr as the provider wants it, key from the peer).
ssize_t netio_read(struct fid_ep *ep, uintptr_t buf, size_t len, uintptr_t desc,
                   uint64_t addr, uint64_t key, uint64_t ctx);
ssize_t netio_write(struct fid_ep *ep, uintptr_t buf, size_t len, uintptr_t desc,
                    uint64_t addr, uint64_t key, uint64_t ctx);

int netio_mr_reg(struct fid_domain *dom, uintptr_t buf, size_t len, uint64_t access,
                 uint64_t key, struct fid_mr **mr);
uintptr_t netio_mr_desc(struct fid_mr *mr);
uint64_t netio_mr_key(struct fid_mr *mr);


/* Address vectors and connectionless (FI_EP_RDM) posts. */
int netio_av_open(struct fid_domain *dom, size_t count, struct fid_av **av);
int netio_av_insert(struct fid_av *av, const void *addr, uint64_t *fi_addr);
int netio_av_insertsvc(struct fid_av *av, const char *node, const char *service, uint64_t *fi_addr);
int netio_av_remove(struct fid_av *av, uint64_t fi_addr);
int netio_av_lookup(struct fid_av *av, uint64_t fi_addr, void *buf, size_t *len);
int netio_av_straddr(struct fid_av *av, const void *addr, char *buf, size_t len);
int netio_getname_raw(struct fid *fid, void *buf, size_t *len);
ssize_t netio_sendto(netio_ep_h ep, uintptr_t buf, size_t len, uintptr_t desc, uint64_t dest, uint64_t ctx);
ssize_t netio_sendvto(struct fid_ep *ep, const struct iovec *iov, const uintptr_t *desc, size_t count, uint64_t dest, uint64_t ctx);
ssize_t netio_injectto(struct fid_ep *ep, const void *buf, size_t len, uint64_t dest);
/* netio_injectto_run injects n messages (base + off[i], len[i] bytes) to
 * dest in order until the provider refuses one: returns how many it took
 * << 32 | that refusal's errno (0 if it took all). */
int64_t netio_injectto_run(struct fid_ep *ep, const char *base, const uint32_t *off,
			   const uint32_t *len, size_t n, uint64_t dest);

#endif
