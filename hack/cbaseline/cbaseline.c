/*
 * cbaseline: the C side of hack/bench-compare. A plain libfabric program
 * (FI_EP_MSG, no netio code) that measures what C gets from a provider on
 * 127.0.0.1, in the shape of netio-perf's loopback sweep so that the two
 * compare libraries, not set-ups: one process, one fabric and one domain
 * (FI_THREAD_SAFE, as netio-go asks for), a server thread and a client
 * thread, each with its own endpoints and completion queue, each spinning
 * on fi_cq_read.
 *
 *   cbaseline bw       --provider P --size S [--window W] [--rx-depth R]
 *                      [--seconds T] [--max-count N] [--yield] [--noise-us N]
 *                      [--one-buffer] [--batch] [--timeout SEC]
 *   cbaseline pingpong --provider P --size S [--seconds T] [--max-count N]
 *                      [--yield] [--noise-us N] [--timeout SEC]
 *   cbaseline inject   --provider P --size S [--rx-depth R] [--seconds T]
 *                      [--max-count N] [--yield] [--noise-us N]
 *                      [--timeout SEC]
 *   cbaseline memcpy   --size S [--window W] [--rx-depth R] [--seconds T]
 *                      [--max-count N] [--cma] [--thp src|dst|both]
 *                      [--timeout SEC]
 *
 * bw and pingpong take --endpoint msg|rdm (default msg, all of the above);
 * inject is always rdm. With rdm, --source asks for FI_SOURCE and reads
 * the queue with fi_cq_readfrom, as netio-go's connectionless endpoint
 * does to name each receive's sender: the C program of the same shape.
 *
 * Two processes (bw and pingpong, msg endpoints): with --listen HOST:PORT
 * the program is the server side only, with --connect HOST:PORT the client
 * side only, each the same loop as in one process; both need the same
 * --max-count (messages, or timed round trips), which ends the run instead
 * of --seconds. The server prints "LISTENING ip:port" (port 0: the bound
 * one) as its first line. bw: the client sends, waits for its completions
 * and closes (on tcp a send completes once the socket has its bytes); the
 * server times from its first receive to its last and prints
 * "role":"server". pingpong: the client connects; the server echoes
 * WARMUP + N pings on the same connection and closes. Both
 * print their JSON line with "role"; the client's pingpong line adds
 * "latency_mean_us".
 *
 * bw: the client keeps up to W sends of S bytes outstanding (default 64),
 * the server keeps R receives posted (default 2W) and posts each buffer again
 * as soon as its completion is read. The client stops posting after T
 * seconds (default 1) or N messages (default: netio-perf's budget, 4 Mi
 * messages or 8 GiB); the time runs from the first send to the last
 * receive. CPU is getrusage(RUSAGE_SELF) user+sys over the same span, both
 * threads.
 *
 * pingpong: one connection both ways, as fi_msg_pingpong and netio-perf's
 * ping-pong (endpoint.DialReplies / ListenReplies) have it: the client sends
 * S bytes, the server echoes them from its own buffer on the same
 * connection, the client times the round trip and sends the next. (Over one
 * connection TCP carries the acknowledgement of a ping in its pong; the two
 * connections, one each way, this program and netio-perf used before most
 * messages get an acknowledgement packet of their own: 3.5 TCP segments per
 * round trip instead of 2, see docs/performance.md.)
 * The first 10 round trips are left out; one-way latency is half the round
 * trip (p50 and p99). A round trip is timed from the previous pong's
 * completion to this pong's (the first from just before its ping), as
 * netio-perf's ping-pong times it: one clock read per round trip, and the
 * client's repost of its receive buffer (made before the next ping) inside
 * the span. Timed from just before each ping, as up to 2026-11-26, the span
 * left that repost and a clock read out: 0.025-0.05 us less one-way on shm
 * (docs/performance.md, "shm 64 B latency: the same span on both sides").
 * Ends after T seconds (but not before 10 timed round trips) or N timed
 * round trips (default 100000).
 *
 * --endpoint rdm: the same two threads on FI_EP_RDM endpoints (FI_MSG, an
 * FI_AV_TABLE address vector each, no event queue) instead of
 * connections. The server's endpoint binds 127.0.0.1 port 0 (shm: a name
 * of the provider's choosing), the client's too, and each inserts the
 * other's fi_getname address into its AV, as netio-go's connectionless
 * endpoint does with a peer. bw sends from the client to the server; before
 * the clock starts one message goes through, so that ofi_rxm's connection
 * (made on the first send, -FI_EAGAIN until the CQ is read) is not timed.
 * pingpong needs one endpoint a side, not two: an RDM endpoint sends and
 * receives, and netio-go's connectionless endpoint does both.
 *
 * inject (RDM): the client fi_injects S bytes (at most the provider's
 * inject_size) to the server as fast as the provider takes them, reading
 * its CQ only to drive progress when it says -FI_EAGAIN (an inject has no
 * completion); the server keeps R receives posted (default 128) as in bw.
 * msgs_per_s counts the messages the server received, from the first
 * inject to the last receive.
 *
 * memcpy (no libfabric): memcpy of S bytes from W source slots into R
 * destination slots in turn (the memory bw's transfer touches), in one
 * thread, for T seconds or N copies; what shm's copy between two processes
 * is compared with.
 *
 * memcpy --cma makes the same copies with process_vm_readv(2) from a child
 * process that holds the source slots (its own pages, written after the
 * fork), one call per copy: the kernel copy shm's CMA protocol makes for
 * a message above its inject size, without libfabric, so the ceiling that
 * protocol can reach on the machine ("mode":"memcpy","cma":true).
 *
 * memcpy --thp src|dst|both asks for transparent huge pages
 * (MADV_HUGEPAGE, 2 MiB-aligned slots) on the source slots, the
 * destination slots or both, before they are touched; without it both are
 * ordinary 4 KiB pages, as glibc's malloc gives them. The JSON line then
 * carries "thp":"src" (or dst, both). With --cma the child, which inherits
 * the advice, drops the parent's source pages and faults in huge pages of
 * its own (written after the fork, the parent's would be split and copied
 * 4 KiB at a time). shm's copy pins the sender's pages, so huge pages on
 * the source side are what it gains most from (docs/performance.md).
 *
 * --noise-us N starts a third thread that sleeps N microseconds in a loop,
 * doing nothing else: the wake-ups the Go runtime's monitor thread makes
 * (every 20 us while goroutines sit in long cgo calls), so that what they
 * cost a C program can be measured (bw --size 1048576 --noise-us 20).
 *
 * --one-buffer (bw) sends every message from one buffer and receives every
 * message into one, as fabtests' fi_msg_bw does: the working set is S bytes
 * a side instead of W (or R) times S. The received bytes are overwritten
 * while they arrive, so it measures the transport, never a use of the data
 * (hack/footprint-ab.sh compares the two).
 *
 * --batch (bw) moves the window in fi_msg_bw's rhythm: the client posts a
 * whole window of sends, then waits until every one of them completed; the
 * server reposts its receives only once all of them completed. Without it
 * the client posts again as soon as a send completes and the server
 * reposts each receive at once.
 *
 * --yield calls sched_yield() after an empty fi_cq_read, which the sockets
 * provider's progress thread needs on a machine with few cores.
 *
 * The output is one JSON line whose field names match netio-perf's sweep
 * rows (MB = 10^6 bytes, GB = 10^9 bytes):
 *   bw:       {"mode":"bw","provider":P,"size":S,"window":W,"rx_bufs":R,
 *              "messages":N,"bytes":B,"seconds":T,"mb_per_s":X,
 *              "msgs_per_s":Y,"cpu_seconds":C,"cpu_s_per_gb":G}
 *   pingpong: {"mode":"pingpong","provider":P,"size":S,"round_trips":N,
 *              "latency_p50_us":A,"latency_p99_us":B}
 * With --endpoint rdm both carry "endpoint":"rdm" after the provider (and
 * "source":true with --source); with
 * --one-buffer bw's lines carry "one_buffer":true, with --batch
 * "batch":true.
 * inject and memcpy print bw's fields, with "mode":"inject" (plus
 * "endpoint":"rdm" and the provider's "inject_size"; window is 0) and
 * "mode":"memcpy" (provider "none", messages = copies).
 *
 * Exit status: 0 on success, 1 on an error (said on stderr); the --timeout
 * watchdog (default 60 s, 0: none) ends the process with SIGALRM.
 *
 * Build (tests/cpeer/fiutil.h comes in by its relative path, no -I):
 *   cc -O2 -Wall -Wextra -pthread -o bin/cbaseline hack/cbaseline/cbaseline.c \
 *       $(pkg-config --cflags --libs libfabric)
 */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* process_vm_readv (memcpy --cma) */

