#include "shim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define NETIO_FI_VERSION FI_VERSION(1, 17)

int netio_getinfo(const struct netio_hints *h, struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->ep_attr->type = h->ep_type;
	hints->caps = h->caps;
	hints->mode = 0; /* we pass integer contexts, never struct fi_context */
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	if (h->prov)
		hints->fabric_attr->prov_name = strdup(h->prov);
	if (h->fabric)
		hints->fabric_attr->name = strdup(h->fabric);
	if (h->domain)
		hints->domain_attr->name = strdup(h->domain);
	int ret = fi_getinfo(NETIO_FI_VERSION, h->node, h->service, h->flags, hints, out);
	fi_freeinfo(hints);
	return ret;
}

int netio_fabric(struct fi_info *info, struct fid_fabric **fab)
{
	return fi_fabric(info->fabric_attr, fab, NULL);
}

int netio_domain(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom)
{
	return fi_domain(fab, info, dom, NULL);
}

int netio_eq_open(struct fid_fabric *fab, size_t size, int wait_fd, struct fid_eq **eq)
{
	struct fi_eq_attr attr = {
		.size = size,
		.wait_obj = wait_fd ? FI_WAIT_FD : FI_WAIT_NONE,
	};
	return fi_eq_open(fab, &attr, eq, NULL);
}

int netio_cq_open(struct fid_domain *dom, size_t size, int wait_fd, struct fid_cq **cq)
{
	struct fi_cq_attr attr = {
		.size = size,
		.format = FI_CQ_FORMAT_MSG,
		.wait_obj = wait_fd ? FI_WAIT_FD : FI_WAIT_NONE,
		.wait_cond = FI_CQ_COND_NONE,
	};
	return fi_cq_open(dom, &attr, cq, NULL);
}

int netio_close(struct fid *fid)
{
	return fi_close(fid);
}

int netio_getwait(struct fid *fid, int *fd)
{
	return fi_control(fid, FI_GETWAIT, fd);
}

int netio_trywait(struct fid_fabric *fab, struct fid *a, struct fid *b)
{
	struct fid *fids[2] = {a, b};
	return fi_trywait(fab, fids, b ? 2 : 1);
}

/* netio_info_set_prov names the provider of an info that names none (a
 * sockets connection request in 1.17: sock_set_fabric_attr leaves
 * prov_name NULL); fi_freeinfo frees the copy. */
int netio_info_set_prov(struct fi_info *info, const char *name)
{
	if (!info->fabric_attr || info->fabric_attr->prov_name)
		return 0;
	info->fabric_attr->prov_name = strdup(name);
	return info->fabric_attr->prov_name ? 0 : -FI_ENOMEM;
}

ssize_t netio_eq_read(struct fid_eq *eq, struct netio_event *ev)
{
	struct fi_eq_cm_entry entry;
	uint32_t event = 0;
	memset(ev, 0, sizeof(*ev));
	ssize_t ret = fi_eq_read(eq, &event, &entry, sizeof(entry), 0);
	if (ret == -FI_EAVAIL) {
		struct fi_eq_err_entry err;
		memset(&err, 0, sizeof(err));
		ret = fi_eq_readerr(eq, &err, 0);
		if (ret < 0)
			return ret;
		ev->event = 0;
		ev->context = err.fid ? (uint64_t)(uintptr_t)err.fid->context : 0;
		ev->err = err.err;
		ev->prov_errno = err.prov_errno;
		/* err_data belongs to the EQ; a connection request's info in
		 * error entries is not handed out, so nothing else to free. */
		return 1;
	}
	if (ret < 0)
		return ret;
	ev->event = event;
	if (ret >= (ssize_t)sizeof(struct fid *)) {
		ev->context = entry.fid ? (uint64_t)(uintptr_t)entry.fid->context : 0;
	}
	if (event == FI_CONNREQ)
		ev->info = entry.info;
	return 1;
}

const char *netio_eq_strerror(struct fid_eq *eq, int prov_errno)
{
	return fi_eq_strerror(eq, prov_errno, NULL, NULL, 0);
}

