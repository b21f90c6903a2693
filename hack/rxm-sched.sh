#!/usr/bin/env bash
# rxm-sched: where each process's threads ran, per run, for netio-perf's rdm
# pair and the C RDM pair (tests/cpeer) on tcp;ofi_rxm, rounds interleaved
# (issue 18 item 7: why a run is fast or slow, not only how fast).
#
# Usage: hack/rxm-sched.sh [rounds]   (default 4)
#   RXM_SCHED_SIZES="4096:100000 65536:20000" sets the sizes and counts
#   (SIZE:COUNT, space-separated; that is the default).
#   RXM_SCHED_B=PATH adds a second netio-perf binary ("b") to every round,
#   for an A/B of a library change with this evidence beside the rate.
#   RXM_SCHED_KEEP=DIR keeps each run's `perf sched timehist` text there.
#   RXM_SCHED_CORES=0 leaves corepp out.
#   RXM_SCHED_COPY=1 samples each process with `perf record -F 2000`
#   instead of perf stat and prints the CPU milliseconds per GB of each
#   process in all, and in the kernel's copies: the sender's into the
#   socket (_copy_from_iter) and the receiver's out of it (_copy_to_iter).
#
# Every pair has the shape of hack/rxm-ab.sh (server --bufs 128, client
# --bufs 64; cpeer 128 receives posted, window 64) and runs under a
# system-wide `perf sched record`; each process also runs under `perf stat -e
# task-clock,context-switches,cpu-migrations` (its whole life). Each run
# prints the receiver's MB/s, perf stat's counts per message of receiver and
# sender, then hack/rxm-sched.py's reading of the trace over the sender's
# life: CPU, switches, migrations and scheduling delay per message of each
# process, its busiest threads (on which CPU, and what ran on that CPU while
# the thread waited to run), what else ran on the machine, how far the two
# processes shared the cores, and how long they ran at once; and the round
# trip of a cache line between CPU 0 and CPU 1 over the run (hack/corepp
# beside the pair: the median of its 250 ms slots' fastest, and the share
# of slots at 150 ns or more; on these virtual machines it is about 55 or
# about 310 ns, by where the host runs the two vCPUs). At the end, medians
# per size and contender, and apart for the runs with CPU 0 and CPU 1 near
# and far, and for those whose processes kept to separate cores and those
# that shared them. Each process is bounded by its own --timeout, corepp
# by its slot count; nothing is left running. Needs root (or
# perf_event_paranoid -1) for the trace.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=hack/peers.sh
. hack/peers.sh
provider_env
export PATH="${PATH}:/usr/local/go/bin"
rounds=${1:-4}
scratch_dir
build_peers
# A process's command name is its file's: one name per role, so that the
# trace tells the four processes of a round apart.
ln "${dir}/netio-perf" "${dir}/nrecv"
ln "${dir}/netio-perf" "${dir}/nsend"
cores=${RXM_SCHED_CORES:-1}
cc -O2 -Wall -pthread -o "${dir}/corepp" hack/corepp/corepp.c
ln "${dir}/cpeer" "${dir}/crecv"
ln "${dir}/cpeer" "${dir}/csend"
contenders=(netio cpeer)
if [ -n "${RXM_SCHED_B:-}" ]; then
	cp "${RXM_SCHED_B}" "${dir}/brecv"
	ln "${dir}/brecv" "${dir}/bsend"
	contenders+=(b)
fi
rxm='tcp;ofi_rxm'
stat=(perf stat -x, -e task-clock,context-switches,cpu-migrations)
copy=${RXM_SCHED_COPY:-0}

# copyms FILE SYMBOL GB: milliseconds of CPU per GB in all, and in SYMBOL,
# from a perf record file sampled at 2000 Hz.
copyms() {
	local total
	total=$(perf script -i "$1" -F ip 2>/dev/null | wc -l)
	perf report -i "$1" --no-children --sort sym -q 2>/dev/null |
		awk -v n="${total}" -v f="$2" -v gb="$3" '$3 == f { p = $1 }
			END { printf "%.0f ms/GB, %s %.0f ms/GB", n / 2 / gb, f, p * n / 200 / gb }'
}

