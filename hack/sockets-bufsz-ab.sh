#!/usr/bin/env bash
# sockets-bufsz-ab.sh: what sockets' socket buffer size (FI_SOCKETS_MAX_BUF_SZ,
# which fabric sets to 4194304 unless the environment names it; 0 is
# libfabric's default, the kernel's autotuned buffers) costs in netio-perf's
# one-process loopback sweep on sockets (--sizes 4K,64K,1M --duration 500ms),
# netio-perf built from this tree. Each round runs every value once, the order
# rotated by round; prints per size and value the median (lowest-highest) of
# MB/s and of CPU s/GB (user+sys of the process). docs/providers.md (sockets,
# "A header split at a full receive buffer") and docs/performance.md.
# Usage: hack/sockets-bufsz-ab.sh [rounds] [values...]   (defaults: 6, 0 4194304)
# Bounded: every sweep under timeout 60; nothing is left running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
rounds=${1:-6}
shift || true
vals=("$@")
((${#vals[@]})) || vals=(0 4194304)
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
go build -o "${tmp}/netio-perf" ./cmd/netio-perf

for r in $(seq "${rounds}"); do
	n=${#vals[@]}
	for i in $(seq 0 $((n - 1))); do
		v=${vals[$(((i + r) % n))]}
		FI_SOCKETS_MAX_BUF_SZ=${v} timeout 60 "${tmp}/netio-perf" --provider sockets \
			--sizes 4K,64K,1M --duration 500ms 2>/dev/null |
			awk -v v="${v}" '
				/^ +[0-9]+ (KiB|MiB) +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9]+/ { mb[$1 $2] = $4 }
				/^ +[0-9]+ (KiB|MiB) +[0-9.]+ +[0-9.]+$/ { cpu[$1 $2] = $4 }
				END { for (k in mb) print v, k, mb[k], cpu[k] }' >>"${tmp}/rows" || true
	done
done

# median (lowest-highest) of column $1 over the rows of value $2 and size $3
stat() {
	awk -v c="$1" -v v="$2" -v s="$3" '$1 == v && $2 == s { print $c }' "${tmp}/rows" | sort -g |
		awk '{ a[NR] = $1 } END { if (!NR) { print "-"; exit }
			m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
			printf "%.3g (%.3g-%.3g) n=%d\n", m, a[1], a[NR], NR }'
}
printf '%-6s %-9s %-28s %s\n' size value "MB/s" "CPU s/GB"
for s in 4KiB 64KiB 1MiB; do
	for v in "${vals[@]}"; do
		printf '%-6s %-9s %-28s %s\n' "${s}" "${v}" "$(stat 3 "${v}" "${s}")" "$(stat 4 "${v}" "${s}")"
	done
done
