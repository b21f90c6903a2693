/*
 * cpeer: a plain libfabric peer used for interop tests and as a C
 * throughput baseline: FI_EP_MSG (one connection, the default) or FI_EP_RDM
 * (--endpoint rdm: reliable datagrams through an address vector).
 *
 * It only uses libfabric's own wire: fi_connect carries no connection data
 * and every message is exactly the application's bytes (no header, no
 * framing).
 *
 *   cpeer send --provider P --connect ADDR --size S --count N
 *              [--endpoint msg|rdm] [--verify] [--window W] [--timeout SEC]
 *   cpeer send --endpoint rdm --inject --provider P --connect ADDR
 *              --size S --count N [--verify] [--work-ns NS] [--timeout SEC]
 *   cpeer recv --provider P --listen ADDR --size S --count N
 *              [--endpoint msg|rdm] [--verify] [--window W] [--timeout SEC]
 *
 * With --endpoint rdm, --rcvbuf B sets the receive buffer of udp;ofi_rxd's
 * datagram socket (see rdm_set_rcvbuf).
 *
 * ADDR is HOST:PORT (or [V6HOST]:PORT); with --endpoint rdm --provider shm
 * it is an shm endpoint name instead (see rdm_get_info).
 *
 * Build:
 *   gcc -O2 -Wall -Wextra -o cpeer tests/cpeer/cpeer.c \
 *       $(pkg-config --cflags --libs libfabric)
 *
 * The last line on stdout is a JSON object:
 *   {"role":"send"|"recv","provider":"P","messages":N,"bytes":B,
 *    "seconds":T,"mb_per_s":X,"msgs_per_s":Y,"verify_errors":E}
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define FIUTIL_PROG "cpeer"
#include "fiutil.h"

#define CQ_BATCH 64
#define PATTERN_MOD 251
/* Room for a CM entry plus any connection data a peer might send. */
#define EQ_ENTRY_BYTES (sizeof(struct fi_eq_cm_entry) + 512)

struct opts {
	int is_send;
	int rdm; /* --endpoint rdm */
	const char *provider;
	const char *addr; /* --listen/--connect as given */
	char host[256];
	char port[32];
	size_t size;
	uint64_t count;
	int verify;
	int inject;       /* send --endpoint rdm --inject */
	unsigned work_ns; /* --inject: busy time after each inject */
	size_t window;
	unsigned timeout;
	size_t rcvbuf; /* --rcvbuf: SO_RCVBUF of udp;ofi_rxd's socket */
};

struct res {
	struct fi_info *hints;
	struct fi_info *info;      /* from fi_getinfo */
	struct fi_info *conn_info; /* from FI_CONNREQ (recv only) */
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_pep *pep;
	struct fid_ep *ep;
	struct fid_av *av;  /* rdm */
	fi_addr_t peer;     /* rdm send: the receiver in av */
	size_t av_inserted; /* rdm: addresses this program put in av */
	int has_source;     /* rdm recv: FI_SOURCE granted */
	struct fid_mr *mr;
	char *buf;
	void *desc;
	char *pattern; /* PATTERN_MOD + size bytes of (j % 251) */
	struct fi_context *ctx;
};

static struct opts o;
static struct res r;
/*
 * Messages completed (received, or sends completed) and sends posted so
 * far, for error messages and the watchdog's line.
 */
static volatile uint64_t n_done, n_posted;
static volatile uint64_t last_done_ms; /* mono_ms() at a recent done_step */

/*
 * n messages are done: for error messages and the watchdog's line, which
 * says how long before it fired the last 16th step was (a clock read per
 * 16 messages costs the 64 B inject baseline nothing measurable).
 */
static void done_step(uint64_t n)
{
	n_done = n;
	if (!(n & 15) || n == o.count)
		last_done_ms = mono_ms();
}

/* ---------------------------------------------------------------- utils */

static void usage(void)
{
	fprintf(stderr,
		"usage:\n"
		"  cpeer send --provider P --connect ADDR --size S --count N"
		" [--endpoint msg|rdm] [--verify] [--window W] [--timeout SEC]\n"
		"  cpeer send --endpoint rdm --inject --provider P --connect ADDR"
		" --size S --count N [--verify] [--work-ns NS] [--timeout SEC]\n"
		"  cpeer recv --provider P --listen ADDR --size S --count N"
		" [--endpoint msg|rdm] [--verify] [--window W] [--timeout SEC]\n"
		"ADDR is HOST:PORT, or an shm endpoint name with --endpoint rdm"
		" --provider shm\n"
		"--endpoint rdm over udp also takes --rcvbuf BYTES\n");
	exit(1);
}

/*
 * Whether --listen/--connect is a provider's string name, not HOST:PORT:
 * shm's RDM endpoints are named by strings (addr_format FI_ADDR_STR).
 */
static int str_addr(void)
{
	return o.rdm && !strcmp(o.provider, "shm");
}