/* fi_cq_readfrom, so that a connectionless endpoint learns each receive's
 * source; the providers here implement fi_cq_read as fi_cq_readfrom
 * without the addresses, so a connected endpoint pays nothing for it.
 * libfabric 1.17's shared CQ code leaves a source slot as it was when the
 * provider has no source to write (ofi_rxd never does, shm not for a
 * sender it does not know), so the slots the previous read filled (dirty)
 * go back to FI_ADDR_NOTAVAIL first: a stale address must never name a
 * sender. */
static ssize_t cq_read(struct fid_cq *cq, struct fi_cq_msg_entry *buf, uint64_t *src, size_t count, size_t dirty)
{
	size_t i;
	for (i = 0; i < dirty && i < count; i++)
		src[i] = FI_ADDR_NOTAVAIL;
	return fi_cq_readfrom(cq, buf, count, (fi_addr_t *)src);
}

/* post_queued posts the receives queued with CQ.QueueRecv, in order, and
 * empties the queue; a refused post goes to the failed list, which the
 * caller empties after the read. QueueRecv keeps queued plus failed at
 * most NETIO_RECV_QUEUE, so the list always has room (the bound below is
 * a guard only). */
static void post_queued(struct netio_recv_queue *rq)
{
	uint32_t i, n = rq->n;
	for (i = 0; i < n; i++) {
		const struct netio_queued_recv *r = &rq->q[i];
		ssize_t ret = fi_recv((struct fid_ep *)r->ep, (void *)r->buf, r->len, (void *)r->desc,
				      FI_ADDR_UNSPEC, (void *)(uintptr_t)r->ctx);
		if (ret < 0 && rq->nfailed < NETIO_RECV_QUEUE) {
			rq->failed[rq->nfailed].ctx = r->ctx;
			rq->failed[rq->nfailed].err = -ret;
			rq->nfailed++;
		}
	}
	rq->n = 0;
}

ssize_t netio_cq_read(netio_cq_h cq, netio_recv_queue_h rqh, netio_cq_entries_h buf, netio_cq_srcs_h src, size_t count, size_t dirty)
{
	struct netio_recv_queue *rq = NETIO_H(struct netio_recv_queue *, rqh);
	if (rq->n)
		post_queued(rq);
	return cq_read(NETIO_H(struct fid_cq *, cq), NETIO_H(struct fi_cq_msg_entry *, buf),
		       NETIO_H(uint64_t *, src), count, dirty);
}

static int64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A spin reads the clock about once per SPIN_CLOCK_NS of polling. */
#define SPIN_CLOCK_NS 256
#define SPIN_CLOCK_MAX_POLLS 256

/*
 * The queued receives posted, fi_cq_read, repeated while the queue is
 * empty for up to spin_ns. Spinning here instead of in Go keeps the
 * per-poll cost at that of C: one cgo transition per slice instead of per
 * poll. The clock is read once per batch of polls, the batch doubling
 * while a batch takes less than SPIN_CLOCK_NS and halving when it takes
 * more than twice that: a clock_gettime costs 45-85 ns here, more than an
 * empty fi_cq_read on shm, and a completion that lands during it waits
 * for it (docs/performance.md, "rdm 64 B latency"). A spin overshoots
 * spin_ns by about a batch.
 */
ssize_t netio_cq_read_spin(netio_cq_h cqh, netio_recv_queue_h rqh, netio_cq_entries_h bufh, netio_cq_srcs_h srch, size_t count, size_t dirty, int64_t spin_ns)
{
	struct netio_recv_queue *rq = NETIO_H(struct netio_recv_queue *, rqh);
	if (rq->n)
		post_queued(rq);
	struct fid_cq *cq = NETIO_H(struct fid_cq *, cqh);
	struct fi_cq_msg_entry *buf = NETIO_H(struct fi_cq_msg_entry *, bufh);
	uint64_t *src = NETIO_H(uint64_t *, srch);
	ssize_t ret = cq_read(cq, buf, src, count, dirty);
	if (ret != -FI_EAGAIN || spin_ns <= 0)
		return ret;
	int64_t last = monotonic_ns(), end = last + spin_ns;
	unsigned batch = 1, polls = 0;
	for (;;) {
		ret = cq_read(cq, buf, src, count, 0);
		if (ret != -FI_EAGAIN)
			return ret;
		if (++polls < batch)
			continue;
		int64_t now = monotonic_ns();
		if (now >= end)
			return ret;
		if (now - last < SPIN_CLOCK_NS && batch < SPIN_CLOCK_MAX_POLLS)
			batch *= 2;
		else if (now - last > 2 * SPIN_CLOCK_NS && batch > 1)
			batch /= 2;
		last = now;
		polls = 0;
	}
}

