/*
 * hostile: a plain libfabric FI_EP_MSG peer that misbehaves, for the
 * hostile-peer tests in this directory.
 *
 *   hostile oversize --provider P --connect HOST:PORT --size S --count N
 *                    [--linger MS] [--timeout SEC]
 *       connect, send N messages of S bytes (larger than the receiver's
 *       posted buffers), wait for their completions, linger, close.
 *   hostile garbage  --provider P --connect HOST:PORT --file F
 *                    [--linger MS] [--timeout SEC]
 *       connect and send every record of F as one message, in order:
 *       F is a sequence of records, a 32-bit little-endian length and that
 *       many bytes. Then wait for the completions, linger, close.
 *   hostile flood    --provider P --connect HOST:PORT --count N
 *                    --then close|hold [--hold MS] [--timeout SEC]
 *       open N endpoints and request N connections at once. "close"
 *       closes each endpoint right after its request, without waiting
 *       for an answer; "hold" waits for every answer, holds the
 *       connections for --hold ms without sending, then exits without
 *       closing anything (the kernel closes the sockets).
 *   hostile idle     --provider P --connect HOST:PORT --hold MS
 *                    [--timeout SEC]
 *       connect, never send, keep the connection for --hold ms, close.
 *
 * It reads its event and completion queues all the time (tcp makes
 * progress only then) and never calls fi_shutdown (followed by fi_close
 * it corrupts the heap of the sockets provider in libfabric 1.17).
 *
 * Build (tests/cpeer/fiutil.h comes in by its relative path, no -I):
 *   cc -O2 -Wall -Wextra -o hostile tests/hostile/peer/hostile.c \
 *       $(pkg-config --cflags --libs libfabric)
 *
 * The last line on stdout is a JSON object:
 *   {"mode":"M","requests":R,"connected":C,"refused":F,"shutdown":S,
 *    "sent":N,"completed":K,"failed":E}
 * Exit status: 0 when the mode ran to its end, 1 on a setup or usage
 * error, 2 when the watchdog (--timeout, default 60 s) fired.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define FIUTIL_PROG "hostile"
#include "../../cpeer/fiutil.h"

#define CQ_BATCH 64
#define WINDOW 8 /* sends in flight: at most the receiver's posted buffers */
#define MAX_ENDPOINTS 4096
#define EQ_ENTRY_BYTES (sizeof(struct fi_eq_cm_entry) + 512)

enum mode { OVERSIZE, GARBAGE, FLOOD, IDLE };
static const char *const mode_names[] = {"oversize", "garbage", "flood", "idle"};

static struct {
	enum mode mode;
	const char *provider;
	char host[256];
	char port[32];
	size_t size;
	uint64_t count;
	const char *file;
	int hold_after; /* flood: --then hold */
	long hold_ms;
	long linger_ms;
	unsigned timeout;
} o;

/* Per-endpoint state; an endpoint's fid context points at its entry. */
struct conn {
	struct fid_ep *ep;
	int state; /* 0 requested, 1 connected, 2 refused or shut down */
};

static struct {
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_mr *mr;
	char *buf;
	void *desc;
	struct conn *conns;
	size_t nconns;
	struct fi_context ctx[WINDOW];
} r;

static struct {
	uint64_t connected, refused, shutdown, sent, completed, failed;
} stats;

/* ---------------------------------------------------------------- utils */