static void parse_args(int argc, char **argv)
{
	int i, have_addr = 0, have_size = 0, have_count = 0;

	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "send"))
		o.is_send = 1;
	else if (!strcmp(argv[1], "recv"))
		o.is_send = 0;
	else
		usage();
	o.window = 64;
	o.timeout = 60;

	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (!strcmp(a, "--verify")) {
			o.verify = 1;
			continue;
		}
		if (!strcmp(a, "--inject")) {
			o.inject = 1;
			continue;
		}
		if (!v)
			die("%s: missing value", a);
		i++;
		if (!strcmp(a, "--provider")) {
			o.provider = v;
		} else if (!strcmp(a, "--endpoint")) {
			if (!strcmp(v, "rdm"))
				o.rdm = 1;
			else if (!strcmp(v, "msg"))
				o.rdm = 0;
			else
				die("--endpoint: want msg or rdm, got '%s'", v);
		} else if ((!strcmp(a, "--connect") && o.is_send) ||
			   (!strcmp(a, "--listen") && !o.is_send)) {
			o.addr = v;
			have_addr = 1;
		} else if (!strcmp(a, "--size")) {
			o.size = (size_t)parse_u64(a, v);
			have_size = 1;
		} else if (!strcmp(a, "--count")) {
			o.count = parse_u64(a, v);
			have_count = 1;
		} else if (!strcmp(a, "--window")) {
			o.window = (size_t)parse_u64(a, v);
		} else if (!strcmp(a, "--rcvbuf")) {
			o.rcvbuf = (size_t)parse_u64(a, v);
		} else if (!strcmp(a, "--work-ns")) {
			o.work_ns = (unsigned)parse_u64(a, v);
		} else if (!strcmp(a, "--timeout")) {
			o.timeout = (unsigned)parse_u64(a, v);
		} else {
			die("unknown flag '%s'", a);
		}
	}
	if (!o.provider || !have_addr || !have_size || !have_count)
		usage();
	/* Parsed last: whether it is HOST:PORT depends on two flags. */
	if (str_addr()) {
		if (!*o.addr)
			die("%s: empty shm name", o.is_send ? "--connect" : "--listen");
	} else {
		parse_hostport(o.is_send ? "--connect" : "--listen", o.addr,
			       o.host, sizeof(o.host), o.port, sizeof(o.port));
	}
	if (o.inject && (!o.is_send || !o.rdm))
		die("--inject: only with send --endpoint rdm");
	if (o.work_ns && !o.inject)
		die("--work-ns: only with --inject");
	if (o.rcvbuf && (!o.rdm || o.rcvbuf > INT_MAX))
		die("--rcvbuf: only with --endpoint rdm, at most %d", INT_MAX);
	if (o.inject)
		o.window = 1; /* the one buffer every message is sent from */
	if (o.window == 0)
		die("--window: must be at least 1");
	if (o.size && o.window > SIZE_MAX / o.size)
		die("--window * --size overflows");
}

/* ------------------------------------------------------------- fabric */

static void get_info(uint64_t flags)
{
	r.hints = msg_hints(o.provider);
	r.info = msg_getinfo(r.hints, o.host, o.port, flags);
}

static void open_fabric_eq(void)
{
	struct fi_eq_attr eq_attr;
	int ret;

	ret = fi_fabric(r.info->fabric_attr, &r.fabric, NULL);
	if (ret)
		die_fi("fi_fabric", ret);

	memset(&eq_attr, 0, sizeof(eq_attr));
	eq_attr.wait_obj = FI_WAIT_UNSPEC; /* needed for fi_eq_sread */
	ret = fi_eq_open(r.fabric, &eq_attr, &r.eq, NULL);
	if (ret)
		die_fi("fi_eq_open", ret);
}

/*
 * Open the domain and the CQ for info. FI_CQ_FORMAT_MSG is enough for rdm
 * too: fi_cq_readfrom reports the source beside the entries, in an array
 * of its own.
 */
static void open_domain_cq(struct fi_info *info)
{
	struct fi_cq_attr cq_attr;
	int ret;

	ret = fi_domain(r.fabric, info, &r.domain, NULL);
	if (ret)
		die_fi("fi_domain", ret);

	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.format = FI_CQ_FORMAT_MSG;
	cq_attr.wait_obj = FI_WAIT_NONE; /* we busy-poll with fi_cq_read */
	cq_attr.size = o.window * 2 < 256 ? 256 : o.window * 2;
	ret = fi_cq_open(r.domain, &cq_attr, &r.cq, NULL);
	if (ret)
		die_fi("fi_cq_open", ret);
}

/*
 * Register one region of W*S bytes (never zero bytes) and make the slot
 * contexts and the pattern.
 */
static void alloc_buffers(void)
{
	size_t region, i;
	int ret;

	region = o.window * o.size;
	if (region == 0)
		region = 1;
	if (posix_memalign((void **)&r.buf, 4096, region))
		die("posix_memalign: out of memory");
	memset(r.buf, 0, region);
	ret = fi_mr_reg(r.domain, r.buf, region, o.is_send ? FI_SEND : FI_RECV,
			0, 0 /* requested_key: only MR in the domain */,
			0, &r.mr, NULL);
	if (ret)
		die_fi("fi_mr_reg", ret);
	r.desc = fi_mr_desc(r.mr);

	r.ctx = calloc(o.window, sizeof(*r.ctx));
	if (!r.ctx)
		die("calloc: out of memory");

	/* pattern[j] = j % 251, so message k is pattern + (k % 251). */
	r.pattern = malloc(PATTERN_MOD + o.size + 1);
	if (!r.pattern)
		die("malloc: out of memory");
	for (i = 0; i < PATTERN_MOD + o.size + 1; i++)
		r.pattern[i] = (char)(i % PATTERN_MOD);
}

/*
 * Open the endpoint of info, bind first (the EQ of a connected endpoint, the
 * AV of a connectionless one; named so in errors) and the CQ for both
 * directions, enable it and allocate the buffers.
 */
