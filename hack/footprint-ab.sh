#!/usr/bin/env bash
# footprint-ab: interleaved A/B of two-process bandwidth (tcp, 127.0.0.1),
# made to test whether the buffer footprint explains netio-go's and the C
# baseline's gap to fabtests' fi_msg_bw. fi_msg_bw sends every message of its
# window from one buffer and receives every message into one (64 KiB a side
# at 64 KiB, in L2); bench-compare's C and netio-go rows cycle 64 send and 64
# receive buffers (4 MiB a side).
#
# Usage: hack/footprint-ab.sh [rounds] [size] [count] [variants]
#   defaults: 7 rounds, 65536 bytes, 20000 messages, c,c-one,fabtests
#   variants, comma-separated; the first is the base of the ratios:
#     c         bin/cbaseline bw, window 64, 64 receives posted
#               (bench-compare's C row)
#     c-one     the same with --one-buffer (fabtests' footprint)
#     c-batch   the same with --batch (fabtests' rhythm: a whole window
#               posted, then all of it awaited; receives reposted together)
#     c-fab     --one-buffer --batch: fabtests' shape in the C baseline
#     fabtests  fi_msg_bw -W 64 ($FABTESTS_BIN, else PATH)
#     netio     netio-perf server/client --bufs 64 (bench-compare's row)
#     netio-wN  netio-perf --bufs N on both sides (N in flight, N posted)
#     netio-sN  the client's window 64, N receives posted by the server
#     netio-cN  the client's window N, 64 receives posted by the server
#     netio-staged  netio with tcp's send staging on in both processes
#               (FI_TCP_STAGING_SBUF_SIZE=9000, libfabric's default, which
#               netio-go turns off: docs/providers.md)
# Each round runs every variant once, in reversed order every other round.
# It prints each variant's receiver MB/s, median (lowest-highest), CPU
# seconds per GB of both processes (user+sys; a program that spins on its
# CQ, as C and fabtests do, spends about two CPUs whatever it moves), and
# the median of the per-round ratios to the first variant. With PERFSTAT=1
# it also prints the system calls and context switches per message of both
# processes together (perf stat's raw_syscalls:sys_enter and
# context-switches, children included). Every pair is
# bounded by --timeout; nothing is left running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
rounds=${1:-7}
size=${2:-65536}
count=${3:-20000}
IFS=, read -r -a variants <<<"${4:-c,c-one,fabtests}"
fab=${FABTESTS_BIN:+${FABTESTS_BIN}/}fi_msg_bw

mkdir -p bin
go build -o bin/netio-perf ./cmd/netio-perf
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
"${CC:-cc}" -O2 -Wall -Wextra -Werror -pthread -o bin/cbaseline hack/cbaseline/cbaseline.c \
	$(pkg-config --cflags --libs libfabric)

tmp=$(mktemp -d)
spid=
cleanup() {
	if [ -n "${spid}" ]; then kill "${spid}" 2>/dev/null || true; fi
	if [ -z "${KEEP:-}" ]; then rm -rf "${tmp}"; else echo "kept ${tmp}" >&2; fi
}
trap cleanup EXIT

# timed CMD...: runs CMD for at most 60 s, adding its user and system
# seconds to ${tmp}/cpu.
timed() {
	local perf=()
	if [ -n "${PERFSTAT:-}" ]; then
		perf=(perf stat -x, -e raw_syscalls:sys_enter,context-switches --append -o "${tmp}/perf")
	fi
	"${perf[@]}" /usr/bin/time -f '%U %S' -a -o "${tmp}/cpu" timeout 60 "$@"
}

# pair SERVER... -- CLIENT...: the server prints "LISTENING ip:port" first;
# ADDR in the client's arguments becomes that address.
pair() {
	local srv=() addr="" i
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	: >"${tmp}/out" # before the server starts: never read the last pair's address
	timed "${srv[@]}" >"${tmp}/out" 2>"${tmp}/err" &
	spid=$!
	for i in $(seq 200); do
		addr=$(awk '/^LISTENING /{ print $2; exit }' "${tmp}/out")
		if [ -n "${addr}" ]; then break; fi
		sleep 0.05
	done
	if [ -z "${addr}" ]; then cat "${tmp}/err" >&2; return 1; fi
	timed "${@/ADDR/${addr}}" >/dev/null 2>>"${tmp}/err" || return 1
	wait "${spid}" || return 1
	spid=
}

# fabpair: fi_msg_bw on a port picked at random (fabtests print none).
fabpair() {
	local port=$((20000 + RANDOM % 20000))
	local common=(-p tcp -s 127.0.0.1 -S "${size}" -W 64 -I "${count}" -m)
	timed "${fab}" "${common[@]}" -B "${port}" >"${tmp}/out" 2>"${tmp}/err" &
	spid=$!
	sleep 0.3
	timed "${fab}" "${common[@]}" -P "${port}" 127.0.0.1 >/dev/null 2>>"${tmp}/err" || return 1
	wait "${spid}" || return 1
	spid=
}