static void usage(void)
{
	fprintf(stderr,
		"usage:\n"
		"  hostile oversize --provider P --connect HOST:PORT --size S"
		" --count N [--linger MS] [--timeout SEC]\n"
		"  hostile garbage  --provider P --connect HOST:PORT --file F"
		" [--linger MS] [--timeout SEC]\n"
		"  hostile flood    --provider P --connect HOST:PORT --count N"
		" --then close|hold [--hold MS] [--timeout SEC]\n"
		"  hostile idle     --provider P --connect HOST:PORT --hold MS"
		" [--timeout SEC]\n");
	exit(1);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void parse_args(int argc, char **argv)
{
	int i, have_addr = 0;
	size_t m;

	if (argc < 2)
		usage();
	for (m = 0; m < sizeof(mode_names) / sizeof(mode_names[0]); m++)
		if (!strcmp(argv[1], mode_names[m]))
			break;
	if (m == sizeof(mode_names) / sizeof(mode_names[0]))
		usage();
	o.mode = (enum mode)m;
	o.timeout = 60;
	o.hold_ms = -1;

	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (!v)
			die("%s: missing value", a);
		i++;
		if (!strcmp(a, "--provider"))
			o.provider = v;
		else if (!strcmp(a, "--connect")) {
			parse_hostport(a, v, o.host, sizeof(o.host), o.port,
				       sizeof(o.port));
			have_addr = 1;
		} else if (!strcmp(a, "--size"))
			o.size = (size_t)parse_u64(a, v);
		else if (!strcmp(a, "--count"))
			o.count = parse_u64(a, v);
		else if (!strcmp(a, "--file"))
			o.file = v;
		else if (!strcmp(a, "--then")) {
			if (strcmp(v, "close") && strcmp(v, "hold"))
				die("--then: close or hold, not '%s'", v);
			o.hold_after = !strcmp(v, "hold");
		} else if (!strcmp(a, "--hold"))
			o.hold_ms = (long)parse_u64(a, v);
		else if (!strcmp(a, "--linger"))
			o.linger_ms = (long)parse_u64(a, v);
		else if (!strcmp(a, "--timeout"))
			o.timeout = (unsigned)parse_u64(a, v);
		else
			die("unknown flag '%s'", a);
	}
	if (!o.provider || !have_addr)
		usage();
	switch (o.mode) {
	case OVERSIZE:
		if (!o.size || !o.count)
			die("oversize needs --size and --count");
		break;
	case GARBAGE:
		if (!o.file)
			die("garbage needs --file");
		break;
	case FLOOD:
		if (!o.count || o.count > MAX_ENDPOINTS)
			die("flood needs --count in 1..%d", MAX_ENDPOINTS);
		if (o.hold_ms < 0)
			o.hold_ms = 0;
		break;
	case IDLE:
		if (o.hold_ms < 0)
			die("idle needs --hold");
		break;
	}
}

/* ------------------------------------------------------------- fabric */

static void open_fabric(void)
{
	struct fi_eq_attr eq_attr;
	struct fi_cq_attr cq_attr;
	int ret;

	r.hints = msg_hints(o.provider);
	r.info = msg_getinfo(r.hints, o.host, o.port, 0);

	ret = fi_fabric(r.info->fabric_attr, &r.fabric, NULL);
	if (ret)
		die_fi("fi_fabric", ret);
	memset(&eq_attr, 0, sizeof(eq_attr));
	eq_attr.wait_obj = FI_WAIT_NONE;
	ret = fi_eq_open(r.fabric, &eq_attr, &r.eq, NULL);
	if (ret)
		die_fi("fi_eq_open", ret);
	ret = fi_domain(r.fabric, r.info, &r.domain, NULL);
	if (ret)
		die_fi("fi_domain", ret);
	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.format = FI_CQ_FORMAT_MSG;
	cq_attr.wait_obj = FI_WAIT_NONE;
	cq_attr.size = 1024;
	ret = fi_cq_open(r.domain, &cq_attr, &r.cq, NULL);
	if (ret)
		die_fi("fi_cq_open", ret);
}

/* Register one send buffer of size bytes, WINDOW slots of slot bytes. */
static void open_buffer(size_t slot)
{
	size_t len = slot * WINDOW;
	int ret;

	if (posix_memalign((void **)&r.buf, 4096, len))
		die("posix_memalign: out of memory");
	memset(r.buf, 0xA5, len); /* never a netio-go stream header */
	ret = fi_mr_reg(r.domain, r.buf, len, FI_SEND, 0, 0, 0, &r.mr, NULL);
	if (ret)
		die_fi("fi_mr_reg", ret);
	r.desc = fi_mr_desc(r.mr);
}