static void open_endpoint(struct fi_info *info, struct fid *first, const char *first_name)
{
	int ret = fi_endpoint(r.domain, info, &r.ep, NULL);

	if (ret)
		die_fi("fi_endpoint", ret);
	ret = fi_ep_bind(r.ep, first, 0);
	if (ret)
		die_fi(first_name, ret);
	ret = fi_ep_bind(r.ep, &r.cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		die_fi("fi_ep_bind(cq)", ret);
	ret = fi_enable(r.ep);
	if (ret)
		die_fi("fi_enable", ret);
	alloc_buffers();
}

/* Open domain, CQ, endpoint and MR for the given info, bind and enable. */
static void open_ep(struct fi_info *info)
{
	open_domain_cq(info);
	open_endpoint(info, &r.eq->fid, "fi_ep_bind(eq)");
}

/* Report an EQ error entry (after -FI_EAVAIL) and exit 1. */
static void die_eq_err(const char *call)
{
	struct fi_eq_err_entry err;
	ssize_t ret;
	const char *prov;

	memset(&err, 0, sizeof(err));
	ret = fi_eq_readerr(r.eq, &err, 0);
	if (ret < 0)
		die_fi("fi_eq_readerr", ret);
	prov = err.prov_errno ? fi_eq_strerror(r.eq, err.prov_errno,
					       err.err_data, NULL, 0)
			      : NULL;
	if (prov && *prov && strcmp(prov, fi_strerror(err.err)))
		die("%s: %s (provider: %s)", call, fi_strerror(err.err), prov);
	die("%s: %s", call, fi_strerror(err.err));
}

/*
 * Block on the EQ for one event. Returns the event type; the entry is in buf.
 * timeout_ms < 0 waits forever. Returns 0 on timeout (only if timeout_ms>=0).
 */
static uint32_t eq_wait(const char *call, void *buf, int timeout_ms)
{
	uint32_t event;
	ssize_t ret;

	for (;;) {
		ret = fi_eq_sread(r.eq, &event, buf, EQ_ENTRY_BYTES, timeout_ms,
				  0);
		if (ret >= 0)
			return event;
		if (ret == -FI_EAVAIL)
			die_eq_err(call);
		if (ret == -FI_EAGAIN || ret == -FI_ETIMEDOUT) {
			if (timeout_ms >= 0)
				return 0;
			continue;
		}
		if (ret == -FI_EINTR)
			continue;
		die_fi("fi_eq_sread", ret);
	}
}

static const char *event_name(uint32_t ev)
{
	switch (ev) {
	case FI_CONNREQ:
		return "FI_CONNREQ";
	case FI_CONNECTED:
		return "FI_CONNECTED";
	case FI_SHUTDOWN:
		return "FI_SHUTDOWN";
	case FI_NOTIFY:
		return "FI_NOTIFY";
	case FI_MR_COMPLETE:
		return "FI_MR_COMPLETE";
	case FI_AV_COMPLETE:
		return "FI_AV_COMPLETE";
	case FI_JOIN_COMPLETE:
		return "FI_JOIN_COMPLETE";
	default:
		return "unknown";
	}
}

static void wait_connected(const char *call)
{
	char buf[EQ_ENTRY_BYTES];
	struct fi_eq_cm_entry *e = (struct fi_eq_cm_entry *)buf;
	uint32_t ev;

	ev = eq_wait(call, buf, -1);
	if (ev != FI_CONNECTED)
		die("%s: unexpected event %s (%u) instead of FI_CONNECTED", call,
		    event_name(ev), ev);
	if (e->fid != &r.ep->fid)
		die("%s: FI_CONNECTED for an unknown fid", call);
}

/*
 * Read one batch of completions. Returns the number of entries (0 if none).
 * Error completions are fatal. With src (CQ_BATCH entries) it reads with
 * fi_cq_readfrom, and src[j] is entry j's source, FI_ADDR_NOTAVAIL when
 * the provider does not say.
 */
static int cq_poll_from(struct fi_cq_msg_entry *comp, fi_addr_t *src,
			const char *what)
{
	ssize_t n;
	int j;

	if (src) {
		/* A provider without FI_SOURCE leaves src as it was. */
		for (j = 0; j < CQ_BATCH; j++)
			src[j] = FI_ADDR_NOTAVAIL;
		n = fi_cq_readfrom(r.cq, comp, CQ_BATCH, src);
	} else {
		n = fi_cq_read(r.cq, comp, CQ_BATCH);
	}
	if (n > 0)
		return (int)n;
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		const char *prov;

		memset(&err, 0, sizeof(err));
		n = fi_cq_readerr(r.cq, &err, 0);
		if (n < 0)
			die_fi("fi_cq_readerr", n);
		if (!o.is_send &&
		    (err.err == FI_ETRUNC || err.err == -FI_ETRUNC)) {
			/*
			 * The peer sent more than S bytes: report it as a
			 * normal completion whose length (len + olen, the
			 * original size) differs from S, so it is counted as
			 * a verify error instead of aborting. (shm in 1.17
			 * puts -FI_ETRUNC in err, the others FI_ETRUNC.)
			 */
			memset(&comp[0], 0, sizeof(comp[0]));
			comp[0].op_context = err.op_context;
			comp[0].flags = err.flags | FI_RECV;
			comp[0].len = err.len + err.olen;
			if (comp[0].len == o.size)
				comp[0].len = o.size + 1;
			return 1;
		}
		prov = err.prov_errno ? fi_cq_strerror(r.cq, err.prov_errno,
						       err.err_data, NULL, 0)
				      : NULL;
		if (prov && *prov && strcmp(prov, fi_strerror(err.err)))
			die("%s completion: %s (provider: %s) after %" PRIu64
			    " of %" PRIu64 " messages",
			    what, fi_strerror(err.err), prov, n_done, o.count);
		die("%s completion: %s after %" PRIu64 " of %" PRIu64
		    " messages",
		    what, fi_strerror(err.err), n_done, o.count);
	}
	die_fi(src ? "fi_cq_readfrom" : "fi_cq_read", n);
	return 0;
}

static int cq_poll(struct fi_cq_msg_entry *comp, const char *what)
{
	return cq_poll_from(comp, NULL, what);
}