#include <arpa/inet.h>
#include <err.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define FIUTIL_PROG "cbaseline"
#include "../../tests/cpeer/fiutil.h"

#define CQ_BATCH 64
#define WARMUP 10
#define MIN_TIMED 10 /* round trips timed at least, however long they take */
#define EQ_ENTRY_BYTES (sizeof(struct fi_eq_cm_entry) + 512)
#define EQ_WAIT_MS 100
#define TIME_CHECK_EVERY 64 /* sends between two looks at the clock */
#define MAX_DEPTH 4096

/* Ping-pong buffer slots of each side. */
#define PP_SEND_SLOT 0
#define PP_RECV_SLOT 1

/*
 * Exit with the call's text and libfabric's message when a call that
 * returns 0 or a negative fi_errno fails.
 */
#define TRY(call)                                       \
	do {                                            \
		long try_ret_ = (long)(call);           \
		if (try_ret_)                           \
			die_fi(#call, try_ret_);        \
	} while (0)

enum mode { MODE_BW, MODE_PINGPONG, MODE_INJECT, MODE_MEMCPY };

struct opts {
	int pingpong;
	enum mode mode;
	int rdm; /* FI_EP_RDM endpoints */
	int source; /* rdm: FI_SOURCE, and fi_cq_readfrom */
	const char *provider;
	size_t size;
	size_t window;   /* bw: sends outstanding at most */
	size_t rx_depth; /* bw: receives kept posted */
	double seconds;
	uint64_t max_count;
	int yield;
	int one_buffer; /* bw: every slot's bytes at the region's start */
	int batch;      /* bw: whole windows, as fi_msg_bw moves them */
	int cma;        /* memcpy: process_vm_readv from a child process */
	const char *thp; /* memcpy: MADV_HUGEPAGE on "src", "dst" or "both" */
	unsigned noise_us; /* 0: no noise thread */
	unsigned timeout;
	const char *listen;  /* two processes: the server side, on HOST:PORT */
	const char *connect; /* two processes: the client side, to HOST:PORT */
};

/*
 * One side of a connection: its endpoint and queues, and one registered
 * region of nslots buffers of o.size bytes, slot i completing with context
 * &ctx[i]. Receive slots wait in pending while the receive queue is full.
 * A side with shares_cq uses another side's completion queue.
 */
struct side {
	const char *name;
	struct fi_info *info;
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_av *av;  /* rdm */
	fi_addr_t dest;     /* rdm: the other side in av; msg: 0 */
	struct fid_mr *mr;
	char *buf;
	void *desc;
	struct fi_context *ctx;
	size_t nslots;
	size_t *pending;
	size_t npending;
	int shares_cq;
};

static struct opts o;

/* Whether this process is one side of two (--listen or --connect). */
static int two_proc(void)
{
	return o.listen || o.connect;
}
static struct fi_info *hints, *pep_info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *pep_eq;
static struct fid_pep *pep;
static struct side srv = {.name = "server"}, cli = {.name = "client"};
static pthread_barrier_t start_line;

/*
 * Shared by the threads. The client publishes how many messages it sent,
 * then sets client_done; the server's results are read after pthread_join.
 */
static _Atomic uint64_t total_sent;
static atomic_int client_done;
static atomic_int server_done; /* inject: the client drives progress until */
static uint64_t server_received;
static double last_receive;
/* two processes: the server's first receive (time, CPU) and its echoes */
static double first_receive, first_receive_cpu;
static uint64_t server_echoed;

/* ---------------------------------------------------------------- utils */

static void usage(void)
{
	fprintf(stderr,
		"usage:\n"
		"  cbaseline bw       --provider P --size S [--window W] "
		"[--rx-depth R] [--seconds T] [--max-count N] [--yield] "
		"[--noise-us N] [--one-buffer] [--batch] [--timeout SEC]\n"
		"  cbaseline pingpong --provider P --size S [--seconds T] "
		"[--max-count N] [--yield] [--noise-us N] [--timeout SEC]\n"
		"  cbaseline inject   --provider P --size S [--rx-depth R] "
		"[--seconds T] [--max-count N] [--yield] [--noise-us N] "
		"[--timeout SEC]\n"
		"  cbaseline memcpy   --size S [--window W] [--rx-depth R] "
		"[--seconds T] [--max-count N] [--cma] [--thp src|dst|both] "
		"[--timeout SEC]\n"
		"bw and pingpong take --endpoint msg|rdm (default msg; rdm: "
		"[--source]), or\n"
		"--listen HOST:PORT | --connect HOST:PORT with --max-count N "
		"(two processes, msg)\n");
	exit(1);
}

/* CPU seconds (user + system) of the whole process so far. */
static double cpu_sec(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		err(1, "getrusage");
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/*
 * The value of a numeric flag, which must lie in [lo, hi] and, with whole,
 * be a whole number.
 */
static double flag_value(const char *flag, const char *s, double lo,
			 double hi, int whole)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= lo && v <= hi) ||
	    (whole && v != (double)(uint64_t)v))
		errx(1, "%s: want a %snumber in [%g, %g], got '%s'", flag,
		     whole ? "whole " : "", lo, hi, s);
	return v;
}