# perstat FILE COUNT: task-clock µs, switches and migrations per message.
perstat() {
	awk -F, -v n="$2" '$3 == "task-clock" { t = $1 } $3 == "context-switches" { c = $1 }
		$3 == "cpu-migrations" { m = $1 }
		END { printf "%.2f %.3f %.4f", t * 1e3 / n, c / n, m / n }' "$1"
}

# corestat FILE T0 T1: the median of corepp's fastest round trips in the
# slots between T0 and T1 (Unix seconds), and the share of them at 150 ns
# or more: "NS ns, P % far", or -1 without a slot.
corestat() {
	awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b { v[n++] = $2; if ($2 >= 150) far++ }
		END {
			if (n == 0) { print -1; exit }
			for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			printf "%.0f ns, %.0f %% far", v[int(n / 2)], 100 * far / n
		}' "$1"
}

# run CONTENDER SIZE COUNT: one traced pair; prints its lines, and appends
# "contender size MB/s recv-µs/msg send-µs/msg recv-cs send-cs" to results.
run() {
	local who=$1 s=$2 n=$3 recv send addr spid tpid mbs rs ss
	: >"${dir}/out"
	perf sched record -a -o "${dir}/sched.data" >/dev/null 2>&1 &
	tpid=$!
	pids+=("${tpid}")
	sleep 0.5
	case "${who}" in
	cpeer)
		recv=("${dir}/crecv" recv --endpoint rdm --provider "${rxm}" --listen 127.0.0.1:0 --size "${s}" --count "${n}" --window 128 --timeout 60)
		send=("${dir}/csend" send --endpoint rdm --provider "${rxm}" --size "${s}" --count "${n}" --window 64 --timeout 60)
		;;
	*)
		local p=n
		if [ "${who}" = b ]; then p=b; fi
		recv=("${dir}/${p}recv" server --endpoint rdm --provider "${rxm}" --listen 127.0.0.1:0 --buf-size "${s}" --bufs 128 --count "${n}" --json --timeout 60s)
		send=("${dir}/${p}send" client --endpoint rdm --provider "${rxm}" --size "${s}" --bufs 64 --count "${n}" --json --timeout 60s)
		;;
	esac
	local rwrap=("${stat[@]}" -o "${dir}/rstat") swrap=("${stat[@]}" -o "${dir}/sstat")
	if [ "${copy}" = 1 ]; then
		rwrap=(perf record -q -F 2000 -o "${dir}/rprof")
		swrap=(perf record -q -F 2000 -o "${dir}/sprof")
	fi
	local cpid="" t0 t1
	if [ "${cores}" = 1 ]; then
		"${dir}/corepp" 480 >"${dir}/corepp.out" &
		cpid=$!
		pids+=("${cpid}")
	fi
	"${rwrap[@]}" -- "${recv[@]}" >"${dir}/out" 2>"${dir}/err" &
	spid=$!
	pids+=("${spid}")
	addr=$(listening "${dir}/out") || true
	t0=$(date +%s.%N)
	if [ -z "${addr}" ] || ! "${swrap[@]}" -- "${send[@]}" --connect "${addr}" >/dev/null 2>>"${dir}/err" ||
		! wait "${spid}"; then
		kill -INT "${tpid}" 2>/dev/null || true
		wait "${tpid}" || true
		if [ -n "${cpid}" ]; then kill "${cpid}" 2>/dev/null || true; fi
		echo "${who} ${s}: failed: $(tail -n 2 "${dir}/err")"
		pids=()
		return
	fi
	t1=$(date +%s.%N)
	kill -INT "${tpid}"
	wait "${tpid}" || true
	local rt=-1
	if [ -n "${cpid}" ]; then
		kill "${cpid}" 2>/dev/null || true
		wait "${cpid}" 2>/dev/null || true
		rt=$(corestat "${dir}/corepp.out" "${t0}" "${t1}")
	fi
	pids=()
	mbs=$(tail -n 1 "${dir}/out" | grep -o '"mb_per_s":[0-9.]*' | cut -d: -f2)
	if [ "${copy}" = 1 ]; then
		local gb
		gb=$(awk -v n="${n}" -v s="${s}" 'BEGIN { print n * s / 1e9 }')
		echo "${who} ${s}: ${mbs} MB/s; CPU sampled, receiver $(copyms "${dir}/rprof" _copy_to_iter "${gb}"), sender $(copyms "${dir}/sprof" _copy_from_iter "${gb}")"
		rs="0 0 0" ss="0 0 0"
	else
		rs=$(perstat "${dir}/rstat" "${n}")
		ss=$(perstat "${dir}/sstat" "${n}")
		echo "${who} ${s}: ${mbs} MB/s; perf stat per message (task-clock µs, switches, migrations): receiver ${rs}, sender ${ss}"
	fi
	perf sched timehist -i "${dir}/sched.data" >"${dir}/th.txt" 2>/dev/null
	if [ -n "${RXM_SCHED_KEEP:-}" ]; then
		mkdir -p "${RXM_SCHED_KEEP}"
		cp "${dir}/th.txt" "${RXM_SCHED_KEEP}/${who}-${s}-$(date +%H%M%S).txt"
	fi
	python3 hack/rxm-sched.py "${dir}/th.txt" "${recv[0]##*/}" "${send[0]##*/}" "${n}" >"${dir}/sched.txt"
	sed 's/^/  /' "${dir}/sched.txt"
	if [ "${rt}" != -1 ]; then echo "  CPU 0 to CPU 1 cache-line round trip over the run: ${rt}"; fi
	echo "${who} ${s} ${mbs} ${rs%% *} ${ss%% *} $(echo "${rs}" | cut -d' ' -f2) $(echo "${ss}" | cut -d' ' -f2)" \
		"$(grep -o 'core sharing [0-9.]*' "${dir}/sched.txt" | cut -d' ' -f3 | grep . || echo -1)" "${rt%% *}" >>"${dir}/results"
	rm -f "${dir}/sched.data" "${dir}/th.txt" "${dir}/rprof" "${dir}/sprof"
}

