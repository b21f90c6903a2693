#!/usr/bin/env bash
# Compares the hot-path benchmarks of a base revision with the work tree,
# in one run: both sides are built as test binaries first, then run in
# interleaved rounds (the side that goes first alternates), so that the
# noise of a shared machine hits both alike. benchstat (the Go module
# proxy's golang.org/x/perf/cmd/benchstat, installed on first use) prints
# the medians with their spread and says whether a change is significant.
#   endpoint BenchmarkSendBuffered, sendbuf BenchmarkGetPostComplete,
#   headerbuf BenchmarkGetReturnHeader, internal/poll BenchmarkPingPong,
#   rdm BenchmarkSendBuffer, pubsub BenchmarkPublish
# Usage: hack/bench-hotpath.sh BASE [ROUNDS] [BENCHTIME]
#   (defaults: 5 rounds of 1s per benchmark; the raw results stay in
#   $OUT, default a fresh temporary directory, printed at the end;
#   BENCHES="pool BenchmarkGetRelease$;..." measures other benchmarks)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin:$(go env GOPATH)/bin"
base=${1:?usage: hack/bench-hotpath.sh BASE [ROUNDS] [BENCHTIME]}
rounds=${2:-5}
benchtime=${3:-1s}
out=${OUT:-$(mktemp -d)}
benches=(
	"endpoint BenchmarkSendBuffered"
	"sendbuf BenchmarkGetPostComplete$"
	"headerbuf BenchmarkGetReturnHeader$"
	"internal/poll BenchmarkPingPong"
	"rdm BenchmarkSendBuffer"
	"pubsub BenchmarkPublish$"
)
# BENCHES="pkg regex;pkg regex" replaces the list.
if [[ -n ${BENCHES:-} ]]; then
	IFS=';' read -r -a benches <<<"${BENCHES}"
fi

command -v benchstat >/dev/null || go install golang.org/x/perf/cmd/benchstat@latest

tree="${out}/base-tree"
mkdir -p "${tree}"
git archive "${base}" | tar -x -C "${tree}"
for b in "${benches[@]}"; do
	pkg=${b%% *}
	bin=$(tr / _ <<<"${pkg}")
	(cd "${tree}" && go test -c -o "${out}/base-${bin}.test" "./${pkg}")
	go test -c -o "${out}/new-${bin}.test" "./${pkg}"
done

run() { # side pkg regex: one round of one benchmark, from its package dir
	local side=$1 pkg=$2 re=$3 dir=. tmp try
	[[ ${side} == base ]] && dir=${tree}
	tmp=$(mktemp)
	# A run that crashes (libfabric 1.17's psm provider has died in
	# libinfinipath while the rdm benchmarks looked for providers, on both
	# sides) is tried once more; only a complete run's lines are kept.
	for try in 1 2; do
		if (cd "${dir}/${pkg}" && "${out}/${side}-$(tr / _ <<<"${pkg}").test" -test.run '^$' \
			-test.bench "${re}" -test.benchmem -test.benchtime "${benchtime}" -test.count 1) >"${tmp}" 2>&1; then
			grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "${tmp}" >>"${out}/${side}.txt"
			rm -f "${tmp}"
			return
		fi
		echo "${side} ${pkg}: try ${try} failed:" >&2
		tail -3 "${tmp}" >&2
	done
	rm -f "${tmp}"
}
: >"${out}/base.txt"
: >"${out}/new.txt"
for ((r = 0; r < rounds; r++)); do
	for b in "${benches[@]}"; do
		read -r pkg re <<<"${b}"
		if ((r % 2 == 0)); then
			run base "${pkg}" "${re}"
			run new "${pkg}" "${re}"
		else
			run new "${pkg}" "${re}"
			run base "${pkg}" "${re}"
		fi
	done
	echo "round $((r + 1)) of ${rounds} done" >&2
done
benchstat "${out}/base.txt" "${out}/new.txt"
echo "raw results: ${out}" >&2
