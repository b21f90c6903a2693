/*
 * corepp: how far apart the machine's CPU 0 and CPU 1 are, over time.
 *
 * Every 250 ms two threads, pinned to CPU 0 and CPU 1, bounce a cache line
 * for 10 ms; it prints the wall time and the fastest and median round trip
 * (ns, each the mean of a batch of 200). Both threads sleep between
 * slots, so it costs about 4 % of each CPU. On the 2-vCPU machines of
 * docs/performance.md the round trip is either about 55 ns or about 310 ns
 * (where the host runs the two vCPUs), and it flips between the two
 * within seconds; tcp;ofi_rxm's 64 KiB rate follows it (hack/rxm-sched.sh
 * runs it beside every pair).
 *
 *   cc -O2 -Wall -pthread -o corepp hack/corepp/corepp.c
 *   corepp SLOTS        (SLOTS × 250 ms, then it exits)
 *
 * Output, a line a slot: "UNIX-SECONDS MIN-NS MEDIAN-NS BATCHES".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BOUNCES 200
#define MAX_BATCHES 4096

static _Atomic long ball __attribute__((aligned(64)));
static _Atomic int stop, active;

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static void nap(long ns)
{
	struct timespec z = {0, ns};

	nanosleep(&z, NULL);
}

/* peer answers every odd value of the ball with the next one, while active. */
static void *peer(void *arg)
{
	long v;

	(void)arg;
	pin(1);
	while (!atomic_load(&stop)) {
		if (!atomic_load(&active)) {
			nap(1000000);
			continue;
		}
		v = atomic_load_explicit(&ball, memory_order_acquire);
		if (v & 1)
			atomic_store_explicit(&ball, v + 1, memory_order_release);
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* batch returns the mean round trip of BOUNCES bounces (a lost peer ends a wait after 1 ms). */
static double batch(void)
{
	double t0 = now_ns(), lim;
	long v;
	int k;

	for (k = 0; k < BOUNCES; k++) {
		v = atomic_load(&ball);
		atomic_store(&ball, v + 1);
		lim = now_ns() + 1e6;
		while (atomic_load_explicit(&ball, memory_order_acquire) == v + 1 && now_ns() < lim)
			;
	}
	return (now_ns() - t0) / BOUNCES;
}

int main(int argc, char **argv)
{
	static double b[MAX_BATCHES];
	int slots = argc > 1 ? atoi(argv[1]) : 40, s, n;
	double start, end;
	struct timespec w;
	pthread_t t;

	if (slots <= 0 || pthread_create(&t, NULL, peer, NULL)) {
		fprintf(stderr, "usage: corepp SLOTS (a positive number of 250 ms slots)\n");
		return 2;
	}
	pin(0);
	for (s = 0; s < slots; s++) {
		start = now_ns();
		atomic_store(&active, 1);
		nap(2000000); /* let the peer wake */
		end = now_ns() + 1e7;
		for (n = 0; n < MAX_BATCHES && now_ns() < end; n++)
			b[n] = batch();
		atomic_store(&active, 0);
		qsort(b, n, sizeof(b[0]), cmp);
		clock_gettime(CLOCK_REALTIME, &w);
		printf("%ld.%03ld %.0f %.0f %d\n", (long)w.tv_sec, w.tv_nsec / 1000000, b[0], b[n / 2], n);
		fflush(stdout);
		while (now_ns() < start + 2.5e8)
			nap(5000000);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	return 0;
}