ssize_t netio_cq_readerr(struct fid_cq *cq, struct netio_cq_err *out)
{
	struct fi_cq_err_entry err;
	memset(&err, 0, sizeof(err));
	ssize_t ret = fi_cq_readerr(cq, &err, 0);
	if (ret < 0)
		return ret;
	out->context = (uint64_t)(uintptr_t)err.op_context;
	out->flags = err.flags;
	out->len = err.len;
	out->err = err.err;
	out->prov_errno = err.prov_errno;
	return ret;
}

int netio_pep_open(struct fid_fabric *fab, struct fi_info *info, uint64_t ctx, struct fid_pep **pep)
{
	return fi_passive_ep(fab, info, pep, (void *)(uintptr_t)ctx);
}

int netio_pep_bind(struct fid_pep *pep, struct fid_eq *eq)
{
	return fi_pep_bind(pep, &eq->fid, 0);
}

int netio_listen(struct fid_pep *pep)
{
	return fi_listen(pep);
}

int netio_reject(struct fid_pep *pep, struct fi_info *info)
{
	return fi_reject(pep, info->handle, NULL, 0);
}

/* format_sockaddr writes an IPv4 or IPv6 socket address of salen bytes as
 * "ip:port" or "[ip]:port". */
static int format_sockaddr(const void *sa, size_t salen, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];
	sa_family_t family;
	if (sa == NULL || salen < sizeof(family))
		return -FI_EADDRNOTAVAIL;
	memcpy(&family, sa, sizeof(family));
	if (family == AF_INET && salen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = sa;
		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(sin->sin_port));
	} else if (family == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = sa;
		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(sin6->sin6_port));
	} else {
		return -FI_EADDRNOTAVAIL;
	}
	return 0;
}

int netio_getname(struct fid *fid, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	size_t sslen = sizeof(ss);
	int ret = fi_getname(fid, &ss, &sslen);
	if (ret)
		return ret;
	return format_sockaddr(&ss, sslen, buf, len);
}

int netio_info_dest(struct fi_info *info, char *buf, size_t len)
{
	return format_sockaddr(info->dest_addr, info->dest_addrlen, buf, len);
}

int netio_ep_open(struct fid_domain *dom, struct fi_info *info, uint64_t ctx, struct fid_ep **ep)
{
	return fi_endpoint(dom, info, ep, (void *)(uintptr_t)ctx);
}

int netio_ep_bind(struct fid_ep *ep, struct fid *obj, uint64_t flags)
{
	return fi_ep_bind(ep, obj, flags);
}

int netio_ep_enable(struct fid_ep *ep)
{
	return fi_enable(ep);
}

int netio_connect(struct fid_ep *ep, struct fi_info *info)
{
	return fi_connect(ep, info->dest_addr, NULL, 0);
}

int netio_accept(struct fid_ep *ep)
{
	return fi_accept(ep, NULL, 0);
}

int netio_shutdown(struct fid_ep *ep)
{
	return fi_shutdown(ep, 0);
}

ssize_t netio_send(netio_ep_h eph, uintptr_t buf, size_t len, uintptr_t desc, uint64_t ctx)
{
	struct fid_ep *ep = NETIO_H(struct fid_ep *, eph);
	return fi_send(ep, (void *)buf, len, (void *)desc, 0, (void *)(uintptr_t)ctx);
}

ssize_t netio_sendv(struct fid_ep *ep, const struct iovec *iov, const uintptr_t *desc, size_t count, uint64_t ctx)
{
	return fi_sendv(ep, iov, (void **)desc, count, 0, (void *)(uintptr_t)ctx);
}

ssize_t netio_inject(struct fid_ep *ep, const void *buf, size_t len)
{
	return fi_inject(ep, buf, len, 0);
}

