#!/usr/bin/env bash
# Where the 64 B rdm inject rate on tcp;ofi_rxm goes (issue 18 item 7;
# docs/performance.md, "rdm 64 B inject: the sender's sendto and TCP's
# segments"). Rounds interleaved, each running five cases:
#   netio: netio-perf client --endpoint rdm --inject into netio-perf server
#          (the pair hack/rdm-ratios.sh measures);
#   block: the same with the server's pollers sleeping at once when idle
#          (--poll block) instead of spinning first (the default, adaptive);
#   cpeer: the same client into the plain C RDM receiver (tests/cpeer recv,
#          which busy-polls a CQ without a wait object);
#   cpair: the plain C RDM sender's injects (cpeer send --inject) into the
#          same C receiver: the two-process C pair hack/rdm-ratios.sh
#          compares netio with;
#   C:     cbaseline inject (one process, a client and a server thread);
#   cpair+NS: with INJECT_SEGS_WORK="NS ...", the C pair again with the C
#          sender spinning NS ns after each inject (cpeer --work-ns): what
#          a sender's own work per message costs the kernel's part.
# For each: the rate at the receiver (k msg/s); for the two-process cases,
# the sender's CPU (task-clock; of it in the kernel: system_time) and
# sendto(2) calls per message and the receiver's recvfrom(2) calls and CPU
# per message (perf stat; a receiver that spins, as cpeer recv does, counts
# its idle time too), the transmits on lo the sender's threads make per
# message (perf's net:net_dev_xmit: its TCP segments, and any other packet
# its context sends) and its context switches; for every case the sender
# socket's bytes per TCP data segment (ss -ti, the last sample taken every
# 0.1 s while it runs; a message is about 144 bytes on the wire, so 144
# means one message a segment). Last, each two-process case's rounds one by
# one: the sender's CPU at its transmits per message. The start-up
# (libfabric reads /proc/kallsyms) is in the CPU figures: keep COUNT large. Bounded: COUNT messages (C: 1 s) and a
# 60 s timeout per process; loopback only, ephemeral ports.
# Usage: hack/inject-segs.sh [rounds] [count]   (default 3 rounds, 300000)
#        INJECT_SEGS_WORK="250 500" hack/inject-segs.sh ...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
# shellcheck source=hack/peers.sh
. hack/peers.sh
provider_env
rounds=${1:-3} count=${2:-300000}
scratch_dir
build_peers
rxm="tcp;ofi_rxm"
events=task-clock,system_time,context-switches,net:net_dev_xmit,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom

# report MODE ARGS...: one result line from the files of a case (MODE pair:
# KEY COUNT; MODE c: KEY PID), or the summary of the result lines (MODE
# summary), as medians with min-max.
report() {
	python3 - "$@" "${dir}" <<'EOF'
import json, re, statistics, sys

mode, d = sys.argv[1], sys.argv[-1]

def perf(path, n):
    vals = {}
    for line in open(path):
        f = line.strip().split(",")
        if len(f) > 3 and not line.startswith("#") and f[0] and f[0][0].isdigit():
            vals[f[2].split(":")[-1]] = float(f[0])
    return (vals.get("task-clock", 0) * 1e3 / n, vals.get("system_time", float("nan")) / 1e3 / n,
            vals.get("sys_enter_sendto", 0) / n, vals.get("sys_enter_recvfrom", 0) / n,
            vals.get("net_dev_xmit", 0) / n, vals.get("context-switches", 0) * 1e3 / n)

def segment(pid=None):
    best = None
    for blk in re.split(r"\n(?=ESTAB)", open(d + "/ss").read()):
        if pid and "pid=%s," % pid not in blk:
            continue
        m = dict(re.findall(r"\b(bytes_sent|data_segs_out):(\d+)", blk))
        if "data_segs_out" in m and int(m["data_segs_out"]) and (best is None or int(m["bytes_sent"]) > int(best["bytes_sent"])):
            best = m
    return int(best["bytes_sent"]) / int(best["data_segs_out"]) if best else float("nan")

def last(path):
    return json.loads(open(path).read().strip().splitlines()[-1])

if mode == "pair":
    key, n = sys.argv[2], int(sys.argv[3])
    rate = last(d + "/recv.out")["msgs_per_s"] / 1e3
    cpu, ksys, sendto, _, xmit, cs = perf(d + "/send.perf", n)
    rcpu, _, _, recvfrom, _, _ = perf(d + "/recv.perf", n)
    print(key, rate, cpu, ksys, sendto, recvfrom, rcpu, segment(), xmit, cs)
elif mode == "c":
    nan = float("nan")
    print(sys.argv[2], last(d + "/c.out")["msgs_per_s"] / 1e3, nan, nan, nan, nan, nan, segment(sys.argv[3]), nan, nan)
else:
    rows = {}
    for line in open(sys.argv[2]):
        f = line.split()
        rows.setdefault(f[0], []).append([float(x) for x in f[1:]])
    names = ("k msg/s", "sender CPU us/msg", "of it in the kernel", "sendto/msg", "receiver recvfrom/msg", "receiver CPU us/msg",
             "bytes/segment", "sender transmits/msg", "sender switches/1k msg")
    print("64 B inject on tcp;ofi_rxm, %d rounds interleaved; medians (min-max)" % max(len(v) for v in rows.values()))
    for key in rows:
        cols = []
        for i, name in enumerate(names):
            vs = [r[i] for r in rows.get(key, []) if r[i] == r[i]]
            if vs:
                cols.append("%s %.5g (%.5g-%.5g)" % (name, statistics.median(vs), min(vs), max(vs)))
        print("%-5s %s" % (key, " | ".join(cols)))
    for key, base in [(k, "C") for k in rows if k != "C"] + [("netio", "cpair"), ("block", "cpair")]:
        rs = [a[0] / b[0] for a, b in zip(rows.get(key, []), rows.get(base, [])) if b[0]]
        if rs:
            print("rate %s/%s by round: %.2fx (%.2f-%.2f)" % (key, base, statistics.median(rs), min(rs), max(rs)))
    print("by round, sender CPU us/msg (of it kernel) at transmits/msg:")
    for key in rows:
        if key != "C":
            print("%-5s %s" % (key, "  ".join("%.2f (%.2f) at %.3f" % (r[1], r[2], r[7]) for r in rows[key])))
EOF
}