static void parse_args(int argc, char **argv)
{
	int i;

	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "pingpong"))
		o.mode = MODE_PINGPONG;
	else if (!strcmp(argv[1], "inject"))
		o.mode = MODE_INJECT;
	else if (!strcmp(argv[1], "memcpy"))
		o.mode = MODE_MEMCPY;
	else if (!strcmp(argv[1], "bw"))
		o.mode = MODE_BW;
	else
		usage();
	o.pingpong = o.mode == MODE_PINGPONG;
	o.rdm = o.mode == MODE_INJECT;
	o.window = 64;
	o.seconds = 1;
	o.timeout = 60;
	for (i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--yield")) {
			o.yield = 1;
			continue;
		}
		if (!strcmp(a, "--one-buffer")) {
			if (o.mode != MODE_BW)
				errx(1, "--one-buffer: bw only");
			o.one_buffer = 1;
			continue;
		}
		if (!strcmp(a, "--cma")) {
			if (o.mode != MODE_MEMCPY)
				errx(1, "--cma: memcpy only");
			o.cma = 1;
			continue;
		}
		if (!strcmp(a, "--source")) {
			o.source = 1;
			continue;
		}
		if (!strcmp(a, "--batch")) {
			if (o.mode != MODE_BW)
				errx(1, "--batch: bw only");
			o.batch = 1;
			continue;
		}
		if (!v)
			errx(1, "%s: missing value", a);
		i++;
		if (!strcmp(a, "--provider"))
			o.provider = v;
		else if (!strcmp(a, "--endpoint") &&
			 (o.mode == MODE_BW || o.mode == MODE_PINGPONG)) {
			if (!strcmp(v, "rdm"))
				o.rdm = 1;
			else if (strcmp(v, "msg"))
				errx(1, "--endpoint: want msg or rdm, got '%s'",
				     v);
		}
		else if (!strcmp(a, "--size"))
			o.size = (size_t)flag_value(a, v, 1, 1 << 30, 1);
		else if (!strcmp(a, "--window") &&
			 (o.mode == MODE_BW || o.mode == MODE_MEMCPY))
			o.window = (size_t)flag_value(a, v, 1, MAX_DEPTH, 1);
		else if (!strcmp(a, "--rx-depth") && !o.pingpong)
			o.rx_depth = (size_t)flag_value(a, v, 1, MAX_DEPTH, 1);
		else if (!strcmp(a, "--seconds"))
			o.seconds = flag_value(a, v, 1e-3, 3600, 0);
		else if (!strcmp(a, "--max-count"))
			o.max_count = (uint64_t)flag_value(a, v, 1, 1e12, 1);
		else if (!strcmp(a, "--noise-us"))
			o.noise_us = (unsigned)flag_value(a, v, 1, 1e6, 1);
		else if (!strcmp(a, "--timeout"))
			o.timeout = (unsigned)flag_value(a, v, 0, 86400, 1);
		else if (!strcmp(a, "--thp") && o.mode == MODE_MEMCPY) {
			if (strcmp(v, "src") && strcmp(v, "dst") && strcmp(v, "both"))
				errx(1, "--thp: want src, dst or both, got '%s'", v);
			o.thp = v;
		}
		else if (!strcmp(a, "--listen") && !o.connect)
			o.listen = v;
		else if (!strcmp(a, "--connect") && !o.listen)
			o.connect = v;
		else
			errx(1, "unknown flag '%s'", a);
	}
	if (o.mode == MODE_MEMCPY && !o.provider)
		o.provider = "none";
	if (o.source && (!o.rdm || o.mode == MODE_INJECT))
		errx(1, "--source: bw or pingpong with --endpoint rdm");
	if (!o.provider || !o.size)
		errx(1, "--provider and --size are required");
	if (two_proc() && (o.rdm || o.noise_us || !o.max_count ||
			   (o.mode != MODE_BW && o.mode != MODE_PINGPONG)))
		errx(1, "--listen and --connect: bw or pingpong, msg endpoints, "
			"with --max-count, without --noise-us");
	if (two_proc())
		o.seconds = 3600; /* the count ends the run */
	if (o.mode == MODE_INJECT) {
		o.window = 1; /* the one buffer every inject copies from */
		if (!o.rx_depth)
			o.rx_depth = 128;
	}
	if (o.pingpong) {
		o.window = o.rx_depth = 2; /* slots: one to send, one to receive */
		if (!o.max_count)
			o.max_count = 100000;
		return;
	}
	if (!o.rx_depth)
		o.rx_depth = 2 * o.window;
	if (!o.max_count) {
		o.max_count = (8ull << 30) / o.size;
		if (o.max_count > (4ull << 20))
			o.max_count = 4ull << 20;
	}
}

/* ------------------------------------------------------------- fabric */

static struct fi_info *get_info(const char *node, const char *service,
				uint64_t flags)
{
	struct fi_info *info = NULL;

	TRY(fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, &info));
	if (!info)
		errx(1, "fi_getinfo: provider %s offers no %s endpoint",
		     o.provider, o.rdm ? "RDM" : "message");
	return info;
}

/*
 * An RDM endpoint's info: bound to 127.0.0.1, port 0, for the IP
 * providers; shm's endpoints are named, not bound, and take a name of the
 * provider's choosing (fi_shm://PID:UID:N).
 */
static struct fi_info *rdm_info(void)
{
	if (!strcmp(o.provider, "shm"))
		return get_info(NULL, NULL, 0);
	return get_info("127.0.0.1", "0", FI_SOURCE);
}

static struct fid_eq *open_eq(void)
{
	struct fi_eq_attr attr = {.wait_obj = FI_WAIT_UNSPEC}; /* sread */
	struct fid_eq *eq;

	TRY(fi_eq_open(fabric, &attr, &eq, NULL));
	return eq;
}

