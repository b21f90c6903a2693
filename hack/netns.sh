#!/usr/bin/env bash
# hack/netns.sh — several hosts on one machine, in network namespaces.
#
# A topology NAME is HOSTS network namespaces NAME-h1 … NAME-hN (the hosts)
# and one more, NAME-sw, holding a bridge br0 (the switch). Host i has one
# interface, eth0, a veth whose other end is port hi of the bridge, and the
# address 10.77.0.i/24; loopback is up in every namespace. The addresses
# exist only inside the namespaces: nothing is added to the machine's own
# network, and deleting the namespaces deletes every veth with them.
#
# Faults go on a host's cable: a qdisc on either end of it, the host's eth0
# or the switch's port to the host (delay, loss, rate; a queue on the port
# is a bottleneck in the switch, which the sender's TCP cannot keep short
# the way it keeps its own host's queue short), random loss in the switch
# (nftables, for kernels without sch_netem), and the link state of the
# switch port (a pulled cable: the host keeps its address and routes, its
# packets go nowhere).
#
# Usage (as root; NAME is letters, digits, '.', '_', '-'):
#   hack/netns.sh check                    can this machine do it? (exit 0 if so)
#   hack/netns.sh up NAME [HOSTS]          create NAME with HOSTS hosts (2-9, default 3)
#                                          and print "hI NAMESPACE ADDRESS" per host
#   hack/netns.sh down NAME                remove NAME; succeeds when nothing is left
#   hack/netns.sh hosts NAME               print "hI NAMESPACE ADDRESS" per host
#   hack/netns.sh exec NAME I CMD [ARG…]   run CMD on host I (ip netns exec)
#   hack/netns.sh link NAME I up|down      set host I's switch port up or down
#   hack/netns.sh qdisc NAME I none        remove host I's root qdisc
#   hack/netns.sh qdisc NAME I KIND [ARG…] set host I's root qdisc on eth0, e.g.
#                                            qdisc NAME 1 netem delay 5ms loss 1%
#   hack/netns.sh drops NAME I             packets host I's root qdisc dropped
#   hack/netns.sh port-qdisc NAME I none|KIND [ARG…]
#                                          the same on the switch's port to host I,
#                                            where what the switch sends host I queues
#   hack/netns.sh port-drops NAME I        packets that port's root qdisc dropped
#   hack/netns.sh gso NAME I on|off        let host I's kernel hand eth0 packets of up
#                                            to 64 KB (on, the default) or only single
#                                            frames (off; for connections opened after),
#                                            so that a packet lost on the way is one frame
#   hack/netns.sh loss NAME I PCT          drop PCT % (0.01-100, two decimals) of
#                                            the frames crossing host I's cable, either
#                                            way, at random; replaces host I's rule
#   hack/netns.sh loss NAME I none         remove host I's loss rule
#   hack/netns.sh lost NAME I              "DROPPED SEEN": frames host I's loss rule
#                                            dropped, of those it saw
#   hack/netns.sh list                     names of the topologies that exist
#   hack/netns.sh prune                    remove topologies named netio-PID-…
#                                          whose process PID is gone
#
# The Go tests in tests/netns name their topologies netio-PID-N, so that
# `prune` can clear what a killed test run left behind without touching a
# run still going. Example by hand:
#
#   hack/netns.sh up demo 2
#   hack/netns.sh exec demo 2 bin/netio-perf server --listen 10.77.0.2:5000 &
#   hack/netns.sh exec demo 1 bin/netio-perf client --connect 10.77.0.2:5000
#   hack/netns.sh down demo
#
# Needs bash, iproute2 (ip, tc) and a kernel with network namespaces, veth
# and bridge support; netem delay/loss needs sch_netem as well, and loss
# needs nft (nftables) and a kernel with nf_tables for bridges and numgen.
# A loss rule is an nftables table in the switch's namespace, so it goes
# with the topology; nothing is added to the machine's own ruleset.
set -euo pipefail

