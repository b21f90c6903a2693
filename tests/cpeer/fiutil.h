/*
 * fiutil.h: the helpers that the repository's plain-C libfabric programs
 * share, as static inline functions, so that each program stays one .c file
 * built with one cc command and no -I flag. Included, by a path relative to
 * the including file, by
 *   tests/cpeer/cpeer.c            (interop peer, tests/perf_test.go)
 *   tests/hostile/peer/hostile.c   (hostile peer, tests/hostile)
 *   hack/cbaseline/cbaseline.c     (C baseline, hack/bench-compare)
 *
 * Before including it, a program defines _POSIX_C_SOURCE (200809L) and
 * FIUTIL_PROG, its name: every message die() writes to stderr starts with
 * FIUTIL_PROG ": ". Failing helpers end the process with exit status 1 (the
 * watchdog: 2).
 *
 * What stays in the programs is what differs between them: their flags and
 * usage, their JSON output, and how they read their event and completion
 * queues (which errors are fatal, which are counted, how long to wait).
 */
#ifndef NETIO_FIUTIL_H
#define NETIO_FIUTIL_H

#ifndef FIUTIL_PROG
#error "define FIUTIL_PROG, the program's name for its messages, before including fiutil.h"
#endif

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

/* Write FIUTIL_PROG ": ", the message and a newline to stderr; exit 1. */
__attribute__((noreturn, format(printf, 1, 2))) static inline void
die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs(FIUTIL_PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* "call: <fi_strerror>"; ret is a (negative) fi_errno from libfabric. */
__attribute__((noreturn)) static inline void die_fi(const char *call,
						     long ret)
{
	die("%s: %s", call, fi_strerror((int)(ret < 0 ? -ret : ret)));
}

/*
 * The message the watchdog writes, set by watchdog(), and up to
 * WATCHDOG_COUNTS counters it names after it (watchdog_count()), so that a
 * program killed by its watchdog says how far it got.
 */
#define WATCHDOG_COUNTS 4
static struct {
	const char *msg;
	size_t len;
	struct {
		const char *name;
		const volatile uint64_t *v;
	} counts[WATCHDOG_COUNTS];
	int ncounts;
	const volatile uint64_t *last_ms; /* watchdog_idle() */
} watchdog_said __attribute__((unused));

/* Append s (len bytes) to buf at *at, as far as cap allows. Async-signal-safe. */
static inline void watchdog_put(char *buf, size_t cap, size_t *at, const char *s, size_t len)
{
	while (len-- > 0 && *at < cap)
		buf[(*at)++] = *s++;
}

/* Append v in decimal to buf at *at. Async-signal-safe (no stdio). */
static inline void watchdog_put_u64(char *buf, size_t cap, size_t *at, uint64_t v)
{
	char d[20];
	size_t n = 0;

	do {
		d[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n > 0 && *at < cap)
		buf[(*at)++] = d[--n];
}

/* CLOCK_MONOTONIC in milliseconds. Async-signal-safe. */
static inline uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void watchdog_fired(int sig)
{
	char line[256];
	size_t at = 0;
	ssize_t n;
	int i;

	if (sig == SIGALRM)
		n = write(STDERR_FILENO, watchdog_said.msg, watchdog_said.len);
	else
		n = write(STDERR_FILENO, FIUTIL_PROG ": interrupted\n",
			  strlen(FIUTIL_PROG ": interrupted\n"));
	if (watchdog_said.ncounts > 0) {
		watchdog_put(line, sizeof(line), &at, FIUTIL_PROG ": at expiry:",
			     strlen(FIUTIL_PROG ": at expiry:"));
		for (i = 0; i < watchdog_said.ncounts; i++) {
			watchdog_put(line, sizeof(line), &at, " ", 1);
			watchdog_put(line, sizeof(line), &at, watchdog_said.counts[i].name,
				     strlen(watchdog_said.counts[i].name));
			watchdog_put(line, sizeof(line), &at, "=", 1);
			watchdog_put_u64(line, sizeof(line), &at, *watchdog_said.counts[i].v);
		}
		if (watchdog_said.last_ms) {
			uint64_t last = *watchdog_said.last_ms, now = mono_ms();

			watchdog_put(line, sizeof(line), &at, " idle_ms=", 9);
			watchdog_put_u64(line, sizeof(line), &at, last && now > last ? now - last : 0);
		}
		watchdog_put(line, sizeof(line), &at, "\n", 1);
		n = write(STDERR_FILENO, line, at);
	}
	(void)n;
	_exit(2);
}

/*
 * Arm a watchdog: after secs seconds (0: never) write msg to stderr, then
 * the counters given to watchdog_count() on one line, and exit 2 at once,
 * whatever the program is blocked in.
 */
static inline void watchdog(unsigned secs, const char *msg)
{
	struct sigaction sa;

	watchdog_said.msg = msg;
	watchdog_said.len = strlen(msg);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog_fired;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	if (secs)
		alarm(secs);
}

/*
 * Have the watchdog's line end with "idle_ms=N": how long before it fired
 * *last_ms (a mono_ms() time the program sets at each step forward, 0 for
 * none yet) was taken, so that a stall (no step for most of the timeout)
 * and a slow run (steps until the end) look different. Call before
 * watchdog(), with at least one watchdog_count().
 */
static inline void watchdog_idle(const volatile uint64_t *last_ms)
{
	watchdog_said.last_ms = last_ms;
}

/*
 * Have SIGINT and SIGTERM end the program as the watchdog does (the same
 * line of counters, exit 2), so that a test that stops a peer early still
 * learns how far it got. Call after watchdog().
 */
static inline void watchdog_on_interrupt(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog_fired;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/*
 * Have the watchdog write "name=<*v>" when it fires (name a string
 * literal). Call before watchdog(); counters beyond WATCHDOG_COUNTS are
 * not written.
 */
static inline void watchdog_count(const char *name, const volatile uint64_t *v)
{
	if (watchdog_said.ncounts < WATCHDOG_COUNTS) {
		watchdog_said.counts[watchdog_said.ncounts].name = name;
		watchdog_said.counts[watchdog_said.ncounts].v = v;
		watchdog_said.ncounts++;
	}
}

/* A CLOCK_MONOTONIC time in seconds. */
static inline double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A flag's value: a decimal whole number, no sign. */
static inline unsigned long long parse_u64(const char *flag, const char *s)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		die("%s: invalid number '%s'", flag, s ? s : "");
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		die("%s: invalid number '%s'", flag, s);
	return v;
}

/*
 * A flag's HOST:PORT, or [V6HOST]:PORT, into host and port (buffers of
 * hostlen and portlen bytes); PORT must be a number.
 */
static inline void parse_hostport(const char *flag, const char *s,
				  char *host, size_t hostlen, char *port,
				  size_t portlen)
{
	const char *colon, *hs = s;
	size_t hl, pl;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':')
			die("%s: expected [HOST]:PORT, got '%s'", flag, s);
		hs = s + 1;
		hl = (size_t)(rb - hs);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			die("%s: expected HOST:PORT, got '%s'", flag, s);
		hl = (size_t)(colon - s);
	}
	pl = strlen(colon + 1);
	if (hl == 0 || hl >= hostlen || pl == 0 || pl >= portlen)
		die("%s: expected HOST:PORT, got '%s'", flag, s);
	memcpy(host, hs, hl);
	host[hl] = '\0';
	memcpy(port, colon + 1, pl + 1);
	parse_u64(flag, port);
}