/*
 * Open the fabric, the domain and a listening passive endpoint; rdm: the
 * fabric and the domain only.
 */
static void open_fabric(void)
{
	if (o.rdm) {
		hints = rdm_hints(o.provider,
				  FI_MSG | (o.source ? FI_SOURCE : 0));
		hints->domain_attr->threading = FI_THREAD_SAFE;
		pep_info = rdm_info();
		TRY(fi_fabric(pep_info->fabric_attr, &fabric, NULL));
		TRY(fi_domain(fabric, pep_info, &domain, NULL));
		return;
	}
	hints = msg_hints(o.provider);
	hints->domain_attr->threading = FI_THREAD_SAFE;

	if (two_proc()) {
		char host[256], port[16];

		parse_hostport(o.listen ? "--listen" : "--connect",
			       o.listen ? o.listen : o.connect, host,
			       sizeof(host), port, sizeof(port));
		pep_info = get_info(host, port, o.listen ? FI_SOURCE : 0);
	} else {
		pep_info = get_info("127.0.0.1", "0", FI_SOURCE);
	}
	TRY(fi_fabric(pep_info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, pep_info, &domain, NULL));
	if (o.connect)
		return; /* the client side: no passive endpoint */
	pep_eq = open_eq();
	TRY(fi_passive_ep(fabric, pep_info, &pep, NULL));
	TRY(fi_pep_bind(pep, &pep_eq->fid, 0));
	TRY(fi_listen(pep));
}

/* The port the passive endpoint listens on, as a service string. */
static void listening_port(char *out, size_t len)
{
	struct sockaddr_in sin;
	size_t sinlen = sizeof(sin);

	TRY(fi_getname(&pep->fid, &sin, &sinlen));
	if (sin.sin_family != AF_INET)
		errx(1, "fi_getname: not an IPv4 address");
	snprintf(out, len, "%u", ntohs(sin.sin_port));
}

/*
 * Open the side's endpoint on info with cq, or a CQ of its own when cq is
 * NULL, bound to eq (rdm: to an FI_AV_TABLE AV of its own instead), and
 * register nslots buffers with the given access.
 */
static void open_side(struct side *s, struct fi_info *info,
		      struct fid_eq *eq, struct fid_cq *cq, size_t nslots,
		      uint64_t access)
{
	/* Providers without FI_MR_PROV_KEY need a key of our choosing. */
	static atomic_uint next_key;
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_MSG,
		.wait_obj = FI_WAIT_NONE, /* spun on with fi_cq_read */
		.size = nslots * 2 < 256 ? 256 : nslots * 2,
	};
	size_t region = nslots * o.size;

	s->info = info;
	s->eq = eq;
	s->nslots = nslots;
	if (cq) {
		s->cq = cq;
		s->shares_cq = 1;
	} else {
		TRY(fi_cq_open(domain, &cq_attr, &s->cq, NULL));
	}
	TRY(fi_endpoint(domain, info, &s->ep, NULL));
	if (o.rdm) {
		struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 4};

		TRY(fi_av_open(domain, &av_attr, &s->av, NULL));
		TRY(fi_ep_bind(s->ep, &s->av->fid, 0));
	} else {
		TRY(fi_ep_bind(s->ep, &eq->fid, 0));
	}
	TRY(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(s->ep));

	if (posix_memalign((void **)&s->buf, 4096, region))
		errx(1, "posix_memalign: out of memory");
	memset(s->buf, 0, region);
	TRY(fi_mr_reg(domain, s->buf, region, access, 0,
		      atomic_fetch_add(&next_key, 1) + 1, 0, &s->mr, NULL));
	s->desc = fi_mr_desc(s->mr);
	s->ctx = calloc(nslots, sizeof(*s->ctx));
	s->pending = calloc(nslots, sizeof(*s->pending));
	if (!s->ctx || !s->pending)
		errx(1, "calloc: out of memory");
}

/* Wait for one event on eq; exit on anything but want. */
static void eq_expect(struct fid_eq *eq, uint32_t want, const char *what,
		      struct fi_eq_cm_entry *entry)
{
	char buf[EQ_ENTRY_BYTES];
	struct fi_eq_err_entry e = {0};
	uint32_t event;
	ssize_t ret;

	do
		ret = fi_eq_sread(eq, &event, buf, sizeof(buf), EQ_WAIT_MS, 0);
	while (ret == -FI_EAGAIN || ret == -FI_ETIMEDOUT || ret == -FI_EINTR);
	if (ret == -FI_EAVAIL) {
		if (fi_eq_readerr(eq, &e, 0) < 0)
			errx(1, "%s: fi_eq_readerr failed", what);
		errx(1, "%s: %s", what, fi_strerror(e.err));
	}
	if (ret < 0)
		errx(1, "%s: fi_eq_sread: %s", what, fi_strerror((int)-ret));
	if (event != want)
		errx(1, "%s: unexpected event %u", what, event);
	if (entry)
		memcpy(entry, buf, sizeof(*entry));
}

/*
 * Read one batch of completions; 0 when there are none. Error completions
 * are fatal: a baseline that loses messages measures nothing.
 */
static int cq_poll(struct side *s, struct fi_cq_msg_entry *comp)
{
	struct fi_cq_err_entry e = {0};
	fi_addr_t src[CQ_BATCH]; /* --source: read, never used */
	ssize_t n = o.source ? fi_cq_readfrom(s->cq, comp, CQ_BATCH, src)
			     : fi_cq_read(s->cq, comp, CQ_BATCH);

	if (n > 0)
		return (int)n;
	if (n == -FI_EAGAIN) {
		if (o.yield)
			sched_yield();
		return 0;
	}
	if (n == -FI_EAVAIL) {
		if (fi_cq_readerr(s->cq, &e, 0) < 0)
			errx(1, "%s: fi_cq_readerr failed", s->name);
		errx(1, "%s: error completion: %s", s->name,
		     fi_strerror(e.err));
	}
	errx(1, "%s: fi_cq_read: %s", s->name, fi_strerror((int)-n));
}

static size_t slot_of(struct side *s, void *op_context)
{
	struct fi_context *c = op_context;

	if (c < s->ctx || c >= s->ctx + s->nslots)
		errx(1, "%s: completion with an unknown context", s->name);
	return (size_t)(c - s->ctx);
}

/*
 * Where slot's bytes live: its own o.size bytes of the region, or with
 * --one-buffer the region's first o.size bytes for every slot (fabtests'
 * footprint: fi_msg_bw sends every message from one buffer and receives
 * every message into one).
 */