/* fi_sendmsg with FI_INJECT and without FI_COMPLETION: copied before it
 * returns like fi_inject, no completion on an endpoint whose transmit CQ
 * is bound with FI_SELECTIVE_COMPLETION, but counted by a bound send
 * counter once sent (tcp in libfabric 1.17 counts no fi_inject: it leaves
 * the transfer's cq_flags without FI_SEND). FI_INJECT_COMPLETE keeps
 * sockets from adding FI_TRANSMIT_COMPLETE (an acknowledgement per
 * inject); tcp ignores it. ctx is the context of the error completion tcp
 * writes when it flushes the inject (fi_close, a broken connection): its
 * own fi_inject writes none, a message sent with fi_sendmsg does. */
ssize_t netio_inject_counted(struct fid_ep *ep, const void *buf, size_t len, uint64_t ctx)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
			     .context = (void *)(uintptr_t)ctx};
	return fi_sendmsg(ep, &msg, FI_INJECT | FI_INJECT_COMPLETE);
}

/* fi_sendmsg with FI_COMPLETION: a send that completes on an endpoint
 * bound with FI_SELECTIVE_COMPLETION. */
ssize_t netio_send_completion(netio_ep_h eph, uintptr_t buf, size_t len, uintptr_t desc, uint64_t ctx)
{
	struct fid_ep *ep = NETIO_H(struct fid_ep *, eph);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	void *d = (void *)desc;
	struct fi_msg msg = {.msg_iov = &iov, .desc = &d, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
			     .context = (void *)(uintptr_t)ctx};
	return fi_sendmsg(ep, &msg, FI_COMPLETION);
}

int netio_cntr_open(struct fid_domain *dom, struct fid_cntr **cntr)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	return fi_cntr_open(dom, &attr, cntr, NULL);
}

uint64_t netio_cntr_read(struct fid_cntr *cntr) { return fi_cntr_read(cntr); }

uint64_t netio_cntr_readerr(struct fid_cntr *cntr) { return fi_cntr_readerr(cntr); }

ssize_t netio_recv(netio_ep_h eph, uintptr_t buf, size_t len, uintptr_t desc, uint64_t ctx)
{
	struct fid_ep *ep = NETIO_H(struct fid_ep *, eph);
	return fi_recv(ep, (void *)buf, len, (void *)desc, FI_ADDR_UNSPEC, (void *)(uintptr_t)ctx);
}

/* netio_recv_batch posts n receives, every one but the last with FI_MORE:
 * a provider may then hand the batch to the device at once (one doorbell
 * on RDMA NICs; tcp and sockets ignore the hint). It stops at the first
 * refusal and returns how many were posted, or the error when none was;
 * the caller posts the rest later, and that post ends without FI_MORE. */
ssize_t netio_recv_batch(struct fid_ep *ep, const uintptr_t *bufs, const uint64_t *lens,
                         const uintptr_t *descs, const uint64_t *ctxs, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		struct iovec iov = {.iov_base = (void *)bufs[i], .iov_len = lens[i]};
		void *desc = (void *)descs[i];
		struct fi_msg msg = {
			.msg_iov = &iov,
			.desc = &desc,
			.iov_count = 1,
			.addr = FI_ADDR_UNSPEC,
			.context = (void *)(uintptr_t)ctxs[i],
		};
		ssize_t ret = fi_recvmsg(ep, &msg, FI_COMPLETION | (i + 1 < n ? FI_MORE : 0));
		if (ret < 0)
			return i > 0 ? (ssize_t)i : ret;
	}
	return (ssize_t)n;
}

ssize_t netio_read(struct fid_ep *ep, uintptr_t buf, size_t len, uintptr_t desc,
                   uint64_t addr, uint64_t key, uint64_t ctx)
{
	return fi_read(ep, (void *)buf, len, (void *)desc, 0, addr, key, (void *)(uintptr_t)ctx);
}

