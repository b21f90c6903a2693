#!/usr/bin/env bash
# inject-client-ab.sh: the 64 B rdm inject sender (netio-perf client
# --endpoint rdm --inject, tcp;ofi_rxm) per message, A against B in
# interleaved rounds, both into the same netio-perf server (built from
# this tree) on 127.0.0.1, ephemeral port (issue 18 item 7;
# docs/performance.md, "rdm 64 B inject: the sender's context switches and
# Go user space"). A and B are client binaries (default: both the one
# built from this tree); B_ENV adds environment to B only (for example
# B_ENV=GODEBUG=cgocheck=0). Per round and contender: the receiver's
# rate (k msg/s) and, from perf stat on the client alone, per message its
# user and system CPU (ns), context switches, and the syscalls that differ
# from the C sender's (sendto, poll, futex, sched_yield, nanosleep,
# epoll_pwait, read, write). Each contender runs COUNT and COUNT/10
# messages back to back and the per-message figures are the difference
# over 0.9 COUNT, so libfabric's start-up (it reads /proc/kallsyms, about
# half a CPU second) drops out. Prints medians with min-max and the B/A
# ratio of medians. Bounded: COUNT messages, 60 s timeout per process.
# Usage: [A=bin] [B=bin] [B_ENV="K=V ..."] hack/inject-client-ab.sh [rounds] [count]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
# shellcheck source=hack/peers.sh
. hack/peers.sh
provider_env
rounds=${1:-5} count=${2:-300000}
scratch_dir
go build -o "${dir}/netio-perf" ./cmd/netio-perf
a=${A:-${dir}/netio-perf} b=${B:-${dir}/netio-perf}
ev=task-clock,user_time,system_time,context-switches
for s in sendto poll futex sched_yield nanosleep epoll_pwait read write; do ev+=",syscalls:sys_enter_${s}"; done

one() { # KEY BIN [ENV...]: both counts
	local key=$1 bin=$2
	shift 2
	run "${count}" "${bin}" "$@"
	mv "${dir}/send.perf" "${dir}/big.perf"
	mv "${dir}/recv.out" "${dir}/big.out"
	run $((count / 10)) "${bin}" "$@"
	report "${key}"
}

run() { # COUNT BIN [ENV...]
	local n=$1 bin=$2 addr
	shift 2
	: >"${dir}/recv.out"
	timeout 60 "${dir}/netio-perf" server --endpoint rdm --json --timeout 60s --bufs 128 --provider 'tcp;ofi_rxm' \
		--listen 127.0.0.1:0 --buf-size 64 --count "${n}" >"${dir}/recv.out" 2>"${dir}/recv.err" &
	local srv=$!
	pids+=("${srv}")
	addr=$(listening "${dir}/recv.out")
	env "$@" perf stat -x, -e "${ev}" -o "${dir}/send.perf" timeout 60 "${bin}" client --endpoint rdm --json \
		--timeout 60s --bufs 64 --provider 'tcp;ofi_rxm' --inject --size 64 --count "${n}" \
		--connect "${addr}" >/dev/null 2>"${dir}/send.err" || echo "client failed" >&2
	wait "${srv}" || echo "server failed" >&2
}

report() { # KEY
	python3 - "$1" "${count}" "${dir}" >>"${dir}/results" <<'PY'
import json, sys
key, count, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def perf(path):
    v = {}
    for line in open(path):
        f = line.strip().split(",")
        if len(f) > 3 and f[0] and f[0][0].isdigit():
            v[f[2].split(":")[-1].replace("sys_enter_", "")] = float(f[0])
    return v
big, small = perf(d + "/big.perf"), perf(d + "/send.perf")
v = {k: big[k] - small.get(k, 0) for k in big}
n = count - count // 10
rate = json.loads(open(d + "/big.out").read().strip().splitlines()[-1])["msgs_per_s"] / 1e3
row = {"key": key, "rate": rate, "user_ns": v["user_time"] / n, "sys_ns": v["system_time"] / n,
       "cs": v["context-switches"] / n}
for s in ("sendto", "poll", "futex", "sched_yield", "nanosleep", "epoll_pwait", "read", "write"):
    row[s] = v.get(s, 0) / n
print(json.dumps(row))
PY
}

for r in $(seq "${rounds}"); do
	echo "round ${r} of ${rounds} (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	# shellcheck disable=SC2086 # B_ENV is a list of K=V words on purpose
	if ((r % 2)); then one A "${a}"; one B "${b}" ${B_ENV:-}; else one B "${b}" ${B_ENV:-}; one A "${a}"; fi
done
python3 - "${dir}/results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cols = [c for c in rows[0] if c != "key"]
med = {}
print("%-12s %24s %24s %7s" % ("per message", "A median (min-max)", "B median (min-max)", "B/A"))
for c in cols:
    out = []
    for k in ("A", "B"):
        xs = [r[c] for r in rows if r["key"] == k]
        med[k] = statistics.median(xs)
        fmt = "%.4g"
        out.append("%s (%s-%s)" % (fmt % med[k], fmt % min(xs), fmt % max(xs)))
    ratio = med["B"] / med["A"] if med["A"] else float("nan")
    print("%-12s %24s %24s %7.3f" % (c, out[0], out[1], ratio))
PY