static size_t ctx_slot(void *op_context)
{
	struct fi_context *c = op_context;

	if (c < r.ctx || c >= r.ctx + o.window)
		die("fi_cq_read: completion with unknown context %p",
		    op_context);
	return (size_t)(c - r.ctx);
}

static void close_all(void)
{
	close_fid("fi_close(ep)", r.ep ? &r.ep->fid : NULL);
	close_fid("fi_close(pep)", r.pep ? &r.pep->fid : NULL);
	close_fid("fi_close(mr)", r.mr ? &r.mr->fid : NULL);
	close_fid("fi_close(cq)", r.cq ? &r.cq->fid : NULL);
	close_fid("fi_close(av)", r.av ? &r.av->fid : NULL);
	close_fid("fi_close(eq)", r.eq ? &r.eq->fid : NULL);
	close_fid("fi_close(domain)", r.domain ? &r.domain->fid : NULL);
	close_fid("fi_close(fabric)", r.fabric ? &r.fabric->fid : NULL);
	if (r.conn_info)
		fi_freeinfo(r.conn_info);
	if (r.info)
		fi_freeinfo(r.info);
	if (r.hints)
		fi_freeinfo(r.hints);
	free(r.buf);
	free(r.ctx);
	free(r.pattern);
	memset(&r, 0, sizeof(r));
}

static void print_json(uint64_t messages, double secs, uint64_t verify_errors)
{
	uint64_t bytes = messages * (uint64_t)o.size;
	double mbps = secs > 0 ? (double)bytes / 1e6 / secs : 0.0;
	double mps = secs > 0 ? (double)messages / secs : 0.0;
	const char *p;

	printf("{\"role\":\"%s\",\"provider\":\"", o.is_send ? "send" : "recv");
	for (p = o.provider; *p; p++) {
		if (*p == '"' || *p == '\\')
			putchar('\\');
		if ((unsigned char)*p >= 0x20)
			putchar(*p);
	}
	printf("\",\"messages\":%" PRIu64 ",\"bytes\":%" PRIu64
	       ",\"seconds\":%.6f,\"mb_per_s\":%.3f,\"msgs_per_s\":%.1f"
	       ",\"verify_errors\":%" PRIu64 "}\n",
	       messages, bytes, secs, mbps, mps, verify_errors);
	fflush(stdout);
}

/* --------------------------------------------------------------- send */

/*
 * Send N messages to dest (ignored on a connected endpoint) with up to W in
 * flight and wait for all their completions. Returns the number completed;
 * *t0 is when the first send was posted, *t1 when the last completion was
 * read. -FI_EAGAIN is answered by reading the CQ, which drives progress:
 * the queue is full, or (ofi_rxm) the connection to dest is still being
 * made on the first sends.
 */
static uint64_t send_all(fi_addr_t dest, double *t0p, double *t1p)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	size_t *free_slots, nfree, i;
	uint64_t posted = 0, completed = 0;
	double t0 = 0, t1 = 0;
	int n, j;

	free_slots = malloc(o.window * sizeof(*free_slots));
	if (!free_slots)
		die("malloc: out of memory");
	for (i = 0; i < o.window; i++)
		free_slots[i] = o.window - 1 - i;
	nfree = o.window;

	while (completed < o.count) {
		while (posted < o.count && nfree > 0) {
			size_t slot = free_slots[--nfree];
			char *b = r.buf + slot * o.size;

			if (o.verify)
				memcpy(b, r.pattern + posted % PATTERN_MOD,
				       o.size);
			if (posted == 0)
				t0 = now_sec();
			for (;;) {
				ssize_t sret = fi_send(r.ep, b, o.size, r.desc,
						       dest, &r.ctx[slot]);
				if (sret == 0)
					break;
				if (sret != -FI_EAGAIN)
					die_fi("fi_send", sret);
				/* Queue full: drive progress, reap, retry. */
				n = cq_poll(comp, "send");
				for (j = 0; j < n; j++) {
					free_slots[nfree++] =
						ctx_slot(comp[j].op_context);
					done_step(++completed);
				}
				if (n > 0)
					t1 = now_sec();
			}
			n_posted = ++posted;
		}
		n = cq_poll(comp, "send");
		for (j = 0; j < n; j++) {
			free_slots[nfree++] = ctx_slot(comp[j].op_context);
			done_step(++completed);
		}
		if (n > 0)
			t1 = now_sec();
	}
	free(free_slots);
	*t0p = t0;
	*t1p = t1;
	return completed;
}

static int run_send(void)
{
	uint64_t completed;
	double t0, t1;
	int ret;

	get_info(0);
	open_fabric_eq();
	open_ep(r.info);

	ret = fi_connect(r.ep, r.info->dest_addr, NULL, 0);
	if (ret)
		die_fi("fi_connect", ret);
	wait_connected("fi_connect");

	completed = send_all(0, &t0, &t1);

	ret = fi_shutdown(r.ep, 0);
	if (ret)
		die_fi("fi_shutdown", ret);
	close_all();
	print_json(completed, o.count ? t1 - t0 : 0.0, 0);
	return 0;
}

/* --------------------------------------------------------------- recv */

/*
 * Receive posting. Receives are matched in the order they are posted, so the
 * message index that will land in a slot is assigned when fi_recv succeeds.
 * If the provider's receive queue is full (-FI_EAGAIN) the slot waits on a
 * pending list and is retried after the next completions are reaped.
 */
struct rxstate {
	uint64_t *slot_seq; /* message index expected in each posted slot */
	size_t *pending;    /* slots waiting to be (re)posted */
	size_t npending;
	uint64_t posted;    /* successful fi_recv calls */
};