ssize_t netio_write(struct fid_ep *ep, uintptr_t buf, size_t len, uintptr_t desc,
                    uint64_t addr, uint64_t key, uint64_t ctx)
{
	/* FI_DELIVERY_COMPLETE: the completion means the data is in the
	 * target's memory. The default (transmit complete) lets tcp report a
	 * write done while the bytes are still on their way, so a peer told
	 * "pushed" could read stale memory. */
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	void *d = (void *)desc;
	struct fi_rma_iov rma = {.addr = addr, .len = len, .key = key};
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &d,
		.iov_count = 1,
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.context = (void *)(uintptr_t)ctx,
	};
	return fi_writemsg(ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

int netio_mr_reg(struct fid_domain *dom, uintptr_t buf, size_t len, uint64_t access,
                 uint64_t key, struct fid_mr **mr)
{
	return fi_mr_reg(dom, (void *)buf, len, access, 0, key, 0, mr, NULL);
}

uintptr_t netio_mr_desc(struct fid_mr *mr)
{
	return (uintptr_t)fi_mr_desc(mr);
}

uint64_t netio_mr_key(struct fid_mr *mr)
{
	return fi_mr_key(mr);
}

/* Address vectors. FI_AV_UNSPEC lets the provider pick table or map; the
 * library treats fi_addr_t as an opaque number either way. */
int netio_av_open(struct fid_domain *dom, size_t count, struct fid_av **av)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE, .count = count};
	return fi_av_open(dom, &attr, av, NULL);
}

/* Inserts one address; fi_av_insert returns the number inserted, and a
 * provider that refused the address without an error code gives 0. */
int netio_av_insert(struct fid_av *av, const void *addr, uint64_t *fi_addr)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(av, addr, 1, &a, 0, NULL);
	if (ret < 0)
		return ret;
	if (ret != 1 || a == FI_ADDR_NOTAVAIL)
		return -FI_EINVAL;
	*fi_addr = a;
	return 0;
}

int netio_av_insertsvc(struct fid_av *av, const char *node, const char *service, uint64_t *fi_addr)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insertsvc(av, node, service, &a, 0, NULL);
	if (ret < 0)
		return ret;
	if (ret != 1 || a == FI_ADDR_NOTAVAIL)
		return -FI_EINVAL;
	*fi_addr = a;
	return 0;
}

int netio_av_remove(struct fid_av *av, uint64_t fi_addr)
{
	fi_addr_t a = fi_addr;
	return fi_av_remove(av, &a, 1, 0);
}

int netio_av_lookup(struct fid_av *av, uint64_t fi_addr, void *buf, size_t *len)
{
	return fi_av_lookup(av, fi_addr, buf, len);
}

/* fi_av_straddr into buf; -FI_ETOOSMALL when it did not fit. */
int netio_av_straddr(struct fid_av *av, const void *addr, char *buf, size_t len)
{
	size_t n = len;
	if (!fi_av_straddr(av, addr, buf, &n))
		return -FI_EINVAL;
	return n > len ? -FI_ETOOSMALL : 0;
}

int netio_getname_raw(struct fid *fid, void *buf, size_t *len)
{
	return fi_getname(fid, buf, len);
}

ssize_t netio_sendto(netio_ep_h eph, uintptr_t buf, size_t len, uintptr_t desc, uint64_t dest, uint64_t ctx)
{
	struct fid_ep *ep = NETIO_H(struct fid_ep *, eph);
	return fi_send(ep, (void *)buf, len, (void *)desc, dest, (void *)(uintptr_t)ctx);
}

ssize_t netio_sendvto(struct fid_ep *ep, const struct iovec *iov, const uintptr_t *desc, size_t count, uint64_t dest, uint64_t ctx)
{
	return fi_sendv(ep, iov, (void **)desc, count, dest, (void *)(uintptr_t)ctx);
}

ssize_t netio_injectto(struct fid_ep *ep, const void *buf, size_t len, uint64_t dest)
{
	return fi_inject(ep, buf, len, dest);
}

int64_t netio_injectto_run(struct fid_ep *ep, const char *base, const uint32_t *off,
			   const uint32_t *len, size_t n, uint64_t dest)
{
	ssize_t ret = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		ret = fi_inject(ep, base + off[i], len[i], dest);
		if (ret < 0) /* a refusal; a positive return is taken, as errnoOfSize says */
			break;
	}
	return (int64_t)i << 32 | (uint32_t)(ret < 0 ? -ret : 0);
}
