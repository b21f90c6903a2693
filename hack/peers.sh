# hack/peers.sh: what the scripts that run netio-perf (against the C peers,
# or as publisher and subscribers) share. Source it from the repository's
# root; it only defines functions.

# provider_env exports the libfabric settings netio-go applies before its
# first fi_getinfo (fabric/staging.go, providerDefaults), unless the
# environment names them, so that the C peers run the provider as netio-go
# does and a ratio compares one provider configuration. Set them yourself
# to run both sides with other values.
provider_env() {
	export FI_TCP_STAGING_SBUF_SIZE="${FI_TCP_STAGING_SBUF_SIZE:-0}"
	export FI_OFI_RXM_COMP_PER_PROGRESS="${FI_OFI_RXM_COMP_PER_PROGRESS:-64}"
	export FI_SOCKETS_MAX_BUF_SZ="${FI_SOCKETS_MAX_BUF_SZ:-4194304}"
}

# scratch_dir makes the scratch directory ${dir} and the list ${pids} of
# background processes, both cleaned up when the script exits.
scratch_dir() {
	dir=$(mktemp -d)
	pids=()
	trap scratch_cleanup EXIT
}

scratch_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "${dir}"
}

# build_peers builds netio-perf, hack/cbaseline and tests/cpeer into ${dir}.
build_peers() {
	go build -o "${dir}/netio-perf" ./cmd/netio-perf
	local fi_flags
	fi_flags=$(pkg-config --cflags --libs libfabric)
	# shellcheck disable=SC2086 # fi_flags is a list of compiler flags
	cc -O2 -Wall -pthread -o "${dir}/cbaseline" hack/cbaseline/cbaseline.c ${fi_flags}
	# shellcheck disable=SC2086
	cc -O2 -Wall -o "${dir}/cpeer" tests/cpeer/cpeer.c ${fi_flags}
}

# listening FILE: waits for the "LISTENING ADDR" line of FILE, prints ADDR
# (10 s at most, else it fails).
listening() {
	local addr=""
	for _ in $(seq 200); do
		addr=$(sed -n 's/^LISTENING //p' "$1" | head -n 1)
		[[ -n ${addr} ]] && break
		sleep 0.05
	done
	[[ -n ${addr} ]] || return 1
	echo "${addr}"
}

# publisher_addr OUT ERR prints the address a netio-perf publish started in
# the background announces on its standard output OUT (listening); without
# one it shows the publisher's standard error ERR and fails.
publisher_addr() {
	listening "$1" && return 0
	echo "publisher did not start" >&2
	cat "$2" >&2
	return 1
}