static int try_post_recv(struct rxstate *rx, size_t slot)
{
	ssize_t ret;

	/* rdm: from anyone. A connected endpoint ignores the address. */
	ret = fi_recv(r.ep, r.buf + slot * o.size, o.size, r.desc,
		      o.rdm ? FI_ADDR_UNSPEC : 0, &r.ctx[slot]);
	if (ret == -FI_EAGAIN)
		return 0;
	if (ret)
		die_fi("fi_recv", ret);
	rx->slot_seq[slot] = rx->posted++;
	return 1;
}

/* Queue a slot for posting, unless N receives are already accounted for. */
static void want_recv(struct rxstate *rx, size_t slot)
{
	if (rx->posted + rx->npending < o.count)
		rx->pending[rx->npending++] = slot;
}

static void flush_recv(struct rxstate *rx)
{
	while (rx->npending > 0 &&
	       try_post_recv(rx, rx->pending[rx->npending - 1]))
		rx->npending--;
}

static void print_listening(void)
{
	char addrbuf[128];
	size_t len = sizeof(addrbuf);
	char ip[INET6_ADDRSTRLEN];
	struct sockaddr *sa = (struct sockaddr *)addrbuf;
	int ret;

	ret = fi_getname(&r.pep->fid, addrbuf, &len);
	if (ret)
		die_fi("fi_getname", ret);
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)addrbuf;

		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
		printf("LISTENING %s:%u\n", ip, ntohs(sin->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)addrbuf;

		inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
		printf("LISTENING [%s]:%u\n", ip, ntohs(sin6->sin6_port));
	} else {
		die("fi_getname: unsupported address family %d",
		    sa->sa_family);
	}
	fflush(stdout);
}

static int run_recv(void)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	char evbuf[EQ_ENTRY_BYTES];
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)evbuf;
	struct rxstate rx;
	uint64_t received = 0, verify_errors = 0;
	unsigned long idle = 0;
	double gone_at = 0; /* when the peer's shutdown was seen, or the last message after it */
	double t0 = 0, t1 = 0, deadline;
	size_t i;
	uint32_t ev;
	int ret, n, j, peer_gone = 0;

	get_info(FI_SOURCE);
	open_fabric_eq();

	ret = fi_passive_ep(r.fabric, r.info, &r.pep, NULL);
	if (ret)
		die_fi("fi_passive_ep", ret);
	ret = fi_pep_bind(r.pep, &r.eq->fid, 0);
	if (ret)
		die_fi("fi_pep_bind", ret);
	ret = fi_listen(r.pep);
	if (ret)
		die_fi("fi_listen", ret);
	print_listening();

	ev = eq_wait("fi_listen", evbuf, -1);
	if (ev != FI_CONNREQ)
		die("fi_listen: unexpected event %s (%u) instead of FI_CONNREQ",
		    event_name(ev), ev);
	r.conn_info = cm->info;

	open_ep(r.conn_info);

	memset(&rx, 0, sizeof(rx));
	rx.slot_seq = calloc(o.window, sizeof(*rx.slot_seq));
	rx.pending = calloc(o.window, sizeof(*rx.pending));
	if (!rx.slot_seq || !rx.pending)
		die("calloc: out of memory");
	/* Post W receives (never more than N in total). */
	for (i = o.window; i-- > 0;)
		want_recv(&rx, i);
	flush_recv(&rx);
	if (rx.npending)
		fprintf(stderr,
			"cpeer: note: provider accepted only %" PRIu64
			" of %zu initial receives; the rest are posted as "
			"completions free queue space\n",
			rx.posted, rx.posted + rx.npending);

	ret = fi_accept(r.ep, NULL, 0);
	if (ret)
		die_fi("fi_accept", ret);
	wait_connected("fi_accept");

	/*
	 * The passive endpoint stays open until close_all (closing it right
	 * after accepting also works on tcp and sockets; keeping it is just
	 * simpler and matches the fabtests pattern).
	 */

	while (received < o.count) {
		flush_recv(&rx);
		n = cq_poll(comp, "recv");
		if (n == 0) {
			/*
			 * Every so often look at the EQ so a peer that goes
			 * away early does not leave us spinning until the
			 * watchdog fires.
			 */
			if (++idle % 4096 == 0 && !peer_gone) {
				ssize_t eret = fi_eq_read(r.eq, &ev, evbuf,
							  sizeof(evbuf), 0);
				if (eret == -FI_EAVAIL)
					die_eq_err("fi_eq_read");
				if (eret >= 0 && ev == FI_SHUTDOWN) {
					peer_gone = 1;
					gone_at = now_sec();
					idle = 0;
				}
			} else if (peer_gone && idle % 4096 == 0 &&
				   now_sec() - gone_at > 0.5) {
				/*
				 * sockets reports the shutdown while messages it
				 * accepted still wait for receives: keep
				 * receiving until 0.5 s pass without one.
				 */
				die("peer shut down after %" PRIu64
				    " of %" PRIu64 " messages",
				    received, o.count);
			}
			continue;
		}
		idle = 0;
		t1 = now_sec();
		if (peer_gone)
			gone_at = t1;
		if (received == 0)
			t0 = t1;
		for (j = 0; j < n; j++) {
			size_t slot = ctx_slot(comp[j].op_context);
			uint64_t k = rx.slot_seq[slot];

			if (!(comp[j].flags & FI_RECV))
				die("fi_cq_read: unexpected non-receive "
				    "completion");
			if (o.verify) {
				if (comp[j].len != o.size ||
				    memcmp(r.buf + slot * o.size,
					   r.pattern + k % PATTERN_MOD,
					   o.size) != 0)
					verify_errors++;
			} else if (comp[j].len != o.size) {
				verify_errors++;
			}
			done_step(++received);
			/* Repost this buffer right away. */
			want_recv(&rx, slot);
			flush_recv(&rx);
		}
	}
	free(rx.slot_seq);
	free(rx.pending);

	/*
	 * Wait (up to 5 s, not fatal) for the sender's FI_SHUTDOWN. Keep
	 * reading the CQ between short EQ waits: with the tcp provider a
	 * blocking fi_eq_sread alone can miss the disconnect (it is noticed
	 * by data progress, which fi_cq_read drives), and then the full
	 * timeout would expire.
	 */
	deadline = now_sec() + 5.0;
	while (!peer_gone && now_sec() < deadline) {
		ssize_t eret = fi_eq_sread(r.eq, &ev, evbuf, sizeof(evbuf), 10,
					   0);
		if (eret >= 0 && ev == FI_SHUTDOWN)
			break;
		if (eret == -FI_EAVAIL) {
			struct fi_eq_err_entry err;

			memset(&err, 0, sizeof(err));
			fi_eq_readerr(r.eq, &err, 0);
			break;
		}
		n = cq_poll(comp, "recv");
		(void)n;
	}

	close_all();
	print_json(received, o.count ? t1 - t0 : 0.0, verify_errors);
	return 0;
}