# run VARIANT: prints "MB/s CPU-s-per-GB" of one pair.
run() {
	local n=${count} s=${size} mbs
	: >"${tmp}/cpu"
	: >"${tmp}/perf"
	case "$1" in
	c | c-one | c-batch | c-fab)
		local one=()
		case "$1" in
		c-one) one=(--one-buffer) ;;
		c-batch) one=(--batch) ;;
		c-fab) one=(--one-buffer --batch) ;;
		esac
		pair bin/cbaseline bw --provider tcp --size "${s}" --rx-depth 64 --max-count "${n}" \
			--listen 127.0.0.1:0 --timeout 60 "${one[@]}" -- \
			bin/cbaseline bw --provider tcp --size "${s}" --window 64 --max-count "${n}" \
			--connect ADDR --timeout 60 "${one[@]}" || return 1
		mbs=$(grep -o '"mb_per_s":[0-9.]*' "${tmp}/out" | cut -d: -f2)
		;;
	netio | netio-[wsc][1-9]* | netio-staged)
		local sw=64 cw=64 k=${1#netio-?} stage=()
		case "$1" in
		netio-staged) stage=(env FI_TCP_STAGING_SBUF_SIZE=9000) ;;
		netio-w*) sw=${k} cw=${k} ;;
		netio-s*) sw=${k} ;;
		netio-c*) cw=${k} ;;
		esac
		pair "${stage[@]}" bin/netio-perf server --provider tcp --listen 127.0.0.1:0 --buf-size "${s}" --bufs "${sw}" \
			--count "${n}" --json --timeout 60s -- \
			"${stage[@]}" bin/netio-perf client --provider tcp --connect ADDR --size "${s}" --bufs "${cw}" \
			--count "${n}" --json --timeout 60s || return 1
		mbs=$(tail -1 "${tmp}/out" | grep -o '"mb_per_s":[0-9.]*' | cut -d: -f2)
		;;
	fabtests)
		fabpair || return 1
		mbs=$(grep -o 'MB/sec: *[0-9.]*' "${tmp}/out" | awk '{ print $2 }')
		;;
	*)
		echo "unknown variant $1" >&2
		return 1
		;;
	esac
	if [ -z "${mbs}" ]; then return 1; fi
	awk -v mbs="${mbs}" -v gb="$(awk -v n="${n}" -v s="${s}" 'BEGIN { print n * s / 1e9 }')" \
		-v perf="$(awk -F, -v n="${n}" '$3 ~ /sys_enter/ { sc += $1 } $3 == "context-switches" { cs += $1 }
			END { if (sc) printf "%.2f %.3f", sc / n, cs / n }' "${tmp}/perf")" \
		'{ cpu += $1 + $2 } END { printf "%.0f %.3f %s\n", mbs, cpu / gb, perf }' "${tmp}/cpu"
}

echo "footprint-ab: ${rounds} rounds, ${size} B x ${count}, tcp 127.0.0.1, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
	order=("${variants[@]}")
	if ((r % 2)); then
		order=()
		for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[i]}"); done
	fi
	line="round ${r}:"
	for v in "${order[@]}"; do
		if ! res=$(run "${v}"); then
			res=failed
			tail -n 3 "${tmp}/err" >&2
		fi
		echo "${r} ${v} ${res}" >>"${tmp}/results"
		line+=" ${v} ${res%% *}"
	done
	echo "${line}"
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
base=${variants[0]}
for v in "${variants[@]}"; do
	awk -v v="${v}" -v base="${base}" '
		$3 == "failed" { next }
		$2 == base { b[$1] = $3 }
		$2 == v { m[++n] = $3; c[n] = $4; r[$1] = $3; if (NF >= 6) { sc[++ns] = $5; cs[ns] = $6 } }
		function median(a, k,   i, j, t) {
			for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
			return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
		}
		END {
			if (!n) { printf "%-9s no result\n", v; exit }
			for (k in r) if (k in b && b[k] > 0) q[++nq] = r[k] / b[k]
			med = median(m, n); lo = m[1]; hi = m[n]; cpu = median(c, n)
			printf "%-9s %6.0f MB/s (%.0f-%.0f), CPU %.3f s/GB", v, med, lo, hi, cpu
			if (ns) printf ", %.2f syscalls and %.3f context switches per message", median(sc, ns), median(cs, ns)
			if (v != base && nq) printf ", %s/%s by round %.2f", v, base, median(q, nq)
			printf "\n"
		}' "${tmp}/results"
done