static char *slot_buf(struct side *s, size_t slot)
{
	return o.one_buffer ? s->buf : s->buf + slot * o.size;
}

/*
 * Queue a receive into slot; flush_recvs posts the queued slots until the
 * receive queue is full (-FI_EAGAIN), and is called again after the next
 * completions.
 */
static void post_recv(struct side *s, size_t slot)
{
	s->pending[s->npending++] = slot;
}

static void flush_recvs(struct side *s)
{
	while (s->npending > 0) {
		size_t slot = s->pending[s->npending - 1];
		ssize_t ret = fi_recv(s->ep, slot_buf(s, slot), o.size,
				      s->desc, o.rdm ? FI_ADDR_UNSPEC : 0,
				      &s->ctx[slot]);

		if (ret == -FI_EAGAIN)
			return;
		TRY(ret);
		s->npending--;
	}
}

/* Send len bytes from slot; 0 when the transmit queue is full. */
static int try_send(struct side *s, size_t slot, size_t len)
{
	ssize_t ret = fi_send(s->ep, slot_buf(s, slot), len, s->desc,
			      s->dest, &s->ctx[slot]);

	if (ret == -FI_EAGAIN)
		return 0;
	TRY(ret);
	return 1;
}

/*
 * Server: take the next connection request into s (with cq, see
 * open_side), post receives into slots first..nslots-1, accept.
 */
static void accept_side(struct side *s, struct fid_cq *cq, size_t first,
			size_t nslots, uint64_t access)
{
	struct fi_eq_cm_entry cm;
	size_t i;

	eq_expect(pep_eq, FI_CONNREQ, "server: connection request", &cm);
	open_side(s, cm.info, pep_eq, cq, nslots, access);
	for (i = first; i < nslots; i++)
		post_recv(s, i);
	flush_recvs(s);
	TRY(fi_accept(s->ep, NULL, 0));
	eq_expect(pep_eq, FI_CONNECTED, "server: fi_accept", NULL);
}

/*
 * Server: accept the client's connection, for pingpong with the receive
 * slot posted (the send slot echoes on the same connection).
 */
static void server_accept(size_t nslots, uint64_t access)
{
	if (o.rdm)
		return; /* rdm_open_sides opened it */
	accept_side(&srv, NULL, o.pingpong ? PP_RECV_SLOT : 0, nslots, access);
}

/* The info a client side connects with: --connect's, or our listener's. */
static struct fi_info *connect_info(void)
{
	char host[256], port[16];

	if (o.connect) {
		parse_hostport("--connect", o.connect, host, sizeof(host), port,
			       sizeof(port));
		return get_info(host, port, 0);
	}
	listening_port(port, sizeof(port));
	return get_info("127.0.0.1", port, 0);
}

/*
 * Client: connect s (with eq and cq, see open_side) to the passive
 * endpoint, with receives posted into slots first..nslots-1.
 */
static void connect_side(struct side *s, struct fid_eq *eq, struct fid_cq *cq,
			 size_t first, size_t nslots, uint64_t access)
{
	size_t i;

	open_side(s, connect_info(), eq, cq, nslots, access);
	for (i = first; i < nslots; i++)
		post_recv(s, i);
	flush_recvs(s);
	TRY(fi_connect(s->ep, s->info->dest_addr, NULL, 0));
	eq_expect(s->eq, FI_CONNECTED, "client: fi_connect", NULL);
}

/*
 * Client: connect to the passive endpoint; for pingpong with the pongs'
 * receive slot posted on the same connection.
 */
static void client_connect(size_t nslots, uint64_t access)
{
	if (o.rdm)
		return; /* rdm_open_sides opened it */
	connect_side(&cli, open_eq(), NULL, o.pingpong ? PP_RECV_SLOT : nslots,
		     nslots, access);
}

static void free_side(struct side *s, int own_eq)
{
	close_fid("fi_close(mr)", s->mr ? &s->mr->fid : NULL);
	close_fid("fi_close(av)", s->av ? &s->av->fid : NULL);
	if (!s->shares_cq)
		close_fid("fi_close(cq)", s->cq ? &s->cq->fid : NULL);
	if (own_eq)
		close_fid("fi_close(eq)", s->eq ? &s->eq->fid : NULL);
	if (s->info)
		fi_freeinfo(s->info);
	free(s->buf);
	free(s->ctx);
	free(s->pending);
}

/*
 * Close everything: the endpoints first (no fi_shutdown before: the sockets
 * provider does not take it well), the fabric last.
 */
static void close_all(void)
{
	close_fid("fi_close(ep)", cli.ep ? &cli.ep->fid : NULL);
	close_fid("fi_close(ep)", srv.ep ? &srv.ep->fid : NULL);
	close_fid("fi_close(pep)", pep ? &pep->fid : NULL);
	free_side(&cli, 1);
	free_side(&srv, 0);
	close_fid("fi_close(eq)", pep_eq ? &pep_eq->fid : NULL);
	close_fid("fi_close(domain)", &domain->fid);
	close_fid("fi_close(fabric)", &fabric->fid);
	fi_freeinfo(pep_info);
	fi_freeinfo(hints);
}

/*
 * rdm: give from the address of to, inserted into from's AV, to send to.
 */
static void rdm_insert(struct side *from, struct side *to)
{
	char addr[256];
	size_t len = sizeof(addr);
	int ret;

	TRY(fi_getname(&to->ep->fid, addr, &len));
	ret = fi_av_insert(from->av, addr, 1, &from->dest, 0, NULL);
	if (ret != 1)
		errx(1, "%s: fi_av_insert: %s", from->name,
		     ret < 0 ? fi_strerror(-ret) : "address not inserted");
}

/*
 * rdm: open both sides (their slots, receives and access as the mode
 * wants), each with the other's address in its AV; for bw and inject, put
 * one message through before the clock starts.
 */
static void rdm_open_sides(void)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	size_t i, srv_slots = o.rx_depth, srv_first = 0, cli_slots = o.window;
	size_t cli_first = o.window;
	uint64_t srv_access = FI_RECV, cli_access = FI_SEND;
	int sent = 0, got = 0, n, j;

	if (o.pingpong) {
		srv_slots = cli_slots = 2;
		srv_first = cli_first = PP_RECV_SLOT;
		srv_access = cli_access = FI_SEND | FI_RECV;
	}
	open_side(&srv, rdm_info(), NULL, NULL, srv_slots, srv_access);
	open_side(&cli, rdm_info(), NULL, NULL, cli_slots, cli_access);
	rdm_insert(&cli, &srv);
	rdm_insert(&srv, &cli);
	for (i = srv_first; i < srv_slots; i++)
		post_recv(&srv, i);
	flush_recvs(&srv);
	for (i = cli_first; i < cli_slots; i++)
		post_recv(&cli, i);
	flush_recvs(&cli);
	if (o.pingpong)
		return;

	/* ofi_rxm connects now, saying -FI_EAGAIN until both CQs are read. */
	while (!try_send(&cli, 0, o.size)) {
		cq_poll(&cli, comp); /* nothing is in flight yet */
		cq_poll(&srv, comp);
	}
	while (!sent || !got) {
		sent += cq_poll(&cli, comp);
		n = cq_poll(&srv, comp);
		for (j = 0; j < n; j++)
			post_recv(&srv, slot_of(&srv, comp[j].op_context));
		flush_recvs(&srv);
		got += n;
	}
}