/* ---------------------------------------------------------------- rdm */

/*
 * fi_getinfo for an RDM endpoint. The receiver binds --listen (FI_SOURCE)
 * and asks for FI_SOURCE in caps, so that fi_cq_readfrom names the sender
 * of each message; a provider that cannot give it is taken without it
 * (r.has_source = 0) and the receiver's --verify checks less (see
 * verify_rdm). The sender resolves --connect: fi_getinfo's dest_addr is
 * the receiver's sockaddr, inserted into the AV by rdm_open. shm's names
 * are not HOST:PORT: its receiver gives --listen NAME as the node (shm
 * names the endpoint "fi_shm://NAME:UID:N", N counting the process's
 * endpoints), its sender asks for no address at all.
 */
static void rdm_get_info(void)
{
	const char *node = str_addr() ? (o.is_send ? NULL : o.addr) : o.host;
	const char *service = str_addr() ? NULL : o.port;
	uint64_t flags = o.is_send ? 0 : FI_SOURCE;
	int ret;

	if (!o.is_send) {
		r.hints = rdm_hints(o.provider, FI_MSG | FI_SOURCE);
		ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags,
				 r.hints, &r.info);
		if (ret == 0 && r.info) {
			r.has_source = 1;
			return;
		}
		if (ret != -FI_ENODATA)
			die_fi("fi_getinfo", ret);
		fprintf(stderr, "cpeer: note: provider %s has no FI_SOURCE: "
				"senders are not told apart\n",
			o.provider);
		fi_freeinfo(r.hints);
	}
	r.hints = rdm_hints(o.provider, FI_MSG);
	r.info = msg_getinfo(r.hints, node, service, flags);
}

/*
 * Open fabric, domain, CQ, AV and the RDM endpoint, enable it and register
 * the buffers. The AV is FI_AV_TABLE: a peer's fi_addr_t is its index in
 * the table (0, 1, ... in insertion order), a small integer a program can
 * keep in a table of its own, where FI_AV_MAP's values are opaque 64-bit
 * keys; every provider here offers both. What fi_cq_readfrom reports for
 * a sender the receiver did not insert differs by provider: see src_seq.
 */
static void rdm_open(void)
{
	struct fi_av_attr av_attr;
	int ret;

	rdm_get_info();
	ret = fi_fabric(r.info->fabric_attr, &r.fabric, NULL);
	if (ret)
		die_fi("fi_fabric", ret);
	open_domain_cq(r.info);

	memset(&av_attr, 0, sizeof(av_attr));
	av_attr.type = FI_AV_TABLE;
	av_attr.count = 64; /* a hint; the table grows */
	ret = fi_av_open(r.domain, &av_attr, &r.av, NULL);
	if (ret)
		die_fi("fi_av_open", ret);

	open_endpoint(r.info, &r.av->fid, "fi_ep_bind(av)");
}

/*
 * --rcvbuf B (rdm over udp): set SO_RCVBUF to B on the datagram socket of
 * this process bound to the endpoint's own address, the one the udp
 * provider under ofi_rxd reads (the kernel doubles B, bounded by
 * net.core.rmem_max). The provider offers no setting for it, so it is
 * found by its bound address among the process's file descriptors. An
 * experiment's knob (hack/rxd-stall.sh RCVBUF=): docs/providers.md says
 * what it changed.
 */
static void rdm_set_rcvbuf(void)
{
	struct sockaddr_storage own, ss;
	size_t len = sizeof(own);
	socklen_t sl, tl;
	int fd, type, v = (int)o.rcvbuf, found = 0, ret;

	if (!o.rcvbuf)
		return;
	memset(&own, 0, sizeof(own));
	ret = fi_getname(&r.ep->fid, &own, &len);
	if (ret)
		die_fi("fi_getname", ret);
	if (own.ss_family != AF_INET && own.ss_family != AF_INET6)
		die("--rcvbuf: the endpoint's address is not IP");
	for (fd = 0; fd < 1024; fd++) {
		tl = sizeof(type);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) ||
		    type != SOCK_DGRAM)
			continue;
		sl = sizeof(ss);
		memset(&ss, 0, sizeof(ss));
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) ||
		    sl > len || memcmp(&ss, &own, sl))
			continue;
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)))
			die("--rcvbuf: setsockopt: %s", strerror(errno));
		found++;
	}
	if (!found)
		die("--rcvbuf: no datagram socket bound to the endpoint's address");
}

