#!/usr/bin/env bash
# rxm-ab: interleaved A/B of tcp;ofi_rxm bandwidth between two processes at
# the sizes of issue 18 item 7 that go by rendezvous (64 KiB, 1 MiB; ofi_rxm's
# eager size is 16 KiB): netio-perf built from a base revision, netio-perf
# built from this tree, and the plain C RDM peer (tests/cpeer), in the shape
# and counts of hack/rdm-ratios.sh (server --bufs 128, client --bufs 64; cpeer
# 128 receives posted, window 64; 10000 x 64 KiB, 1000 x 1 MiB).
#
# Usage: hack/rxm-ab.sh [rounds] [base-revision]   (defaults: 5, main)
#   RXM_AB_SIZES="4096:20000 65536:10000" sets the sizes and counts
#   (SIZE:COUNT, space-separated; default "65536:10000 1048576:1000").
#   RXM_AB_POLL=MODE passes --poll MODE to both netio-perf processes
#   (busy, block, ...; default: netio-perf's own default).
#   RXM_AB_PIN=1 pins every receiver to CPU 0 and every sender to CPU 1
#   (taskset), C peer included, so that each process keeps a core of its
#   own as the spinning C peer does by itself (a Go process then runs with
#   GOMAXPROCS 1: the runtime follows the affinity mask).
#   RXM_AB_PROVIDER=shm runs the same pairs on shm (each receiver listens
#   on a name of its own) instead of tcp;ofi_rxm.
#   RXM_AB_CROSS=1 adds two mixed pairs: this tree's netio-perf client into
#   the C receiver ("nc") and the C sender into this tree's server ("cn"),
#   to tell which side sets netio-go's rate against C's.
#   RXM_AB_SYSCALLS=1 runs each process under perf stat and adds, per
#   contender, the median system calls per message of the receiver and of
#   the sender: read, write, recvfrom, sendmsg, poll, futex (start-up
#   included: about 0.2 read per message at 50,000 x 4 KiB is libfabric's
#   start-up). On tcp;ofi_rxm a 1-byte write is the tcp CQ's internal
#   signal set and a 1-byte read its reset (docs/performance.md, "the 4 KiB
#   receiver's signal writes").
#
# Each round runs every contender once per size, in reversed order every
# other round. It prints, per size and contender, the receiver's MB/s
# (first message to last; MB = 10^6 bytes), median (lowest-highest), the
# median of the per-round ratios to the C peer, and the median CPU seconds
# per GB of the receiving and the sending process (user+sys over each
# process's life, start-up included; the C peer spins on its queue, so its
# CPU is about a core per process whatever it moves), and the median
# context switches (voluntary + involuntary, /usr/bin/time's %w + %c) per
# 10,000 messages of each. Every process is bounded by --timeout; nothing
# is left running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The C peer runs libfabric as netio-go configures it (provider_env).
# shellcheck source=hack/peers.sh
. hack/peers.sh
provider_env
export PATH="${PATH}:/usr/local/go/bin"
rounds=${1:-5}
base=${2:-main}
poll=()
if [ -n "${RXM_AB_POLL:-}" ]; then poll=(--poll "${RXM_AB_POLL}"); fi
pin_recv=()
pin_send=()
if [ "${RXM_AB_PIN:-0}" = 1 ]; then
	pin_recv=(taskset -c 0)
	pin_send=(taskset -c 1)
fi

tmp=$(mktemp -d)
spid=
cleanup() {
	if [ -n "${spid}" ]; then kill "${spid}" 2>/dev/null || true; fi
	rm -rf "${tmp}"
}
trap cleanup EXIT

sc_recv=()
sc_send=()
sc_calls="read write recvfrom sendmsg poll futex"
rsc="${tmp}/rsc"
ssc="${tmp}/ssc"
if [ "${RXM_AB_SYSCALLS:-0}" = 1 ]; then
	# shellcheck disable=SC2086 # one event per word of sc_calls
	ev=$(printf 'syscalls:sys_enter_%s,' ${sc_calls})
	sc_recv=(perf stat -x, -e "${ev%,}" -o "${rsc}")
	sc_send=(perf stat -x, -e "${ev%,}" -o "${ssc}")
fi