/* Run the server thread, connect the client, and start both together. */
static pthread_t start(void *(*server)(void *), size_t nslots,
		       uint64_t access)
{
	pthread_t t;
	int ret;

	if (o.rdm)
		rdm_open_sides();
	ret = pthread_create(&t, NULL, server, NULL);
	if (ret)
		errx(1, "pthread_create: %s", strerror(ret));
	client_connect(nslots, access);
	pthread_barrier_wait(&start_line);
	return t;
}

/* ------------------------------------------------------------------ bw */

/* Receive until the client is done and every message it sent arrived. */
static void *bw_server(void *arg)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	uint64_t received = 0;
	int n, j;

	(void)arg;
	int reposting = 0; /* --batch: a full set of receives is being posted */

	server_accept(o.rx_depth, FI_RECV);
	if (!two_proc())
		pthread_barrier_wait(&start_line);
	for (;;) {
		if (!o.batch || reposting || srv.npending == srv.nslots) {
			flush_recvs(&srv);
			reposting = srv.npending > 0;
		}
		n = cq_poll(&srv, comp);
		if (n == 0) {
			if (atomic_load(&client_done) &&
			    received >= atomic_load(&total_sent))
				break;
			continue;
		}
		if (received == 0) {
			first_receive = now_sec();
			first_receive_cpu = cpu_sec();
		}
		for (j = 0; j < n; j++) {
			if (!(comp[j].flags & FI_RECV) || comp[j].len != o.size)
				errx(1, "server: unexpected completion (%zu "
					"bytes)", comp[j].len);
			post_recv(&srv, slot_of(&srv, comp[j].op_context));
		}
		received += (uint64_t)n;
		last_receive = now_sec();
		if (two_proc() && received >= o.max_count)
			break; /* the client's close may cancel what is posted */
	}
	server_received = received;
	atomic_store(&server_done, 1);
	return NULL;
}

/*
 * Send with up to o.window messages outstanding until the time or the count
 * is used up, then wait for every send completion. Returns the number sent;
 * *t0 is when the first send was posted.
 */
static uint64_t bw_client(double *t0)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	size_t *free_slots, nfree = o.window, i;
	uint64_t posted = 0, completed = 0;
	double deadline;
	int stop = 0, posting = 1, n, j;

	free_slots = malloc(o.window * sizeof(*free_slots));
	if (!free_slots)
		errx(1, "malloc: out of memory");
	for (i = 0; i < o.window; i++)
		free_slots[i] = i;
	*t0 = now_sec();
	deadline = *t0 + o.seconds;
	while (!stop || completed < posted) {
		if (nfree == o.window)
			posting = 1; /* --batch: the whole window is back */
		while (!stop && nfree > 0 && posting) {
			if (posted >= o.max_count ||
			    (posted % TIME_CHECK_EVERY == 0 && posted > 0 &&
			     now_sec() > deadline)) {
				stop = 1;
				atomic_store(&total_sent, posted);
				atomic_store(&client_done, 1);
				break;
			}
			if (!try_send(&cli, free_slots[nfree - 1], o.size))
				break; /* queue full: reap, then retry */
			nfree--;
			posted++;
		}
		if (o.batch && nfree == 0)
			posting = 0;
		n = cq_poll(&cli, comp);
		for (j = 0; j < n; j++)
			free_slots[nfree++] = slot_of(&cli, comp[j].op_context);
		completed += (uint64_t)n;
	}
	free(free_slots);
	return posted;
}

/*
 * bw's JSON line, which inject and memcpy print too: mode, the provider
 * (then "endpoint":"rdm" on RDM, and extra, a ready ",\"key\":value" or
 * ""), window and rx_bufs, then n messages of o.size bytes in secs seconds
 * and cpu CPU seconds.
 */
/* The JSON tag of an RDM run: its endpoint, and --source. */
static const char *rdm_tag(void)
{
	if (!o.rdm)
		return "";
	return o.source ? ",\"endpoint\":\"rdm\",\"source\":true"
			: ",\"endpoint\":\"rdm\"";
}

/* bw's extra JSON fields: role (or NULL), then the --one-buffer and --batch
 * marks. */
static const char *bw_extra(const char *role)
{
	static char buf[96];

	snprintf(buf, sizeof(buf), "%s%s%s%s%s", role ? ",\"role\":\"" : "",
		 role ? role : "", role ? "\"" : "",
		 o.one_buffer ? ",\"one_buffer\":true" : "",
		 o.batch ? ",\"batch\":true" : "");
	return buf;
}

static void print_bw(const char *mode, const char *extra, size_t window,
		     uint64_t n, double secs, double cpu)
{
	double gb = (double)n * (double)o.size / 1e9;

	printf("{\"mode\":\"%s\",\"provider\":\"%s\"%s%s,\"size\":%zu,"
	       "\"window\":%zu,\"rx_bufs\":%zu,\"messages\":%" PRIu64
	       ",\"bytes\":%" PRIu64 ",\"seconds\":%.6f,\"mb_per_s\":%.3f,"
	       "\"msgs_per_s\":%.1f,\"cpu_seconds\":%.6f,"
	       "\"cpu_s_per_gb\":%.6f}\n",
	       mode, o.provider, rdm_tag(), extra,
	       o.size, window, o.rx_depth, n, n * (uint64_t)o.size, secs,
	       secs > 0 ? gb * 1e3 / secs : 0, secs > 0 ? (double)n / secs : 0,
	       cpu, gb > 0 ? cpu / gb : 0);
}

static void run_bw(void)
{
	pthread_t server = start(bw_server, o.window, FI_SEND);
	double t0, cpu0 = cpu_sec(), cpu;
	uint64_t sent = bw_client(&t0);

	pthread_join(server, NULL);
	cpu = cpu_sec() - cpu0;
	if (server_received != sent)
		errx(1, "server received %" PRIu64 " of %" PRIu64 " messages",
		     server_received, sent);
	close_all();
	print_bw("bw", bw_extra(NULL), o.window, sent, last_receive - t0, cpu);
}

