#!/usr/bin/env bash
# Two "machines" on one: the distributed tests at 2 ranks over the route a hostfile takes, with
# one rank on each side of a network link. What it builds:
#
#   namespace h0: lo, veth0 10.77.0.1/24  <-- veth pair -->  namespace h1: lo, veth1 10.77.0.2/24
#     mpirun (the first machine), rank 0                       orted (the second machine), rank 1
#
# Two Linux network namespaces joined by a veth pair stand in for two hosts on a LAN. mpirun runs
# in h0 with the hostfile "10.77.0.1 slots=1" and "10.77.0.2 slots=1": 10.77.0.1 is its own
# address, so rank 0 starts there; for 10.77.0.2 it starts Open MPI's daemon (orted) through its
# remote shell, here a small agent that enters h1 with the environment emptied as ssh would, in
# place of `ssh 10.77.0.2`. The daemon calls mpirun back over the veth, and the ranks exchange
# their messages over it with the TCP transport (pml ob1, btl tcp,self: no shared memory, and the
# two ranks sit on different nodes as Open MPI sees them). Why: ranks on one node never take this
# route, even over TCP on the loopback; here a daemon is started by a remote shell, each side picks
# its address by btl_tcp_if_include, and every message crosses a link whose bytes are counted. It
# stands in for, on two machines:
#
#   mpirun --hostfile hosts -np 2 --mca pml ob1 --mca btl tcp,self \
#          --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
#          -x OPENBLAS_NUM_THREADS build/tests/xgrad_distributed_tests
#
# The test passes when mpirun exits 0 and the veth carried at least MIN_BYTES each way (the
# counters are printed). Namespaces need root or CAP_NET_ADMIN and iproute2's `ip`: without them
# it exits 77, which ctest reports as skipped. The namespaces, and the veth with them, are removed
# on exit.
# Usage: two_hosts.sh path/to/xgrad_distributed_tests MPIRUN [OPTIONS...]
set -euo pipefail
tests=$1
shift
mpirun=("$@")
MIN_BYTES=1000000  # the tests send some MB each way; the daemons and the wire-up some KB

h0=xgrad$$h0 h1=xgrad$$h1
tmp=$(mktemp -d)
cleanup() {
    ip netns del "$h0" 2>/dev/null || true
    ip netns del "$h1" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

if ! command -v ip >/dev/null; then
    echo "SKIP: no 'ip' command (Debian package iproute2)"
    exit 77
fi
if ! ip netns add "$h0" 2>"$tmp/err" || ! ip netns add "$h1" 2>>"$tmp/err"; then
    echo "SKIP: cannot create network namespaces (needs root or CAP_NET_ADMIN): $(cat "$tmp/err")"
    exit 77
fi
ip link add veth0 netns "$h0" type veth peer name veth1 netns "$h1"
ip -n "$h0" addr add 10.77.0.1/24 dev veth0
ip -n "$h1" addr add 10.77.0.2/24 dev veth1
for ns in "$h0" "$h1"; do ip -n "$ns" link set lo up; done
ip -n "$h0" link set veth0 up
ip -n "$h1" link set veth1 up

# Open MPI's remote shell: called as "agent HOST COMMAND...", as it would call ssh.
cat > "$tmp/agent" <<EOF
#!/bin/sh
[ "\$1" = 10.77.0.2 ] || { echo "agent: unknown host \$1" >&2; exit 1; }
shift
exec ip netns exec $h1 env -i PATH="\$PATH" /bin/sh -c "\$*"
EOF
chmod +x "$tmp/agent"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' > "$tmp/hosts"

# Bytes received and sent by veth1 (h1's end): every byte between the ranks crosses it.
counters() { ip netns exec "$h1" cat /sys/class/net/veth1/statistics/rx_bytes /sys/class/net/veth1/statistics/tx_bytes | paste -sd' '; }
read -r rx0 tx0 < <(counters)

# The agent empties the environment, as ssh does: name what the ranks in h1 need with -x.
forward=()
for v in OPENBLAS_NUM_THREADS ASAN_OPTIONS UBSAN_OPTIONS; do
    if [ -n "${!v+set}" ]; then forward+=(-x "$v"); fi
done

rc=0
start=$SECONDS
timeout 240 ip netns exec "$h0" "${mpirun[@]}" --hostfile "$tmp/hosts" -np 2 \
    --mca plm_rsh_agent "$tmp/agent" --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    "${forward[@]}" "$tests" || rc=$?
read -r rx1 tx1 < <(counters)
echo "veth1 (rank 1's host): received $((rx1 - rx0)) bytes, sent $((tx1 - tx0)) bytes in $((SECONDS - start)) s"
ip -n "$h1" -s link show dev veth1

if [ "$rc" -eq 124 ]; then echo "FAIL: no exit within 240 s (a hang?)"; exit 1; fi
if [ "$rc" -ne 0 ]; then echo "FAIL: mpirun exit status $rc"; exit 1; fi
if [ $((rx1 - rx0)) -lt "$MIN_BYTES" ] || [ $((tx1 - tx0)) -lt "$MIN_BYTES" ]; then
    echo "FAIL: fewer than $MIN_BYTES bytes each way crossed the veth: the ranks did not talk over it"
    exit 1
fi
echo "PASS: 2 ranks in 2 network namespaces, over TCP across the veth"