/*
 * The endpoint's own address as a peer gives it to --connect: IP:PORT,
 * [IP6]:PORT, or shm's name. Read with fi_getname after fi_enable, so port
 * 0 shows the port that was bound.
 */
static void rdm_name(char *out, size_t outlen)
{
	char addr[256];
	size_t len = sizeof(addr);
	struct sockaddr *sa = (struct sockaddr *)addr;
	char ip[INET6_ADDRSTRLEN];
	int ret;

	memset(addr, 0, sizeof(addr));
	ret = fi_getname(&r.ep->fid, addr, &len);
	if (ret)
		die_fi("fi_getname", ret);
	if (len > sizeof(addr))
		die("fi_getname: address of %zu bytes", len);
	if (r.info->addr_format == FI_ADDR_STR) {
		addr[sizeof(addr) - 1] = '\0';
		snprintf(out, outlen, "%s", addr);
	} else if (sa->sa_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)addr;

		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
		snprintf(out, outlen, "%s:%u", ip, ntohs(sin->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)addr;

		inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
		snprintf(out, outlen, "[%s]:%u", ip, ntohs(sin6->sin6_port));
	} else {
		die("fi_getname: unsupported address format %u",
		    r.info->addr_format);
	}
}

/*
 * --inject: messages 0 .. N-2 go out with fi_inject from the one buffer
 * (the provider copies it during the call and writes no completion), and
 * message N-1 with fi_send and a completion. An inject can still wait in
 * the provider's queue when fi_inject returns, and fi_close discards that
 * queue (docs/providers.md), so a program that must not lose its last
 * messages ends with a send that completes: each provider here sends to
 * one peer in order (docs/providers.md, "Order and delivery"), so that
 * completion says the injects before it went out too. -FI_EAGAIN (the
 * provider's queue is full, or ofi_rxm is still connecting to dest) is
 * answered by reading the CQ, which drives progress, and the same call is
 * made again. Returns the number of messages sent; *t0 is when the first
 * was posted, *t1 when the last one's completion was read.
 *
 * --work-ns NS spins NS nanoseconds (reading CLOCK_MONOTONIC) after each
 * inject: the work of its own a sender does per message, so that what it
 * costs the rest of the path can be measured (hack/inject-segs.sh).
 */
static uint64_t inject_all(fi_addr_t dest, double *t0p, double *t1p)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	uint64_t k;
	ssize_t ret;
	int last = 0;

	*t0p = *t1p = 0;
	for (k = 0; k < o.count; k++) {
		last = k + 1 == o.count;
		if (o.verify)
			memcpy(r.buf, r.pattern + k % PATTERN_MOD, o.size);
		if (k == 0)
			*t0p = now_sec();
		do {
			ret = last ? fi_send(r.ep, r.buf, o.size, r.desc, dest,
					     &r.ctx[0])
				   : fi_inject(r.ep, r.buf, o.size, dest);
			if (ret == -FI_EAGAIN)
				(void)cq_poll(comp, "send");
		} while (ret == -FI_EAGAIN);
		if (ret)
			die_fi(last ? "fi_send" : "fi_inject", ret);
		done_step(last ? k : k + 1); /* taken; the last once it completes */
		n_posted = k + 1;
		if (o.work_ns) {
			double until = now_sec() + o.work_ns * 1e-9;

			while (now_sec() < until)
				;
		}
	}
	if (!last)
		return 0;
	/* Nothing but the last message has a completion. */
	while (cq_poll(comp, "send") == 0)
		;
	ctx_slot(comp[0].op_context);
	*t1p = now_sec();
	done_step(o.count);
	return o.count;
}

static int run_rdm_send(void)
{
	uint64_t completed;
	double t0, t1;
	int ret;

	rdm_open();
	rdm_set_rcvbuf();
	if (o.inject && o.size > r.info->tx_attr->inject_size)
		die("--inject: --size %zu is above provider %s's inject size"
		    " %zu",
		    o.size, o.provider, r.info->tx_attr->inject_size);
	/* shm: the name as the receiver printed it, a C string. */
	ret = fi_av_insert(r.av, str_addr() ? (const void *)o.addr
					    : r.info->dest_addr,
			   1, &r.peer, 0, NULL);
	if (ret != 1)
		die("fi_av_insert(%s): %s", o.addr,
		    ret < 0 ? fi_strerror(-ret) : "address not inserted");
	r.av_inserted++;

	completed = o.inject ? inject_all(r.peer, &t0, &t1)
			     : send_all(r.peer, &t0, &t1);

	/*
	 * Every send completed (with --inject: the last message, and so the
	 * injects before it), so the provider is done with our buffers
	 * (and, on ofi_rxm eager sends, the bytes are in the kernel's socket
	 * buffer; on ofi_rxd the receiver acknowledged them; on shm they are
	 * in the receiver's region). Closing now loses nothing on these
	 * providers.
	 */
	close_all();
	print_json(completed, o.count ? t1 - t0 : 0.0, 0);
	return 0;
}

/*
 * Per-sender message counts for --verify: byte i of message k from one
 * sender is (k + i) % 251, so the receiver needs each sender's k. Senders
 * are told apart by fi_cq_readfrom's source address; a few, so a linear
 * table is enough.
 *
 * A source counts only if it names an address this program inserted: with
 * FI_AV_TABLE and no removals those are the indices 0 .. r.av_inserted-1.
 * libfabric 1.17 needs that check: its common CQ code keeps one source
 * slot per CQ entry and does not clear it when a provider writes an entry
 * without a source, so fi_cq_readfrom returns whatever the slot held, 0 at
 * first. Measured here: shm reports 0 for every sender that is not in the
 * receiver's AV, ofi_rxd reports 0 for every sender (it never writes a
 * source), while ofi_rxm and sockets say FI_ADDR_NOTAVAIL. 0 is a valid
 * FI_AV_TABLE index, and asking the provider does not help (fi_av_lookup
 * of an index shm never handed out crashes in 1.17), so the program's own
 * count of insertions decides. cpeer's receiver inserts no one, so on
 * these four providers every message takes the unnamed path of verify_rdm.
 */
