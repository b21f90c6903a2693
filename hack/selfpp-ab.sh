#!/usr/bin/env bash
# selfpp-ab.sh: an A/B of rdm's BenchmarkPingPongSelf (one shm endpoint
# answering itself on one poller goroutine: a hop's CPU path, no wait for
# another thread) between rdm test binaries built with `go test -c`, in
# interleaved rounds so that load changes hit every binary alike. It
# prints, per binary, the minimum, lower quartile, median and maximum of
# ns/op (a round trip to itself: one hop) and of p50-ns/op over the
# rounds, of mid-ns/op (the mean of the middle 80 % of the hops: finer
# than p50, which moves in the clock's 10 ns steps; binaries built before
# it was added print NaN), and of cpu-ns/op (the process's user+system CPU time over the
# benchmark's N, setup and the span sort included: give a fixed
# --benchtime Nx so that every binary pays the same for them), and the
# per-round ratio of each binary to the first (median and min-max). On a
# busy machine compare the minimum and the lower quartile, and the CPU.
#
#   hack/selfpp-ab.sh [--rounds N] [--benchtime T] [--bench REGEXP] A.test B.test ...
#
# Build the binaries once, e.g. in a checkout of each commit:
#   go test -c -o /tmp/a.test ./rdm
# Each run is bounded by -benchtime (default 2000000x) and a 120 s timeout.
set -euo pipefail

rounds=8 benchtime=2000000x bench='^BenchmarkPingPongSelf$'
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--benchtime) benchtime=$2; shift 2 ;;
	--bench) bench=$2; shift 2 ;;
	--) shift; break ;;
	-*) echo "unknown argument $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--rounds N] [--benchtime T] A.test [B.test ...]" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out" "$out.run" "$out.time"' EXIT
for r in $(seq 1 "$rounds"); do
	for i in $(seq 1 $#); do
		bin=${!i}
		case "$bin" in */*) ;; *) bin=./$bin ;; esac
		TIMEFORMAT='%U %S'
		{ time timeout 120 "$bin" -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" \
			-test.count 1 >"$out.run" 2>&1; } 2>"$out.time" || true
		line=$(grep -E '^Benchmark' "$out.run" | head -1 || true)
		n=$(awk '{print $2}' <<<"$line")
		cpu=$(awk -v n="${n:-0}" 'n > 0 {printf "%.1f", ($1 + $2) * 1e9 / n}' "$out.time")
		ns=$(awk '{for (k = 1; k < NF; k++) if ($(k+1) == "ns/op") print $k}' <<<"$line")
		p50=$(awk '{for (k = 1; k < NF; k++) if ($(k+1) == "p50-ns/op") print $k}' <<<"$line")
		allocs=$(awk '{for (k = 1; k < NF; k++) if ($(k+1) == "allocs/op") print $k}' <<<"$line")
		mid=$(awk '{for (k = 1; k < NF; k++) if ($(k+1) == "mid-ns/op") print $k}' <<<"$line")
		echo "$r $i ${ns:-NaN} ${p50:-NaN} ${allocs:-NaN} ${cpu:-NaN} ${mid:-NaN}" >>"$out"
		printf 'round %d %s: %s ns/op, p50 %s ns, mid %s ns, cpu %s ns/op, %s allocs/op (load %s)\n' "$r" "$bin" "${ns:-?}" "${p50:-?}" "${mid:-?}" "${cpu:-?}" "${allocs:-?}" \
			"$(cut -d' ' -f1 /proc/loadavg)"
	done
done
awk -v n=$# -v names="$*" '
function sortv(a, m,   i, j, t) { for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t } }
function q(a, m, f) { return a[int((m - 1) * f) + 1] }
{ ns[$2, $1] = $3; p50[$2, $1] = $4; cpu[$2, $1] = $6; mid[$2, $1] = $7; if ($1 > R) R = $1 }
END {
	split(names, nm, " ")
	for (i = 1; i <= n; i++) {
		m = 0; for (r = 1; r <= R; r++) if (ns[i, r] != "NaN") v[++m] = ns[i, r]
		sortv(v, m)
		k = 0; for (r = 1; r <= R; r++) if (p50[i, r] != "NaN") w[++k] = p50[i, r]
		sortv(w, k)
		printf "%s: ns/op min %.1f q1 %.1f median %.1f max %.1f", nm[i], v[1], q(v, m, 0.25), q(v, m, 0.5), v[m]
		if (k > 0) printf "; p50-ns/op min %.0f q1 %.0f median %.0f", w[1], q(w, k, 0.25), q(w, k, 0.5)
		j = 0; for (r = 1; r <= R; r++) if (mid[i, r] != "NaN") x[++j] = mid[i, r]
		sortv(x, j)
		if (j > 0) printf "; mid-ns/op min %.1f q1 %.1f median %.1f", x[1], q(x, j, 0.25), q(x, j, 0.5)
		c = 0; for (r = 1; r <= R; r++) if (cpu[i, r] != "NaN") u[++c] = cpu[i, r]
		sortv(u, c)
		printf "; cpu-ns/op min %.1f q1 %.1f median %.1f (%d rounds)\n", u[1], q(u, c, 0.25), q(u, c, 0.5), m
		if (i > 1) {
			m = 0; for (r = 1; r <= R; r++) if (ns[i, r] != "NaN" && ns[1, r] != "NaN") v[++m] = ns[i, r] / ns[1, r]
			sortv(v, m)
			printf "  %s / %s by round: ns/op median %.3f (%.3f-%.3f)", nm[i], nm[1], q(v, m, 0.5), v[1], v[m]
			m = 0; for (r = 1; r <= R; r++) if (p50[i, r] != "NaN" && p50[1, r] != "NaN") v[++m] = p50[i, r] / p50[1, r]
			sortv(v, m)
			if (m > 0) printf "; p50-ns/op median %.3f (%.3f-%.3f)", q(v, m, 0.5), v[1], v[m]
			m = 0; for (r = 1; r <= R; r++) if (mid[i, r] != "NaN" && mid[1, r] != "NaN") v[++m] = mid[i, r] - mid[1, r]
			sortv(v, m)
			if (m > 0) printf "; mid-ns/op difference median %+.1f (%+.1f to %+.1f)", q(v, m, 0.5), v[1], v[m]
			m = 0; for (r = 1; r <= R; r++) if (cpu[i, r] != "NaN" && cpu[1, r] != "NaN") v[++m] = cpu[i, r] / cpu[1, r]
			sortv(v, m)
			printf "; cpu-ns/op median %.3f (%.3f-%.3f)\n", q(v, m, 0.5), v[1], v[m]
		}
	}
}' "$out"
