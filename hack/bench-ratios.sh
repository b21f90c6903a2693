#!/usr/bin/env bash
# Prints the speed ratios the issues set as targets, each measured in one
# benchmark run on this machine (tcp loopback), so that machine noise hits
# both sides of a ratio alike:
#   - registration cache hit vs plain register+deregister (target <= 0.25)
#   - zero-copy 1 MiB send vs buffered 1 MiB send (target >= 1.0)
#   - RMA pull and push of 1 MiB vs buffered 1 MiB send (target >= 0.8)
#   - pool get+release without contention (target < 100 ns, 0 allocs)
# Usage: hack/bench-ratios.sh [benchtime]   (default 1s)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
benchtime=${1:-1s}

out=$(mktemp)
trap 'rm -f "${out}"' EXIT

go test -run '^$' -bench 'BenchmarkRegisterDeregister$|BenchmarkCacheHit$|BenchmarkCacheMiss$' \
	-benchtime "${benchtime}" ./domain | tee -a "${out}"
go test -run '^$' -bench 'BenchmarkZeroCopyVsBuffered/.*/1024KiB|BenchmarkRMAVsBuffered/.*/1024KiB' \
	-benchtime "${benchtime}" ./endpoint | tee -a "${out}"
go test -run '^$' -bench 'BenchmarkTryGetRelease$|BenchmarkGetRelease$' \
	-benchtime "${benchtime}" ./pool | tee -a "${out}"

# field: the value before the given unit on the line of a benchmark
value() { awk -v name="$1" -v unit="$2" '$1 ~ name { for (i = 2; i < NF; i++) if ($(i + 1) == unit) print $i }' "${out}"; }

pair=$(value '^BenchmarkRegisterDeregister' 'ns/op')
hit=$(value '^BenchmarkCacheHit-' 'ns/op')
buffered=$(value 'ZeroCopyVsBuffered/buffered/1024KiB' 'MB/s')
region=$(value 'ZeroCopyVsBuffered/zerocopy-region/1024KiB' 'MB/s')
gomem=$(value 'ZeroCopyVsBuffered/zerocopy-go/1024KiB' 'MB/s')
pull=$(value 'RMAVsBuffered/pull/1024KiB' 'MB/s')
push=$(value 'RMAVsBuffered/push/1024KiB' 'MB/s')
rmabuf=$(value 'RMAVsBuffered/buffered/1024KiB' 'MB/s')
tryget=$(value '^BenchmarkTryGetRelease-' 'ns/op')
tryallocs=$(value '^BenchmarkTryGetRelease-' 'allocs/op')

echo
awk -v hit="${hit}" -v pair="${pair}" 'BEGIN { printf "cache hit / register+deregister: %.1f ns / %.1f ns = %.3f (target <= 0.25)\n", hit, pair, hit / pair }'
awk -v z="${region}" -v b="${buffered}" 'BEGIN { printf "zero-copy region / buffered, 1 MiB: %.0f / %.0f MB/s = %.2f (target >= 1)\n", z, b, z / b }'
awk -v z="${gomem}" -v b="${buffered}" 'BEGIN { printf "zero-copy Go memory / buffered, 1 MiB: %.0f / %.0f MB/s = %.2f (target >= 1)\n", z, b, z / b }'
awk -v p="${pull}" -v b="${rmabuf}" 'BEGIN { printf "RMA pull / buffered send, 1 MiB: %.0f / %.0f MB/s = %.2f (target >= 0.8)\n", p, b, p / b }'
awk -v p="${push}" -v b="${rmabuf}" 'BEGIN { printf "RMA push / buffered send, 1 MiB: %.0f / %.0f MB/s = %.2f (target >= 0.8)\n", p, b, p / b }'
echo "pool TryGet+Release: ${tryget} ns/op, ${tryallocs} allocs/op (target < 100 ns, 0 allocs)"