/* -------------------------------------------------------------- inject */

/*
 * fi_inject until the time or the count is used up; an inject has no
 * completion, so the CQ is read only to drive progress: when the provider
 * says -FI_EAGAIN, and afterwards until the server has every message
 * (ofi_rxm moves queued bytes only when progressed). Returns the number
 * injected; *t0 is when the first inject was made.
 */
static uint64_t inject_client(double *t0)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	uint64_t posted = 0;
	double deadline;
	ssize_t ret;

	*t0 = now_sec();
	deadline = *t0 + o.seconds;
	while (posted < o.max_count &&
	       (posted % TIME_CHECK_EVERY != 0 || posted == 0 ||
		now_sec() <= deadline)) {
		ret = fi_inject(cli.ep, cli.buf, o.size, cli.dest);
		if (ret == -FI_EAGAIN) {
			cq_poll(&cli, comp);
			continue;
		}
		TRY(ret);
		posted++;
	}
	atomic_store(&total_sent, posted);
	atomic_store(&client_done, 1);
	while (!atomic_load(&server_done))
		cq_poll(&cli, comp);
	return posted;
}

static void run_inject(void)
{
	pthread_t server;
	double t0, cpu0, cpu;
	uint64_t sent;
	size_t max;
	char extra[64];

	max = pep_info->tx_attr->inject_size;
	if (o.size > max)
		errx(1, "--size %zu: provider %s injects at most %zu bytes",
		     o.size, o.provider, max);
	server = start(bw_server, 1, FI_SEND);
	cpu0 = cpu_sec();
	sent = inject_client(&t0);
	pthread_join(server, NULL);
	cpu = cpu_sec() - cpu0;
	if (server_received != sent)
		errx(1, "server received %" PRIu64 " of %" PRIu64 " messages",
		     server_received, sent);
	close_all();
	snprintf(extra, sizeof(extra), ",\"inject_size\":%zu", max);
	print_bw("inject", extra, 0, sent, last_receive - t0, cpu);
}

/* -------------------------------------------------------------- memcpy */

/*
 * memcpy o.size bytes from o.window source slots into o.rx_depth
 * destination slots in turn, as bw's messages go from the client's slots
 * into the server's, until the time or the count is used up.
 */
/*
 * memcpy --cma: forks a child that writes its own copy of the src_len
 * bytes at src (so that the pages it holds are its own, not shared with
 * this process), says so on a pipe and waits to be killed; it dies with
 * this process too (PR_SET_PDEATHSIG). Returns its pid.
 */
static pid_t start_source_owner(char *src, size_t src_len)
{
	int fds[2];
	char c = 0;
	pid_t pid, parent = getpid();

	if (pipe(fds))
		err(1, "pipe");
	pid = fork();
	if (pid < 0)
		err(1, "fork");
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(1);
		/* Huge pages written after the fork would be split and copied
		 * 4 KiB at a time: drop the parent's and fault in new ones. */
		if (o.thp && strcmp(o.thp, "dst") &&
		    madvise(src, src_len, MADV_DONTNEED))
			_exit(1);
		memset(src, 0x5a, src_len);
		if (write(fds[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause(); /* the parent's SIGKILL, or the watchdog's alarm */
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		errx(1, "--cma: the source process did not start");
	close(fds[0]);
	return pid;
}

/* One o.size-byte copy from address src of process pid into dst. */
static void cma_copy(pid_t pid, char *dst, char *src)
{
	struct iovec local = {.iov_base = dst, .iov_len = o.size};
	struct iovec remote = {.iov_base = src, .iov_len = o.size};

	if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)o.size)
		err(1, "process_vm_readv");
}

/*
 * len bytes for memcpy's slots, page-aligned; with huge, 2 MiB-aligned and
 * advised MADV_HUGEPAGE before a page is touched (memcpy --thp).
 */
static char *slots_alloc(size_t len, int huge)
{
	const size_t thp = 2 << 20;
	void *p;

	if (posix_memalign(&p, huge ? thp : 4096, huge ? (len + thp - 1) / thp * thp : len))
		errx(1, "posix_memalign: out of memory");
	if (huge && madvise(p, (len + thp - 1) / thp * thp, MADV_HUGEPAGE))
		err(1, "madvise(MADV_HUGEPAGE)");
	return p;
}

static void run_memcpy(void)
{
	size_t src_len = o.window * o.size, dst_len = o.rx_depth * o.size;
	char *src, *dst;
	uint64_t n = 0;
	double t0, t1, deadline, cpu0;
	pid_t owner = 0;
	char extra[64];

	src = slots_alloc(src_len, o.thp && strcmp(o.thp, "dst"));
	dst = slots_alloc(dst_len, o.thp && strcmp(o.thp, "src"));
	memset(src, 0x5a, src_len); /* touch every page before the clock */
	memset(dst, 0, dst_len);
	if (o.cma)
		owner = start_source_owner(src, src_len);
	cpu0 = cpu_sec();
	t0 = now_sec();
	deadline = t0 + o.seconds;
	do {
		char *d = dst + (n % o.rx_depth) * o.size;
		char *s = src + (n % o.window) * o.size;

		if (owner)
			cma_copy(owner, d, s);
		else
			memcpy(d, s, o.size);
		/* The copy is used: the compiler may not drop it. */
		__asm__ __volatile__("" : : "r"(dst) : "memory");
		n++;
	} while (n < o.max_count &&
		 (n % TIME_CHECK_EVERY != 0 || now_sec() <= deadline));
	t1 = now_sec();
	snprintf(extra, sizeof(extra), "%s%s%s%s", o.cma ? ",\"cma\":true" : "",
		 o.thp ? ",\"thp\":\"" : "", o.thp ? o.thp : "", o.thp ? "\"" : "");
	print_bw("memcpy", extra, o.window, n,
		 t1 - t0, cpu_sec() - cpu0);
	if (owner) {
		kill(owner, SIGKILL);
		waitpid(owner, NULL, 0);
	}
	free(src);
	free(dst);
}

/* ------------------------------------------------------------ pingpong */

/* Echo every ping on the same connection until the client is done. */
static void *pp_server(void *arg)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	int n, j;

	(void)arg;
	struct side *pong = &srv; /* one endpoint both ways, msg and rdm */
	/* two processes: until every echo of the client's pings completed */
	uint64_t limit = two_proc() ? WARMUP + o.max_count : 0, done = 0;

	server_accept(2, FI_SEND | FI_RECV);
	if (!two_proc())
		pthread_barrier_wait(&start_line);
	while (limit ? done < limit : !atomic_load(&client_done)) {
		n = cq_poll(&srv, comp);
		for (j = 0; j < n; j++) {
			if (!(comp[j].flags & FI_RECV)) {
				done++; /* an echo's send completion */
				continue;
			}
			post_recv(&srv, PP_RECV_SLOT);
			flush_recvs(&srv);
			while (!try_send(pong, PP_SEND_SLOT, comp[j].len))
				;
			server_echoed++;
		}
	}
	return NULL;
}