echo "rxm-sched: ${rounds} rounds at $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
	for sc in ${RXM_SCHED_SIZES:-4096:100000 65536:20000}; do
		order=("${contenders[@]}")
		if ((r % 2)); then
			order=()
			for ((i = ${#contenders[@]} - 1; i >= 0; i--)); do order+=("${contenders[i]}"); done
		fi
		for v in "${order[@]}"; do
			echo "round ${r}, load $(cut -d' ' -f1 /proc/loadavg)"
			run "${v}" "${sc%%:*}" "${sc##*:}"
		done
	done
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${dir}/results" <<'EOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for size in sorted({r[1] for r in rows}, key=int):
    for who in ("netio", "b", "cpeer"):
        ok = [[float(x) for x in r[2:]] for r in rows if r[1] == size and r[0] == who]
        if not ok:
            continue
        col = lambda i: st.median(r[i] for r in ok)
        line = "%8s %-5s %6.0f MB/s (%.0f-%.0f)" % (size, who, col(0), min(r[0] for r in ok), max(r[0] for r in ok))
        if col(1) > 0:  # perf stat's counts (not with RXM_SCHED_COPY)
            line += ", task-clock µs/msg receiver %.2f sender %.2f, switches/msg %.3f %.3f" % (
                col(1), col(2), col(3), col(4))
        print(line)
        for name, part in (("with CPU 0 and CPU 1 near (round trip < 150 ns)", [r for r in ok if len(r) > 6 and 0 <= r[6] < 150]),
                           ("with CPU 0 and CPU 1 far (round trip >= 150 ns)", [r for r in ok if len(r) > 6 and r[6] >= 150]),
                           ("on separate cores (sharing < 0.3)", [r for r in ok if 0 <= r[5] < 0.3]),
                           ("sharing cores (>= 0.3)", [r for r in ok if r[5] >= 0.3])):
            if part:
                line = "%16s%d runs %s: %.0f MB/s" % ("", len(part), name, st.median(r[0] for r in part))
                if col(1) > 0:
                    line += ", task-clock µs/msg receiver %.2f sender %.2f" % (
                        st.median(r[1] for r in part), st.median(r[2] for r in part))
                print(line)
EOF
