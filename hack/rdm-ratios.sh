#!/usr/bin/env bash
# Prints the connectionless (rdm) ratios issue 18 item 7 sets as targets,
# measured in one run on this machine, rounds interleaved (each round runs
# every case once, netio-go then C), as medians with min-max:
#   - tcp;ofi_rxm 4 KiB, 64 KiB, 1 MiB: netio-perf server and client
#     --endpoint rdm (two processes) against the plain C RDM peer
#     (tests/cpeer recv and send --endpoint rdm, two processes, the same
#     window and posted receives; target >= 0.9), and against
#     hack/cbaseline bw --endpoint rdm (one process, two threads) for
#     reference;
#   - shm 64 KiB and 1 MiB: netio-perf server and client on shm against
#     cbaseline memcpy of the same size (target >= 0.5); for reference, the
#     C RDM peer on shm (two processes: what libfabric's shm itself
#     reaches), netio-perf with FI_SHM_DISABLE_CMA=1 (shm's bounce
#     buffers instead of process_vm_readv), cbaseline memcpy --cma
#     (the same copies made with process_vm_readv from another process,
#     no libfabric: the ceiling of shm's CMA protocol on this machine, on
#     4 KiB pages as the C peer's), and cbaseline memcpy --thp both and
#     --cma --thp both (the same on huge pages, as netio-go's buffers of
#     2 MiB or more are: domain.HugePageAdviceMin);
#   - shm 64 B one-way latency: the netio-perf rdm sweep's ping-pong (two
#     endpoints in two domains of one process, a poller thread each)
#     against cbaseline pingpong --endpoint rdm (two threads of one
#     process; target netio/C <= 1.15), with the default poller and with
#     --poll busy (BusyPoll, what docs/providers.md names for latency) and
#     --poll busy-locked (BusyPoll on a locked thread, the documented
#     lowest-latency setting); and against cbaseline pingpong --source,
#     the C program of the same shape (FI_SOURCE and fi_cq_readfrom, which
#     rdm needs to name each sender), reported beside it;
#   - 64 B inject on tcp;ofi_rxm: netio-perf client --inject into a server
#     (two processes, msg/s at the server) against the plain C RDM peer's
#     injects (tests/cpeer send --endpoint rdm --inject into cpeer recv, two
#     processes, the same count and posted receives; target >= 0.9), and
#     against cbaseline inject (one process, two threads) for reference.
# Rates are counted at the receiver, first message to last; MB = 10^6 bytes.
# Every process has a --timeout; a case that fails prints "fail".
# Usage: hack/rdm-ratios.sh [rounds]   (default 3)
# RDM_RATIOS_SMALL=1 runs the 64 B cases only (latency and inject);
# RDM_RATIOS_SHM=1 the shm 64 KiB and 1 MiB cases only;
# RDM_RATIOS_B=PATH also runs the 64 B cases and the shm netio pairs with
# another netio-perf binary (say main's) in the same rounds, printed as "B"
# with this build's ratio to it.
# RDM_RATIOS_CORES=1 runs hack/corepp beside the whole run (10 ms of
# cache-line bouncing between CPU 0 and CPU 1 every 250 ms) and prints how
# many of its slots found the CPUs far apart (150 ns or more; about 310
# against 55 ns on these virtual machines, and tcp;ofi_rxm's rates follow
# it, docs/performance.md): a ratio compares two runs in one state only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
# The C baselines run libfabric as netio-go configures it (provider_env:
# tcp's staging off, a send reported complete from it being lost by
# fi_close; ofi_rxm's 64 completions per progress call), so the same shape
# means the same setting in the C processes.
# shellcheck source=hack/peers.sh
. hack/peers.sh
provider_env
rounds=${1:-3}

scratch_dir
build_peers
np="${dir}/netio-perf"
if [[ ${RDM_RATIOS_CORES:-0} == 1 ]]; then
	cc -O2 -Wall -pthread -o "${dir}/corepp" hack/corepp/corepp.c
	"${dir}/corepp" 14400 >"${dir}/corepp.out" & # an hour at most; scratch_cleanup stops it
	pids+=("$!")
fi

# field FILE NAME: NAME of the JSON object on the last line of FILE.
field() {
	tail -n 1 "$1" | python3 -c 'import json, sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$2"
}