/* Open an endpoint and request a connection; its state goes in c. */
static void request(struct conn *c)
{
	int ret;

	ret = fi_endpoint(r.domain, r.info, &c->ep, c);
	if (ret)
		die_fi("fi_endpoint", ret);
	ret = fi_ep_bind(c->ep, &r.eq->fid, 0);
	if (ret)
		die_fi("fi_ep_bind(eq)", ret);
	ret = fi_ep_bind(c->ep, &r.cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		die_fi("fi_ep_bind(cq)", ret);
	ret = fi_enable(c->ep);
	if (ret)
		die_fi("fi_enable", ret);
	ret = fi_connect(c->ep, r.info->dest_addr, NULL, 0);
	if (ret)
		die_fi("fi_connect", ret);
}

/* Read every pending event and account for it. */
static void poll_eq(void)
{
	char buf[EQ_ENTRY_BYTES];
	struct fi_eq_cm_entry *e = (struct fi_eq_cm_entry *)buf;
	struct fi_eq_err_entry err;
	struct conn *c;
	uint32_t ev;
	ssize_t ret;

	for (;;) {
		ret = fi_eq_read(r.eq, &ev, buf, sizeof(buf), 0);
		if (ret == -FI_EAGAIN)
			return;
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_eq_readerr(r.eq, &err, 0) < 0)
				return;
			c = err.fid ? err.fid->context : NULL;
			if (c && c->state == 0)
				stats.refused++;
			else if (c && c->state == 1)
				stats.shutdown++;
			if (c)
				c->state = 2;
			continue;
		}
		if (ret < 0)
			die_fi("fi_eq_read", ret);
		c = e->fid ? e->fid->context : NULL;
		if (!c)
			continue;
		if (ev == FI_CONNECTED && c->state == 0) {
			c->state = 1;
			stats.connected++;
		} else if (ev == FI_SHUTDOWN && c->state != 2) {
			c->state = 2;
			stats.shutdown++;
		}
	}
}

/* Reap send completions; returns how many slots came back. */
static int poll_cq(void)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	struct fi_cq_err_entry err;
	ssize_t n;

	n = fi_cq_read(r.cq, comp, CQ_BATCH);
	if (n > 0) {
		stats.completed += (uint64_t)n;
		return (int)n;
	}
	if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(r.cq, &err, 0) < 0)
			return 0;
		stats.failed++;
		return 1;
	}
	if (n != -FI_EAGAIN)
		die_fi("fi_cq_read", n);
	return 0;
}

/* Read both queues until ms have passed, or until stop() holds. */
static void progress_for(double ms, int (*stop)(void))
{
	struct timespec pause = {0, 200000}; /* 0.2 ms between idle reads */
	double end = now_ms() + ms;

	while (now_ms() < end && !(stop && stop())) {
		poll_eq();
		if (!poll_cq())
			nanosleep(&pause, NULL);
	}
}

static int answered_all(void)
{
	size_t i;

	for (i = 0; i < r.nconns; i++)
		if (r.conns[i].state == 0)
			return 0;
	return 1;
}

static int all_completed(void)
{
	return stats.completed + stats.failed >= stats.sent ||
	       r.conns[0].state == 2;
}

/* Connect one endpoint and wait for the answer. */
static struct conn *connect_one(void)
{
	r.conns = calloc(1, sizeof(*r.conns));
	if (!r.conns)
		die("calloc: out of memory");
	r.nconns = 1;
	request(&r.conns[0]);
	progress_for(1e9, answered_all);
	if (r.conns[0].state != 1)
		die("connection refused");
	return &r.conns[0];
}

/*
 * Send len bytes from buffer slot; on a full queue drive progress and
 * retry. Returns 0 once posted, -1 when the connection ended.
 */
static int send_slot(struct conn *c, size_t slot, size_t slot_len, size_t len)
{
	ssize_t ret;

	for (;;) {
		if (c->state == 2)
			return -1;
		ret = fi_send(c->ep, r.buf + slot * slot_len, len, r.desc, 0,
			      &r.ctx[slot]);
		if (ret == 0) {
			stats.sent++;
			return 0;
		}
		if (ret != -FI_EAGAIN)
			return -1; /* the receiver dropped us: that is allowed */
		poll_eq();
		poll_cq();
	}
}

/* Keep at most WINDOW sends in flight: wait for a slot when full. */
static void wait_window(void)
{
	while (stats.sent - stats.completed - stats.failed >= WINDOW &&
	       r.conns[0].state != 2) {
		poll_eq();
		poll_cq();
	}
}

/* Wait for every completion, linger, then close the connection. */
static void finish_sends(struct conn *c)
{
	progress_for(1e9, all_completed);
	progress_for((double)o.linger_ms, NULL);
	close_fid("fi_close(ep)", &c->ep->fid);
	c->ep = NULL;
}

/* -------------------------------------------------------------- modes */

static void run_oversize(void)
{
	struct conn *c;
	uint64_t i;

	open_buffer(o.size);
	c = connect_one();
	for (i = 0; i < o.count; i++) {
		wait_window();
		if (send_slot(c, i % WINDOW, o.size, o.size))
			break;
	}
	finish_sends(c);
}