# sample FILTER...: until the process $watch ends, keeps ss's last view of
# the sockets FILTER selects in ${dir}/ss.
sample() {
	: >"${dir}/ss"
	while kill -0 "${watch}" 2>/dev/null; do
		ss -tinpH "$@" >"${dir}/ss.tmp" 2>/dev/null || true
		[[ -s ${dir}/ss.tmp ]] && cp "${dir}/ss.tmp" "${dir}/ss"
		sleep 0.1
	done
}

# pair KEY RECEIVER... [-- SENDER...]: RECEIVER under perf stat, then
# SENDER (default: the netio-perf inject client) with --connect ADDR under
# perf stat, the sender's socket sampled.
pair() {
	local key=$1 addr="" recv=() send=()
	shift
	while [[ $# -gt 0 && $1 != -- ]]; do
		recv+=("$1")
		shift
	done
	[[ $# -eq 0 ]] || send=("${@:2}")
	[[ ${#send[@]} -gt 0 ]] || send=("${dir}/netio-perf" client --endpoint rdm --json --timeout 60s --bufs 64 \
		--provider "${rxm}" --inject --size 64 --count "${count}")
	: >"${dir}/recv.out"
	perf stat -x, -e "${events}" -o "${dir}/recv.perf" "${recv[@]}" >"${dir}/recv.out" 2>"${dir}/recv.err" &
	watch=$!
	pids+=("${watch}")
	for _ in $(seq 200); do
		addr=$(sed -n 's/^LISTENING //p' "${dir}/recv.out" | head -n 1)
		[[ -n ${addr} ]] && break
		sleep 0.05
	done
	sample "dport = :${addr##*:}" &
	local s=$!
	perf stat -x, -e "${events}" -o "${dir}/send.perf" "${send[@]}" --connect "${addr}" \
		>"${dir}/send.out" 2>"${dir}/send.err" || echo "${key}: sender failed" >&2
	wait "${watch}" || echo "${key}: receiver failed" >&2
	wait "${s}"
	report pair "${key}" "${count}" >>"${dir}/results" || echo "${key}: no figures (see above)" >&2
}

for round in $(seq "${rounds}"); do
	echo "round ${round} of ${rounds} (load $(cut -d' ' -f1 /proc/loadavg)) ..." >&2
	pair netio "${dir}/netio-perf" server --endpoint rdm --json --timeout 60s --bufs 128 --provider "${rxm}" \
		--listen 127.0.0.1:0 --buf-size 64 --count "${count}"
	pair block "${dir}/netio-perf" server --endpoint rdm --json --timeout 60s --bufs 128 --provider "${rxm}" \
		--listen 127.0.0.1:0 --buf-size 64 --count "${count}" --poll block
	pair cpeer "${dir}/cpeer" recv --endpoint rdm --provider "${rxm}" --listen 127.0.0.1:0 --size 64 \
		--count "${count}" --window 128 --timeout 60
	pair cpair "${dir}/cpeer" recv --endpoint rdm --provider "${rxm}" --listen 127.0.0.1:0 --size 64 \
		--count "${count}" --window 128 --timeout 60 -- \
		"${dir}/cpeer" send --endpoint rdm --inject --provider "${rxm}" --size 64 --count "${count}" --timeout 60
	for ns in ${INJECT_SEGS_WORK:-}; do
		pair "cpair+${ns}" "${dir}/cpeer" recv --endpoint rdm --provider "${rxm}" --listen 127.0.0.1:0 --size 64 \
			--count "${count}" --window 128 --timeout 60 -- "${dir}/cpeer" send --endpoint rdm --inject \
			--provider "${rxm}" --size 64 --count "${count}" --timeout 60 --work-ns "${ns}"
	done
	"${dir}/cbaseline" inject --provider "${rxm}" --size 64 --seconds 1 --timeout 60 >"${dir}/c.out" 2>"${dir}/c.err" &
	watch=$!
	pids+=("${watch}")
	sample &
	s=$!
	wait "${watch}" || echo "C: cbaseline failed" >&2
	wait "${s}"
	report c C "${watch}" >>"${dir}/results" || echo "C: no figures" >&2
done
report summary "${dir}/results"
echo "(machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