# pair KEY FIELD RECEIVER... -- SENDER...: starts the receiver, then the
# sender with --connect ADDR, and records the receiver's FIELD under KEY.
pair() {
	local key=$1 fieldname=$2
	shift 2
	local recv=()
	while [[ $1 != -- ]]; do
		recv+=("$1")
		shift
	done
	shift
	: >"${dir}/recv.out" # before the receiver starts: never read the last pair's address
	"${recv[@]}" >"${dir}/recv.out" 2>"${dir}/recv.err" &
	local r=$!
	pids+=("${r}")
	local addr value=fail
	if addr=$(listening "${dir}/recv.out") &&
		"$@" --connect "${addr}" >"${dir}/send.out" 2>"${dir}/send.err" &&
		wait "${r}"; then
		value=$(field "${dir}/recv.out" "${fieldname}")
	else
		kill "${r}" 2>/dev/null || true
		wait "${r}" 2>/dev/null || true
		echo "${key}: failed; receiver: $(tail -n 2 "${dir}/recv.err"); sender: $(tail -n 2 "${dir}/send.err")" >&2
	fi
	echo "${key} ${value}" >>"${dir}/results"
}

# one KEY FIELD CMD...: runs CMD and records FIELD of its JSON line.
one() {
	local key=$1 fieldname=$2 value=fail
	shift 2
	if "$@" >"${dir}/one.out" 2>"${dir}/one.err"; then
		value=$(field "${dir}/one.out" "${fieldname}")
	else
		echo "${key}: failed: $(tail -n 2 "${dir}/one.err")" >&2
	fi
	echo "${key} ${value}" >>"${dir}/results"
}