/*
 * Hints for a FI_EP_MSG endpoint with FI_MSG on provider, in the memory
 * registration modes the programs handle (local descriptors, virtual
 * addresses, provider keys). Free with fi_freeinfo.
 */
static inline struct fi_info *msg_hints(const char *provider)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints)
		die("fi_allocinfo: out of memory");
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->mode = 0;
	hints->domain_attr->mr_mode =
		FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(provider);
	if (!hints->fabric_attr->prov_name)
		die("strdup: out of memory");
	return hints;
}

/*
 * Hints for a FI_EP_RDM endpoint with caps (FI_MSG, and FI_SOURCE on a
 * receiver that wants fi_cq_readfrom to name the sender) on provider, in
 * the same memory registration modes as msg_hints and with an FI_AV_TABLE
 * address vector. Free with fi_freeinfo.
 */
static inline struct fi_info *rdm_hints(const char *provider, uint64_t caps)
{
	struct fi_info *hints = msg_hints(provider);

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->domain_attr->av_type = FI_AV_TABLE;
	return hints;
}

/* fi_getinfo (API 1.17) for node:service; there is a match or it dies. */
static inline struct fi_info *msg_getinfo(struct fi_info *hints,
					  const char *node,
					  const char *service, uint64_t flags)
{
	struct fi_info *info = NULL;
	int ret;

	ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints,
			 &info);
	if (ret)
		die_fi("fi_getinfo", ret);
	if (!info)
		die("fi_getinfo: no matching provider");
	return info;
}

/* fi_close f unless it is NULL; what names the call in the message. */
static inline void close_fid(const char *what, struct fid *f)
{
	int ret;

	if (!f)
		return;
	ret = fi_close(f);
	if (ret)
		die_fi(what, ret);
}

#endif /* NETIO_FIUTIL_H */