readonly SUBNET=10.77.0 # host i is ${SUBNET}.i/24
readonly MAX_HOSTS=9
readonly NETNS_DIR=/var/run/netns # where ip netns add puts a namespace's name

prog=${0##*/}

die() {
	printf '%s: %s\n' "${prog}" "$*" >&2
	exit 1
}

usage() {
	sed -n '/^# Usage/,/^# The Go tests/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

# valid_name rejects names that are not safe as namespace names.
valid_name() {
	[[ $1 =~ ^[A-Za-z0-9._-]{1,40}$ ]] || die "bad topology name '$1' (letters, digits, '.', '_', '-'; at most 40)"
}

# host_ns prints the namespace of host $2 of topology $1 after checking
# both.
host_ns() {
	valid_name "$1"
	[[ $2 =~ ^[1-9]$ ]] || die "bad host number '$2' (1-${MAX_HOSTS})"
	namespaces "$1" | grep -qx -- "$1-h$2" || die "no host $2 in topology $1"
	printf '%s-h%s' "$1" "$2"
}

# namespaces prints the namespaces of topology $1, or of every topology.
# It reads the directory `ip netns` keeps them in: `ip netns list` also
# asks the kernel about each one and complains about those another
# process is deleting meanwhile.
namespaces() {
	local re='.+'
	[[ $# -gt 0 ]] && re=$(printf '%s' "$1" | sed 's/[.]/\\./g')
	[[ -d ${NETNS_DIR} ]] || return 0
	find "${NETNS_DIR}" -mindepth 1 -maxdepth 1 -printf '%f\n' | grep -E -- "^(${re})-(sw|h[1-9])$" || true
}

cmd_check() {
	[[ ${EUID} -eq 0 ]] || die "not root: creating network namespaces needs root"
	command -v ip >/dev/null || die "ip not found: install iproute2"
	local probe="netio-check-$$" problem=""
	ip netns add "${probe}" || die "ip netns add failed: network namespaces are not usable here"
	if ! ip -n "${probe}" link add vp0 type veth peer name vp1; then
		problem="cannot create a veth pair (kernel without veth?)"
	elif ! ip -n "${probe}" link add br0 type bridge; then
		problem="cannot create a bridge (kernel without bridge?)"
	fi
	ip netns del "${probe}"
	[[ -z ${problem} ]] || die "${problem}"
}

cmd_up() {
	[[ $# -ge 1 && $# -le 2 ]] || usage
	local name=$1 hosts=${2:-3}
	valid_name "${name}"
	[[ ${hosts} =~ ^[0-9]+$ && ${hosts} -ge 2 && ${hosts} -le ${MAX_HOSTS} ]] ||
		die "bad host count '${hosts}' (2-${MAX_HOSTS})"
	[[ -z $(namespaces "${name}") ]] || die "topology ${name} exists already: run '${prog} down ${name}' first"

	# Whatever fails half-way, leave nothing behind.
	trap 'cmd_down "${name}" >/dev/null 2>&1' ERR
	local sw="${name}-sw"
	ip netns add "${sw}"
	ip -n "${sw}" link set lo up
	ip -n "${sw}" link add br0 type bridge # STP off: ports forward at once
	ip -n "${sw}" link set br0 up
	local i ns
	for ((i = 1; i <= hosts; i++)); do
		ns="${name}-h${i}"
		ip netns add "${ns}"
		ip -n "${ns}" link set lo up
		# Both ends are created inside namespaces, so no interface ever
		# appears in the machine's own namespace, even for a moment.
		ip -n "${ns}" link add eth0 type veth peer name "h${i}" netns "${sw}"
		ip -n "${sw}" link set "h${i}" master br0
		ip -n "${sw}" link set "h${i}" up
		ip -n "${ns}" addr add "${SUBNET}.${i}/24" dev eth0
		ip -n "${ns}" link set eth0 up
	done
	trap - ERR
	cmd_hosts "${name}"
}

cmd_down() {
	[[ $# -eq 1 ]] || usage
	valid_name "$1"
	local ns
	for ns in $(namespaces "$1"); do
		# Another down may have removed it meanwhile: only what is left counts.
		ip netns del "${ns}" 2>/dev/null || true
	done
	[[ -z $(namespaces "$1") ]] || die "could not remove: $(namespaces "$1" | tr '\n' ' ')"
}

cmd_hosts() {
	[[ $# -eq 1 ]] || usage
	valid_name "$1"
	local ns i
	for ns in $(namespaces "$1" | grep -- '-h[1-9]$' | sort); do
		i=${ns##*-h}
		printf 'h%s %s %s.%s\n' "${i}" "${ns}" "${SUBNET}" "${i}"
	done
}

cmd_exec() {
	[[ $# -ge 3 ]] || usage
	local ns
	ns=$(host_ns "$1" "$2")
	shift 2
	exec ip netns exec "${ns}" "$@"
}

cmd_link() {
	[[ $# -eq 3 && ($3 == up || $3 == down) ]] || usage
	host_ns "$1" "$2" >/dev/null
	ip -n "$1-sw" link set "h$2" "$3"
}

# set_qdisc sets the root qdisc of device $2 in namespace $1 to the rest
# of the arguments, or removes it when they are "none".
set_qdisc() {
	local ns=$1 dev=$2
	shift 2
	if [[ $1 == none ]]; then
		# Deleting the default qdisc fails; there is nothing to remove then.
		ip netns exec "${ns}" tc qdisc del dev "${dev}" root 2>/dev/null || true
		return
	fi
	ip netns exec "${ns}" tc qdisc replace dev "${dev}" root "$@"
}

# qdisc_drops prints how many packets the root qdisc of device $2 in
# namespace $1 dropped.
qdisc_drops() {
	# " Sent 123 bytes 4 pkt (dropped 5, overlimits 6 requeues 0)"
	ip netns exec "$1" tc -s qdisc show dev "$2" root |
		awk '/dropped/ { sub(",", "", $7); print $7; exit }'
}

cmd_qdisc() {
	[[ $# -ge 3 ]] || usage
	local ns
	ns=$(host_ns "$1" "$2")
	shift 2
	set_qdisc "${ns}" eth0 "$@"
}

cmd_drops() {
	[[ $# -eq 2 ]] || usage
	local ns
	ns=$(host_ns "$1" "$2")
	qdisc_drops "${ns}" eth0
}

cmd_port_qdisc() {
	[[ $# -ge 3 ]] || usage
	host_ns "$1" "$2" >/dev/null
	local sw="$1-sw" port="h$2"
	shift 2
	set_qdisc "${sw}" "${port}" "$@"
}

cmd_port_drops() {
	[[ $# -eq 2 ]] || usage
	host_ns "$1" "$2" >/dev/null
	qdisc_drops "$1-sw" "h$2"
}

cmd_gso() {
	[[ $# -eq 3 && ($3 == on || $3 == off) ]] || usage
	local ns segs=65535 # the kernel's default for a veth
	ns=$(host_ns "$1" "$2")
	# TCP takes the limit from the device when a connection starts. With
	# one segment a packet it never builds a 64 KB GSO packet, which a drop
	# on the way would lose whole: some 44 frames at once.
	[[ $3 == off ]] && segs=1
	ip -n "${ns}" link set dev eth0 gso_max_segs "${segs}"
}

need_nft() {
	command -v nft >/dev/null || die "nft not found: install nftables"
}

# loss_table prints the name of host $1's loss table in the switch.
loss_table() {
	printf 'netio_loss_h%s' "$1"
}

# has_loss_table reports whether the switch of topology $1 has host $2's
# loss table. nft 1.0.6 has no "destroy": ask first, so that a missing
# table is not taken for a failure.
has_loss_table() {
	ip netns exec "$1-sw" nft list table bridge "$(loss_table "$2")" >/dev/null 2>&1
}

# basis_points prints percentage $1 (0.01-100, two decimals at most) in
# hundredths of a percent, the unit of the loss rule's random numbers; it
# dies on anything else.
basis_points() {
	local bad="bad percentage '$1' (0.01-100, two decimals at most; none removes the rule)"
	[[ $1 =~ ^([0-9]{1,3})(\.([0-9]{1,2}))?$ ]] || die "${bad}"
	local frac="${BASH_REMATCH[3]}00"
	local bp=$((10#${BASH_REMATCH[1]} * 100 + 10#${frac:0:2}))
	((bp >= 1 && bp <= 10000)) || die "${bad}"
	printf '%d' "${bp}"
}

cmd_loss() {
	[[ $# -eq 3 ]] || usage
	host_ns "$1" "$2" >/dev/null
	need_nft
	local sw="$1-sw" port="h$2" table
	table=$(loss_table "$2")
	if [[ $3 == none ]]; then
		if has_loss_table "$1" "$2"; then
			ip netns exec "${sw}" nft delete table bridge "${table}"
		fi
		return
	fi
	local bp
	bp=$(basis_points "$3")
	# One transaction: adding the table first lets the delete succeed when
	# there was none, so a rule is replaced, never doubled. The bridge
	# family's forward hook sees every frame the switch passes from one
	# port to another; each direction has its rule, which counts the
	# frames it sees, then those it drops: a random number in 0-9999 at
	# most bp-1 is bp in 10000 (the right side may not exceed 9999).
	ip netns exec "${sw}" nft -f - <<END
table bridge ${table}
delete table bridge ${table}
table bridge ${table} {
	chain forward {
		type filter hook forward priority 0; policy accept;
		iifname "${port}" counter numgen random mod 10000 <= $((bp - 1)) counter drop
		oifname "${port}" counter numgen random mod 10000 <= $((bp - 1)) counter drop
	}
}
END
}

cmd_lost() {
	[[ $# -eq 2 ]] || usage
	host_ns "$1" "$2" >/dev/null
	need_nft
	has_loss_table "$1" "$2" || die "no loss rule on host $2 of topology $1"
	# 'iifname "h2" counter packets 7378 bytes 10962888 numgen random mod
	# 10000 <= 99 counter packets 65 bytes 94668 drop': the first counter
	# is the frames the rule saw, the second those it dropped.
	ip netns exec "$1-sw" nft list table bridge "$(loss_table "$2")" |
		awk '/numgen/ {
			n = 0
			for (i = 1; i < NF; i++) {
				if ($i != "packets") continue
				if (++n == 1) seen += $(i + 1); else dropped += $(i + 1)
			}
		}
		END { printf "%d %d\n", dropped, seen }'
}

# topologies prints the name of every topology.
topologies() {
	namespaces | sed -E 's/-(sw|h[1-9])$//' | sort -u
}

cmd_list() {
	[[ $# -eq 0 ]] || usage
	topologies
}

cmd_prune() {
	[[ $# -eq 0 ]] || usage
	local name pid
	for name in $(topologies); do
		[[ ${name} =~ ^netio-([0-9]+)- ]] || continue
		pid=${BASH_REMATCH[1]}
		if ! kill -0 "${pid}" 2>/dev/null; then
			printf '%s: removing %s (process %s is gone)\n' "${prog}" "${name}" "${pid}" >&2
			cmd_down "${name}"
		fi
	done
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd=$1
	shift
	case ${cmd} in
	check | up | down | hosts | exec | link | qdisc | drops | port-qdisc | port-drops | gso | loss | lost | list | prune)
		"cmd_${cmd//-/_}" "$@"
		;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