mkdir -p "${tmp}/base"
git archive "${base}" | tar -x -C "${tmp}/base"
(cd "${tmp}/base" && go build -o "${tmp}/np-base" ./cmd/netio-perf)
go build -o "${tmp}/np-this" ./cmd/netio-perf
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
"${CC:-cc}" -O2 -Wall -o "${tmp}/cpeer" tests/cpeer/cpeer.c $(pkg-config --cflags --libs libfabric)
rxm="${RXM_AB_PROVIDER:-tcp;ofi_rxm}"
pairs=0

# pair SERVER... -- CLIENT...: the server prints "LISTENING ADDR" first;
# the client gets --connect ADDR. Each process's user and sys seconds and
# its involuntary and voluntary context switches go to ${tmp}/rcpu and
# ${tmp}/scpu.
pair() {
	local srv=() addr="" i
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	: >"${tmp}/out"
	/usr/bin/time -f '%U %S %c %w' -o "${tmp}/rcpu" "${pin_recv[@]}" "${sc_recv[@]}" timeout 90 "${srv[@]}" >"${tmp}/out" 2>"${tmp}/err" &
	spid=$!
	for i in $(seq 200); do
		addr=$(awk '/^LISTENING /{ print $2; exit }' "${tmp}/out")
		if [ -n "${addr}" ]; then break; fi
		sleep 0.05
	done
	if [ -z "${addr}" ]; then return 1; fi
	/usr/bin/time -f '%U %S %c %w' -o "${tmp}/scpu" "${pin_send[@]}" "${sc_send[@]}" timeout 90 "$@" --connect "${addr}" >/dev/null 2>>"${tmp}/err" || return 1
	wait "${spid}" || return 1
	spid=
}

# percall FILE COUNT: the system calls of sc_calls per message, in that
# order, from perf stat's output FILE (nothing without RXM_AB_SYSCALLS).
percall() {
	if [ "${#sc_recv[@]}" = 0 ]; then return; fi
	awk -F, -v n="$2" -v calls="${sc_calls}" '
		{ sub(/^syscalls:sys_enter_/, "", $3); c[$3] = $1 }
		END { k = split(calls, a, " "); for (i = 1; i <= k; i++) printf " %.3f", c[a[i]] / n }' "$1"
}

# run CONTENDER SIZE COUNT: prints "MB/s recv-CPU-s/GB send-CPU-s/GB
# recv-switches/10k send-switches/10k", then with RXM_AB_SYSCALLS the
# receiver's and the sender's system calls per message (percall).
run() {
	local s=$2 n=$3 mbs l=127.0.0.1:0
	pairs=$((pairs + 1))
	if [ "${rxm}" = shm ]; then l="rxmab$$-${pairs}"; fi
	case "$1" in
	cpeer)
		pair "${tmp}/cpeer" recv --endpoint rdm --provider "${rxm}" --listen "${l}" --size "${s}" \
			--count "${n}" --window 128 --timeout 60 -- \
			"${tmp}/cpeer" send --endpoint rdm --provider "${rxm}" --size "${s}" --count "${n}" \
			--window 64 --timeout 60 || return 1
		;;
	nc)
		pair "${tmp}/cpeer" recv --endpoint rdm --provider "${rxm}" --listen "${l}" --size "${s}" \
			--count "${n}" --window 128 --timeout 60 -- \
			"${tmp}/np-this" client --endpoint rdm --provider "${rxm}" --size "${s}" --bufs 64 \
			--count "${n}" --json --timeout 60s "${poll[@]}" || return 1
		;;
	cn)
		pair "${tmp}/np-this" server --endpoint rdm --provider "${rxm}" --listen "${l}" --buf-size "${s}" \
			--bufs 128 --count "${n}" --json --timeout 60s "${poll[@]}" -- \
			"${tmp}/cpeer" send --endpoint rdm --provider "${rxm}" --size "${s}" --count "${n}" \
			--window 64 --timeout 60 || return 1
		;;
	base | this)
		local np="${tmp}/np-$1"
		pair "${np}" server --endpoint rdm --provider "${rxm}" --listen "${l}" --buf-size "${s}" \
			--bufs 128 --count "${n}" --json --timeout 60s "${poll[@]}" -- \
			"${np}" client --endpoint rdm --provider "${rxm}" --size "${s}" --bufs 64 \
			--count "${n}" --json --timeout 60s "${poll[@]}" || return 1
		;;
	esac
	mbs=$(tail -n 1 "${tmp}/out" | grep -o '"mb_per_s":[0-9.]*' | cut -d: -f2)
	if [ -z "${mbs}" ]; then return 1; fi
	awk -v mbs="${mbs}" -v gb="$(awk -v n="${n}" -v s="${s}" 'BEGIN { print n * s / 1e9 }')" \
		-v r="$(awk '{ print $1 + $2 }' "${tmp}/rcpu")" -v c="$(awk '{ print $1 + $2 }' "${tmp}/scpu")" \
		-v rs="$(awk '{ print $3 + $4 }' "${tmp}/rcpu")" -v ss="$(awk '{ print $3 + $4 }' "${tmp}/scpu")" -v n="${n}" \
		'BEGIN { printf "%.0f %.3f %.3f %.0f %.0f", mbs, r / gb, c / gb, rs * 1e4 / n, ss * 1e4 / n }'
	echo "$(percall "${rsc}" "${n}")$(percall "${ssc}" "${n}")"
}