struct src_seq {
	fi_addr_t addr;
	int known;     /* addr is in the AV */
	uint64_t next; /* k of the next message from addr */
};

static struct src_seq *srcs;
static size_t nsrcs, capsrcs;

/* The table entry of src, made on first sight. */
static struct src_seq *src_entry(fi_addr_t src)
{
	size_t i;

	for (i = 0; i < nsrcs; i++)
		if (srcs[i].addr == src)
			return &srcs[i];
	if (nsrcs == capsrcs) {
		capsrcs = capsrcs ? 2 * capsrcs : 16;
		srcs = realloc(srcs, capsrcs * sizeof(*srcs));
		if (!srcs)
			die("realloc: out of memory");
	}
	srcs[nsrcs].addr = src;
	srcs[nsrcs].known = src < r.av_inserted;
	srcs[nsrcs].next = 0;
	return &srcs[nsrcs++];
}

/*
 * Whether a message of len bytes from src is right. From a known source it
 * must be that sender's next message k exactly (each sender's messages
 * arrive in the order it sent them: every RDM provider here has
 * FI_ORDER_SAS). Without one (no FI_SOURCE, FI_ADDR_NOTAVAIL, or an
 * address not in the AV) messages of several senders cannot be told
 * apart, so the check is only that it is some pattern message:
 * byte[i] == (byte[0] + i) % 251. *unnamed counts those.
 */
static int verify_rdm(const char *b, size_t len, fi_addr_t src,
		      uint64_t *unnamed)
{
	struct src_seq *e = NULL;
	unsigned first;

	if (src != FI_ADDR_NOTAVAIL) {
		e = src_entry(src);
		if (!e->known)
			e = NULL;
	}
	if (!e)
		++*unnamed;
	if (len != o.size)
		return 0;
	if (!o.verify || len == 0)
		return 1;
	if (e)
		return !memcmp(b, r.pattern + e->next++ % PATTERN_MOD, len);
	first = (unsigned char)b[0];
	return first < PATTERN_MOD && !memcmp(b, r.pattern + first, len);
}

/* How many table entries are senders in the AV. */
static size_t known_srcs(void)
{
	size_t i, n = 0;

	for (i = 0; i < nsrcs; i++)
		n += srcs[i].known;
	return n;
}

/*
 * Receive N messages in all, from any number of senders, into W posted
 * buffers, each posted again as soon as its message is read. An RDM
 * receiver is never told that a sender is gone: it stops after N messages
 * or when the watchdog fires.
 */
static int run_rdm_recv(void)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	fi_addr_t src[CQ_BATCH];
	char name[300];
	struct rxstate rx;
	uint64_t received = 0, verify_errors = 0, unnamed = 0;
	double t0 = 0, t1 = 0;
	size_t i;
	int n, j;

	rdm_open();
	rdm_set_rcvbuf();

	memset(&rx, 0, sizeof(rx));
	rx.slot_seq = calloc(o.window, sizeof(*rx.slot_seq));
	rx.pending = calloc(o.window, sizeof(*rx.pending));
	if (!rx.slot_seq || !rx.pending)
		die("calloc: out of memory");
	for (i = o.window; i-- > 0;)
		want_recv(&rx, i);
	flush_recv(&rx);

	/* Receives are posted: a sender may start now. */
	rdm_name(name, sizeof(name));
	printf("LISTENING %s\n", name);
	fflush(stdout);
	fprintf(stderr, "cpeer: listening on %s\n", name);

	while (received < o.count) {
		flush_recv(&rx);
		n = cq_poll_from(comp, r.has_source ? src : NULL, "recv");
		if (n == 0)
			continue;
		t1 = now_sec();
		if (received == 0)
			t0 = t1;
		for (j = 0; j < n; j++) {
			size_t slot = ctx_slot(comp[j].op_context);
			fi_addr_t from = r.has_source ? src[j]
						      : FI_ADDR_NOTAVAIL;

			if (!(comp[j].flags & FI_RECV))
				die("fi_cq_read: unexpected non-receive "
				    "completion");
			if (!verify_rdm(r.buf + slot * o.size, comp[j].len,
					from, &unnamed))
				verify_errors++;
			done_step(++received);
			want_recv(&rx, slot);
			flush_recv(&rx);
		}
	}
	free(rx.slot_seq);
	free(rx.pending);
	if (o.verify && unnamed)
		fprintf(stderr,
			"cpeer: note: %" PRIu64 " of %" PRIu64 " messages "
			"came without a source in the AV; they were checked "
			"only for being some pattern message\n",
			unnamed, received);
	if (o.verify && known_srcs())
		fprintf(stderr, "cpeer: %zu sender(s) told apart\n",
			known_srcs());
	free(srcs);

	close_all();
	print_json(received, o.count ? t1 - t0 : 0.0, verify_errors);
	return 0;
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	watchdog_count(o.is_send ? "completed" : "received", &n_done);
	if (o.is_send)
		watchdog_count("posted", &n_posted);
	watchdog_idle(&last_done_ms);
	watchdog(o.timeout, "cpeer: watchdog timeout expired, exiting\n");
	watchdog_on_interrupt();

	if (o.rdm)
		return o.is_send ? run_rdm_send() : run_rdm_recv();
	return o.is_send ? run_send() : run_recv();
}