# sweep64 KEY BIN [FLAGS]: netio-perf BIN's sweep's 64 B one-way latency p50 on shm.
sweep64() {
	local key=$1 bin=$2 value=fail
	shift 2
	if "${bin}" --endpoint rdm --provider shm --sizes 64 --duration 500ms --json "$@" \
		>"${dir}/sweep.out" 2>"${dir}/sweep.err"; then
		value=$(tail -n 1 "${dir}/sweep.out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["rows"][0]["latency_p50_us"])')
	else
		echo "${key}: failed: $(tail -n 2 "${dir}/sweep.err")" >&2
	fi
	echo "${key} ${value}" >>"${dir}/results"
}

rxm="tcp;ofi_rxm"
nserver=("${np}" server --endpoint rdm --json --timeout 120s --bufs 128)
nclient=("${np}" client --endpoint rdm --json --timeout 120s --bufs 64)

# small64 SUFFIX BIN: the 64 B cases of netio-perf BIN, keys ending in SUFFIX.
small64() {
	local sfx=$1 bin=$2
	sweep64 "shmlat.netio${sfx}" "${bin}"
	sweep64 "shmlat.busy${sfx}" "${bin}" --poll busy
	sweep64 "shmlat.locked${sfx}" "${bin}" --poll busy-locked
	pair "inject64.netio${sfx}" msgs_per_s "${bin}" "${nserver[@]:1}" --provider "${rxm}" --listen 127.0.0.1:0 \
		--buf-size 64 --count 50000 -- "${bin}" "${nclient[@]:1}" --provider "${rxm}" --inject --size 64 --count 50000
}

for round in $(seq "${rounds}"); do
	echo "round ${round} of ${rounds} ..." >&2
	[[ -n ${RDM_RATIOS_SMALL:-}${RDM_RATIOS_SHM:-} ]] || for size_count in 4096:50000 65536:10000 1048576:1000; do
		size=${size_count%%:*} count=${size_count##*:}
		pair "rxm${size}.netio" mb_per_s "${nserver[@]}" --provider "${rxm}" --listen 127.0.0.1:0 \
			--buf-size "${size}" --count "${count}" -- "${nclient[@]}" --provider "${rxm}" --size "${size}" --count "${count}"
		pair "rxm${size}.cpeer" mb_per_s "${dir}/cpeer" recv --endpoint rdm --provider "${rxm}" --listen 127.0.0.1:0 \
			--size "${size}" --count "${count}" --window 128 --timeout 60 -- \
			"${dir}/cpeer" send --endpoint rdm --provider "${rxm}" --size "${size}" --count "${count}" --window 64 --timeout 60
		one "rxm${size}.cbaseline" mb_per_s "${dir}/cbaseline" bw --endpoint rdm --provider "${rxm}" --size "${size}" \
			--window 64 --rx-depth 128 --seconds 1 --timeout 60
	done
	[[ -n ${RDM_RATIOS_SMALL:-} ]] || for size_count in 65536:20000 1048576:2000; do
		size=${size_count%%:*} count=${size_count##*:}
		pair "shm${size}.netio" mb_per_s "${nserver[@]}" --provider shm --buf-size "${size}" --count "${count}" -- \
			"${nclient[@]}" --provider shm --size "${size}" --count "${count}"
		[[ -z ${RDM_RATIOS_B:-} ]] || pair "shm${size}.netio.b" mb_per_s "${RDM_RATIOS_B}" "${nserver[@]:1}" --provider shm \
			--buf-size "${size}" --count "${count}" -- "${RDM_RATIOS_B}" "${nclient[@]:1}" --provider shm --size "${size}" \
			--count "${count}"
		one "shm${size}.memcpy" mb_per_s "${dir}/cbaseline" memcpy --size "${size}" --window 64 --rx-depth 128 \
			--seconds 1 --timeout 60
		one "shm${size}.cma" mb_per_s "${dir}/cbaseline" memcpy --cma --size "${size}" --window 64 --rx-depth 128 \
			--seconds 1 --timeout 60
		one "shm${size}.thp" mb_per_s "${dir}/cbaseline" memcpy --thp both --size "${size}" --window 64 --rx-depth 128 \
			--seconds 1 --timeout 60
		one "shm${size}.cmathp" mb_per_s "${dir}/cbaseline" memcpy --cma --thp both --size "${size}" --window 64 \
			--rx-depth 128 --seconds 1 --timeout 60
		pair "shm${size}.cpeer" mb_per_s "${dir}/cpeer" recv --endpoint rdm --provider shm \
			--listen "rdmratios$$-${round}-${size}" --size "${size}" --count "${count}" --window 128 --timeout 60 -- \
			"${dir}/cpeer" send --endpoint rdm --provider shm --size "${size}" --count "${count}" --window 64 --timeout 60
		pair "shm${size}.nocma" mb_per_s env FI_SHM_DISABLE_CMA=1 "${nserver[@]}" --provider shm --buf-size "${size}" \
			--count "${count}" -- env FI_SHM_DISABLE_CMA=1 "${nclient[@]}" --provider shm --size "${size}" --count "${count}"
	done
	[[ -z ${RDM_RATIOS_SHM:-} ]] || continue
	small64 "" "${np}"
	[[ -z ${RDM_RATIOS_B:-} ]] || small64 .b "${RDM_RATIOS_B}"
	one shmlat.cbaseline latency_p50_us "${dir}/cbaseline" pingpong --endpoint rdm --provider shm --size 64 \
		--seconds 1 --timeout 60
	one shmlat.csource latency_p50_us "${dir}/cbaseline" pingpong --endpoint rdm --provider shm --size 64 \
		--source --seconds 1 --timeout 60
	pair inject64.cpeer msgs_per_s "${dir}/cpeer" recv --endpoint rdm --provider "${rxm}" --listen 127.0.0.1:0 \
		--size 64 --count 50000 --window 128 --timeout 60 -- \
		"${dir}/cpeer" send --endpoint rdm --inject --provider "${rxm}" --size 64 --count 50000 --timeout 60
	one inject64.cbaseline msgs_per_s "${dir}/cbaseline" inject --provider "${rxm}" --size 64 --seconds 1 --timeout 60
done

python3 - "${dir}/results" <<'EOF'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    key, v = line.split()
    vals.setdefault(key, []).append(None if v == "fail" else float(v))

def stat(key, scale=1.0, unit=""):
    vs = [v for v in vals.get(key, []) if v is not None]
    fails = len(vals.get(key, [])) - len(vs)
    if not vs:
        return "fail", None
    m = statistics.median(vs) / scale
    s = "%.4g%s (%.4g-%.4g)" % (m, unit, min(vs) / scale, max(vs) / scale)
    if fails:
        s += " %d failed" % fails
    return s, m

def ratios(a, b):
    """Median and range of per-round ratios a/b."""
    rs = [x / y for x, y in zip(vals.get(a, []), vals.get(b, [])) if x is not None and y]
    if not rs:
        return "fail"
    return "%.2fx (%.2f-%.2f)" % (statistics.median(rs), min(rs), max(rs))

print("rdm ratios, %d rounds interleaved; medians (min-max); MB = 10^6 bytes" % max(len(v) for v in vals.values()))
for size, name in ((4096, "4 KiB"), (65536, "64 KiB"), (1048576, "1 MiB")):
    if "rxm%d.netio" % size not in vals:
        continue
    n, _ = stat("rxm%d.netio" % size, unit=" MB/s")
    c, _ = stat("rxm%d.cpeer" % size, unit=" MB/s")
    b, _ = stat("rxm%d.cbaseline" % size, unit=" MB/s")
    print("tcp;ofi_rxm %-6s netio %s | C two processes %s: %s (target >= 0.9) | C one process %s: %s"
          % (name, n, c, ratios("rxm%d.netio" % size, "rxm%d.cpeer" % size), b,
             ratios("rxm%d.netio" % size, "rxm%d.cbaseline" % size)))
for size, name in ((65536, "64 KiB"), (1048576, "1 MiB")):
    if "shm%d.netio" % size not in vals:
        continue
    n, _ = stat("shm%d.netio" % size, unit=" MB/s")
    c, _ = stat("shm%d.memcpy" % size, unit=" MB/s")
    print("shm %-6s netio %s | memcpy %s: %s (target >= 0.5)"
          % (name, n, c, ratios("shm%d.netio" % size, "shm%d.memcpy" % size)))
    p, _ = stat("shm%d.cpeer" % size, unit=" MB/s")
    print("    C peer two processes %s: netio/C %s, C/memcpy %s"
          % (p, ratios("shm%d.netio" % size, "shm%d.cpeer" % size), ratios("shm%d.cpeer" % size, "shm%d.memcpy" % size)))
    k, _ = stat("shm%d.cma" % size, unit=" MB/s")
    print("    process_vm_readv alone (CMA's ceiling) %s: /memcpy %s, netio/it %s"
          % (k, ratios("shm%d.cma" % size, "shm%d.memcpy" % size), ratios("shm%d.netio" % size, "shm%d.cma" % size)))
    k, _ = stat("shm%d.thp" % size, unit=" MB/s")
    print("    memcpy on huge pages (--thp both) %s: netio/it %s"
          % (k, ratios("shm%d.netio" % size, "shm%d.thp" % size)))
    k, _ = stat("shm%d.cmathp" % size, unit=" MB/s")
    print("    process_vm_readv on huge pages (--cma --thp both) %s: /memcpy %s, netio/it %s"
          % (k, ratios("shm%d.cmathp" % size, "shm%d.memcpy" % size), ratios("shm%d.netio" % size, "shm%d.cmathp" % size)))
    if "shm%d.netio.b" % size in vals:
        b, _ = stat("shm%d.netio.b" % size, unit=" MB/s")
        print("  B netio %s: B/memcpy %s, this/B %s"
              % (b, ratios("shm%d.netio.b" % size, "shm%d.memcpy" % size), ratios("shm%d.netio" % size, "shm%d.netio.b" % size)))
    k, _ = stat("shm%d.nocma" % size, unit=" MB/s")
    print("    netio with FI_SHM_DISABLE_CMA=1 %s: /memcpy %s, /netio with CMA %s"
          % (k, ratios("shm%d.nocma" % size, "shm%d.memcpy" % size), ratios("shm%d.nocma" % size, "shm%d.netio" % size)))
if "shmlat.netio" not in vals:
    sys.exit(0)
n, _ = stat("shmlat.netio", unit=" us")
c, _ = stat("shmlat.cbaseline", unit=" us")
print("shm 64 B one-way p50: netio %s | C %s: %s (target <= 1.15)" % (n, c, ratios("shmlat.netio", "shmlat.cbaseline")))
s, _ = stat("shmlat.csource", unit=" us")
print("    C with FI_SOURCE (fi_cq_readfrom) %s: netio/it %s, it/C %s"
      % (s, ratios("shmlat.netio", "shmlat.csource"), ratios("shmlat.csource", "shmlat.cbaseline")))
n, _ = stat("shmlat.busy", unit=" us")
print("shm 64 B one-way p50, --poll busy: netio %s: %s" % (n, ratios("shmlat.busy", "shmlat.cbaseline")))
n, _ = stat("shmlat.locked", unit=" us")
print("shm 64 B one-way p50, --poll busy-locked: netio %s: %s" % (n, ratios("shmlat.locked", "shmlat.cbaseline")))
n, _ = stat("inject64.netio", 1e3, " k msg/s")
c, _ = stat("inject64.cpeer", 1e3, " k msg/s")
b, _ = stat("inject64.cbaseline", 1e3, " k msg/s")
print("tcp;ofi_rxm 64 B inject: netio %s | C two processes %s: %s (target >= 0.9) | C one process %s: %s"
      % (n, c, ratios("inject64.netio", "inject64.cpeer"), b, ratios("inject64.netio", "inject64.cbaseline")))
for key, c, unit, scale in (("shmlat.netio", "shmlat.cbaseline", " us", 1.0), ("shmlat.busy", "shmlat.cbaseline", " us", 1.0),
                            ("shmlat.locked", "shmlat.cbaseline", " us", 1.0),
                            ("inject64.netio", "inject64.cpeer", " k msg/s", 1e3)):
    if key + ".b" in vals:
        b, _ = stat(key + ".b", scale, unit)
        print("  B %-14s %s: B/C %s, this/B %s" % (key, b, ratios(key + ".b", c), ratios(key, key + ".b")))
EOF
echo "(machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
if [[ -s ${dir}/corepp.out ]]; then
	awk '{ n++; if ($2 >= 150) far++ } END { printf "(CPU 0 to CPU 1: %d of %d 250 ms slots far apart, 150 ns or more)\n", far, n }' "${dir}/corepp.out"
fi