/*
 * Spin until the pong arrived and the ping's send completed (the send slot
 * is free again); returns when the pong's completion was read.
 */
static double pp_await(void)
{
	struct fi_cq_msg_entry comp[CQ_BATCH];
	int got_pong = 0, sent = 0, n, j;
	double at = 0;

	while (!got_pong || !sent) {
		n = cq_poll(&cli, comp);
		for (j = 0; j < n; j++) {
			if (comp[j].flags & FI_RECV) {
				at = now_sec();
				got_pong = 1;
			} else {
				sent = 1;
			}
		}
	}
	return at;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Half the q-quantile of sorted round trips, in µs, as netio-perf picks it. */
static double one_way_us(const double *rtts, size_t n, double q)
{
	size_t i = (size_t)(q * (double)n);

	return n ? rtts[i < n ? i : n - 1] / 2 * 1e6 : 0;
}

static void run_pingpong(void)
{
	double *rtts = malloc(o.max_count * sizeof(*rtts)), deadline, t, back;
	double sum = 0;
	struct side *pong = &cli; /* one endpoint both ways, msg and rdm */
	pthread_t server = 0;
	uint64_t trips = 0;
	size_t n = 0;

	if (!rtts)
		errx(1, "malloc: out of memory");
	if (two_proc())
		client_connect(2, FI_SEND | FI_RECV);
	else
		server = start(pp_server, 2, FI_SEND | FI_RECV);
	deadline = now_sec() + o.seconds;
	t = now_sec();
	for (;;) {
		while (!try_send(&cli, PP_SEND_SLOT, o.size))
			;
		back = pp_await();
		post_recv(pong, PP_RECV_SLOT);
		flush_recvs(pong);
		if (++trips > WARMUP) {
			rtts[n++] = back - t;
			sum += back - t;
		}
		if (n >= o.max_count || (back > deadline && n >= MIN_TIMED))
			break;
		t = back; /* the next round trip starts where this one ended */
	}
	atomic_store(&client_done, 1);
	if (!two_proc())
		pthread_join(server, NULL);
	close_all();

	qsort(rtts, n, sizeof(*rtts), cmp_double);
	printf("{\"mode\":\"pingpong\",\"provider\":\"%s\"%s%s,\"size\":%zu,"
	       "\"round_trips\":%zu,\"latency_p50_us\":%.3f,"
	       "\"latency_p99_us\":%.3f,\"latency_mean_us\":%.3f}\n",
	       o.provider, rdm_tag(),
	       two_proc() ? ",\"role\":\"client\"" : "", o.size, n,
	       one_way_us(rtts, n, 0.50), one_way_us(rtts, n, 0.99),
	       n ? sum / (double)n / 2 * 1e6 : 0);
	free(rtts);
}

/* ------------------------------------------------------- two processes */

/* --listen: say where, as the first line (port 0: the bound port). */
static void print_listening(void)
{
	char port[16];
	struct sockaddr_in *sin = (struct sockaddr_in *)pep_info->src_addr;

	listening_port(port, sizeof(port));
	printf("LISTENING %s:%s\n", inet_ntoa(sin->sin_addr), port);
	fflush(stdout);
}

/* bw --listen: receive --max-count messages, timed first to last. */
static void serve_bw(void)
{
	atomic_store(&total_sent, o.max_count); /* what bw_server waits for */
	atomic_store(&client_done, 1);
	bw_server(NULL);
	close_all();
	print_bw("bw", bw_extra("server"), 0, server_received,
		 last_receive - first_receive, cpu_sec() - first_receive_cpu);
}

/*
 * bw --connect: send --max-count messages and close once every send
 * completed (on tcp a send completes when the socket has its bytes).
 */
static void send_bw(void)
{
	double t0, cpu0, secs, cpu;
	uint64_t sent;

	client_connect(o.window, FI_SEND);
	cpu0 = cpu_sec();
	sent = bw_client(&t0);
	secs = now_sec() - t0;
	cpu = cpu_sec() - cpu0;
	close_all();
	print_bw("bw", bw_extra("client"), o.window, sent, secs, cpu);
}

/* pingpong --listen: echo WARMUP + --max-count pings, then close. */
static void serve_pingpong(void)
{
	double t0 = now_sec();

	pp_server(NULL);
	close_all();
	printf("{\"mode\":\"pingpong\",\"provider\":\"%s\",\"role\":\"server\","
	       "\"size\":%zu,\"round_trips\":%" PRIu64 ",\"seconds\":%.6f}\n",
	       o.provider, o.size, server_echoed, now_sec() - t0);
}

/* --noise-us: wake up every o.noise_us microseconds, for ever. */
static void *noise(void *arg)
{
	struct timespec ts = {.tv_nsec = (long)o.noise_us * 1000};

	(void)arg;
	ts.tv_sec = ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	for (;;)
		nanosleep(&ts, NULL);
	return NULL;
}

static void start_noise(void)
{
	pthread_t t;
	int ret;

	if (!o.noise_us)
		return;
	ret = pthread_create(&t, NULL, noise, NULL);
	if (ret)
		errx(1, "pthread_create: %s", strerror(ret));
	pthread_detach(t);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	alarm(o.timeout); /* the default action ends the process */
	start_noise();
	if (o.mode == MODE_MEMCPY) {
		run_memcpy();
		return 0;
	}
	if (pthread_barrier_init(&start_line, NULL, 2))
		errx(1, "pthread_barrier_init failed");
	open_fabric();
	if (o.listen)
		print_listening();
	if (o.listen && o.mode == MODE_PINGPONG)
		serve_pingpong();
	else if (o.listen)
		serve_bw();
	else if (o.connect && o.mode == MODE_BW)
		send_bw();
	else if (o.mode == MODE_PINGPONG)
		run_pingpong();
	else if (o.mode == MODE_INJECT)
		run_inject();
	else
		run_bw();
	pthread_barrier_destroy(&start_line);
	return 0;
}