contenders=(base this cpeer)
if [ "${RXM_AB_CROSS:-0}" = 1 ]; then contenders+=(nc cn); fi
echo "rxm-ab: ${rxm}, ${rounds} rounds, base ${base} ($(git rev-parse --short "${base}")) against this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')), poll ${RXM_AB_POLL:-default}, pinned ${RXM_AB_PIN:-0}, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
	for sc in ${RXM_AB_SIZES:-65536:10000 1048576:1000}; do
		order=("${contenders[@]}")
		if ((r % 2)); then
			order=()
			for ((i = ${#contenders[@]} - 1; i >= 0; i--)); do order+=("${contenders[i]}"); done
		fi
		line="round ${r} ${sc%%:*}:"
		for v in "${order[@]}"; do
			if ! res=$(run "${v}" "${sc%%:*}" "${sc##*:}"); then
				res=failed
				tail -n 2 "${tmp}/err" >&2
			fi
			echo "${r} ${sc%%:*} ${v} ${res}" >>"${tmp}/results"
			line+=" ${v} ${res%% *}"
		done
		echo "${line}"
	done
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${tmp}/results" "${sc_calls}" <<'EOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for size in sorted({int(r[1]) for r in rows}):
    c = {r[0]: float(r[3]) for r in rows if int(r[1]) == size and r[2] == "cpeer" and r[3] != "failed"}
    for who in ("base", "this", "cpeer", "nc", "cn"):
        if not any(r[2] == who for r in rows):
            continue
        ok = [r for r in rows if int(r[1]) == size and r[2] == who and r[3] != "failed"]
        fails = sum(1 for r in rows if int(r[1]) == size and r[2] == who) - len(ok)
        if not ok:
            print("%8d %-5s no result" % (size, who))
            continue
        mb = [float(r[3]) for r in ok]
        line = "%8d %-5s %6.0f MB/s (%.0f-%.0f), CPU s/GB receiver %.3f sender %.3f" % (
            size, who, st.median(mb), min(mb), max(mb),
            st.median(float(r[4]) for r in ok), st.median(float(r[5]) for r in ok))
        line += ", switches/10k msgs receiver %.0f sender %.0f" % (
            st.median(float(r[6]) for r in ok), st.median(float(r[7]) for r in ok))
        q = [float(r[3]) / c[r[0]] for r in ok if r[0] in c and c[r[0]] > 0]
        if who != "cpeer" and q:
            line += ", /C by round %.2f (%.2f-%.2f)" % (st.median(q), min(q), max(q))
        if fails:
            line += ", %d failed" % fails
        if len(ok[0]) > 8:
            calls = sys.argv[2].split()
            for side, at in (("receiver", 8), ("sender", 8 + len(calls))):
                line += "\n%16s syscalls per message: %s" % (side, ", ".join(
                    "%s %.3f" % (c, st.median(float(r[at + i]) for r in ok)) for i, c in enumerate(calls)))
        print(line)
EOF