/* Reads the next record of f into the slot; returns its length or -1. */
static long read_record(FILE *f, char *dst, size_t cap)
{
	unsigned char h[4];
	size_t len;

	if (fread(h, 1, 4, f) != 4)
		return -1;
	len = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 |
	      (size_t)h[3] << 24;
	if (len > cap)
		die("%s: record of %zu bytes, more than %zu", o.file, len, cap);
	if (fread(dst, 1, len, f) != len)
		die("%s: truncated record", o.file);
	return (long)len;
}

/* The largest record of f: every slot must hold it. */
static size_t largest_record(FILE *f)
{
	unsigned char h[4];
	size_t len, max = 1;

	while (fread(h, 1, 4, f) == 4) {
		len = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 |
		      (size_t)h[3] << 24;
		if (len > max)
			max = len;
		if (fseek(f, (long)len, SEEK_CUR))
			die("%s: truncated record", o.file);
	}
	rewind(f);
	return max;
}

static void run_garbage(void)
{
	struct conn *c;
	size_t slot_len;
	uint64_t i;
	long len;
	FILE *f;

	f = fopen(o.file, "rb");
	if (!f)
		die("%s: %s", o.file, strerror(errno));
	slot_len = largest_record(f);
	open_buffer(slot_len);
	c = connect_one();
	for (i = 0;; i++) {
		wait_window();
		len = read_record(f, r.buf + (i % WINDOW) * slot_len, slot_len);
		if (len < 0)
			break;
		if (send_slot(c, i % WINDOW, slot_len, (size_t)len))
			break;
	}
	fclose(f);
	finish_sends(c);
}

static void run_flood(void)
{
	size_t i;

	r.conns = calloc(o.count, sizeof(*r.conns));
	if (!r.conns)
		die("calloc: out of memory");
	r.nconns = o.count;
	for (i = 0; i < r.nconns; i++) {
		request(&r.conns[i]);
		if (!o.hold_after) {
			close_fid("fi_close(ep)", &r.conns[i].ep->fid);
			r.conns[i].ep = NULL;
			r.conns[i].state = 2;
		}
	}
	if (!o.hold_after)
		return;
	progress_for(1e9, answered_all);
	progress_for((double)o.hold_ms, NULL);
}

static void run_idle(void)
{
	struct conn *c = connect_one();

	progress_for((double)o.hold_ms, NULL);
	if (c->ep)
		close_fid("fi_close(ep)", &c->ep->fid);
	c->ep = NULL;
}

static void print_json(void)
{
	printf("{\"mode\":\"%s\",\"requests\":%zu,\"connected\":%" PRIu64
	       ",\"refused\":%" PRIu64 ",\"shutdown\":%" PRIu64
	       ",\"sent\":%" PRIu64 ",\"completed\":%" PRIu64
	       ",\"failed\":%" PRIu64 "}\n",
	       mode_names[o.mode], r.nconns, stats.connected, stats.refused,
	       stats.shutdown, stats.sent, stats.completed, stats.failed);
	fflush(stdout);
}

/* Close what is left, except after a flood that holds: it abandons. */
static void close_all(void)
{
	size_t i;

	if (o.mode == FLOOD && o.hold_after)
		return;
	for (i = 0; i < r.nconns; i++)
		close_fid("fi_close(ep)", r.conns[i].ep ? &r.conns[i].ep->fid : NULL);
	close_fid("fi_close(mr)", r.mr ? &r.mr->fid : NULL);
	close_fid("fi_close(cq)", &r.cq->fid);
	close_fid("fi_close(domain)", &r.domain->fid);
	close_fid("fi_close(eq)", &r.eq->fid);
	close_fid("fi_close(fabric)", &r.fabric->fid);
	fi_freeinfo(r.info);
	fi_freeinfo(r.hints);
	free(r.buf);
	free(r.conns);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	watchdog(o.timeout, "hostile: watchdog timeout expired\n");

	open_fabric();
	switch (o.mode) {
	case OVERSIZE:
		run_oversize();
		break;
	case GARBAGE:
		run_garbage();
		break;
	case FLOOD:
		run_flood();
		break;
	case IDLE:
		run_idle();
		break;
	}
	print_json();
	close_all();
	return 0;
}
