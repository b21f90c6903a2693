#!/usr/bin/env bash
# hack/setup-deps.sh — make sure this machine can build and test netio-go.
#
# netio-go needs libfabric (headers + pkg-config file, and fi_info), a C
# compiler for cgo, make, iproute2 (ip and tc), nftables (nft) and
# iputils-ping (ping) for the multi-host tests in tests/netns (nft drops
# packets at random on a link, ping measures its round trip), and Go 1.26.
# When libfabric, fi_info, gcc, make, ip, tc, nft and ping are already there
# this prints one line and exits 0. Otherwise it installs them with apt-get
# (Debian/Ubuntu), using sudo when not root. It never downloads Go: install
# Go 1.26 yourself from https://go.dev/dl/.
#
# Environment:
#   NETIO_FORCE_INSTALL=1  skip the "already installed" check and run apt-get
#                          anyway (harmless when the packages are installed).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# The Debian/Ubuntu packages. libc6-dev and make are usually there already;
# cgo needs the first, the Makefile the second.
PACKAGES=(libfabric-dev libfabric-bin pkg-config gcc libc6-dev make iproute2 nftables iputils-ping)
MIN_LIBFABRIC=1.17
MIN_GO_MINOR=26 # Go 1.26

log() { printf 'setup-deps: %s\n' "$*"; }
warn() { printf 'setup-deps: warning: %s\n' "$*" >&2; }
die() {
	printf 'setup-deps: error: %s\n' "$*" >&2
	exit 1
}

have() { command -v "$1" >/dev/null 2>&1; }

have_all() {
	have pkg-config && pkg-config --exists libfabric && have fi_info && have gcc && have make &&
		have ip && have tc && have nft && have ping
}

install_packages() {
	have apt-get || die "apt-get not found: this script installs packages on Debian/Ubuntu only.
  Install these with your package manager, then re-run:
    libfabric >= ${MIN_LIBFABRIC} with headers and pkg-config file (Fedora/RHEL: libfabric-devel),
    fi_info (Fedora/RHEL: libfabric), pkg-config, gcc, make, iproute2, nftables,
    ping (Fedora/RHEL: iputils)."

	local -a sudo=()
	if [[ ${EUID} -ne 0 ]]; then
		have sudo || die "not root and sudo not found: run as root, or install the packages yourself:
    apt-get update && apt-get install -y ${PACKAGES[*]}"
		sudo=(sudo DEBIAN_FRONTEND=noninteractive)
	fi

	local logfile
	logfile=$(mktemp "${TMPDIR:-/tmp}/netio-setup-deps.XXXXXX")
	log "installing ${PACKAGES[*]} with apt-get (output in ${logfile})"
	if ! "${sudo[@]}" apt-get update >"${logfile}" 2>&1; then
		tail -n 20 "${logfile}" >&2
		die "apt-get update failed (full output in ${logfile})"
	fi
	if ! "${sudo[@]}" apt-get install -y "${PACKAGES[@]}" >>"${logfile}" 2>&1; then
		tail -n 20 "${logfile}" >&2
		die "apt-get install failed (full output in ${logfile})"
	fi
	rm -f "${logfile}"
}

# --- libfabric, C toolchain, make ------------------------------------------

if [[ "${NETIO_FORCE_INSTALL:-0}" != 1 ]] && have_all; then
	already=1
else
	already=0
	install_packages
fi

have pkg-config || die "pkg-config still missing after the install"
version=$(pkg-config --modversion libfabric 2>/dev/null || true)
[[ -n "${version}" ]] || die "pkg-config finds no libfabric after the install (is libfabric-dev installed?)"
have fi_info || die "fi_info still missing after the install (package libfabric-bin)"
have gcc || die "gcc still missing after the install"
have make || die "make still missing after the install"
if ! pkg-config --atleast-version="${MIN_LIBFABRIC}" libfabric; then
	warn "libfabric ${version} is older than ${MIN_LIBFABRIC}, the version netio-go is tested with"
fi
providers=$(fi_info -l 2>/dev/null || true)
for p in tcp sockets; do
	grep -qx "${p}:" <<<"${providers}" || warn "libfabric has no '${p}' provider; the tests use tcp and sockets"
done

# --- Go --------------------------------------------------------------------

gobin=$(command -v go 2>/dev/null || true)
if [[ -z "${gobin}" && -x /usr/local/go/bin/go ]]; then
	gobin=/usr/local/go/bin/go # the Makefile adds /usr/local/go/bin to PATH
fi
[[ -n "${gobin}" ]] || die "Go not found (neither 'go' on PATH nor /usr/local/go/bin/go).
  netio-go needs Go 1.${MIN_GO_MINOR} or newer; this script does not download it.
  Install it from https://go.dev/dl/ (e.g. unpack into /usr/local/go) and re-run."
goversion=$("${gobin}" env GOVERSION 2>/dev/null || "${gobin}" version | awk '{print $3}')
if [[ "${goversion}" =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] < MIN_GO_MINOR)); then
	warn "${goversion} is older than go1.${MIN_GO_MINOR}: the go command will try to fetch the toolchain go.mod asks for (GOTOOLCHAIN=auto); otherwise install Go 1.${MIN_GO_MINOR} from https://go.dev/dl/"
fi

if ((already)); then
	log "libfabric ${version}, fi_info, gcc, make and ${goversion} already present"
else
	log "installed; libfabric ${version}, fi_info, gcc, make and ${goversion} present"
fi
