# A test cluster on one machine: each "host" a network namespace with its own
# address and hostname, joined to the others through a bridge by a veth pair
# (its link), shaped by tc. mpirun treats the addresses as hosts and starts one
# daemon in each through an rsh agent that enters the namespace, as ssh would
# enter a real host; the ranks then talk over the links. Sourced by a test after
# lib.sh; everything made is removed on exit, also when the test fails.
#
#   cluster_check         0 if namespaces can be made here, else prints
#                         "skipped: REASON" and returns 1 (a failure under CI)
#   cluster_up N          hosts 1..N; sets CL_ADDR[i], CL_NS[i], CL_IF[i] (host i's
#                         end of its link), CL_HOSTS (a1,..,aN), CL_MPI (mpirun and
#                         its options, ready for -np N CMD...), CL_PIN (a wrapper
#                         pinning rank r to core r mod cores: "$CL_PIN" cltrain ...)
#   cluster_shape RATE [DELAY]  every host's outgoing traffic at RATE (1gbit) after
#                         DELAY (0.5ms) one way; "cluster_shape off". The delay needs
#                         the kernel's netem (CL_NETEM=1): without it the link is
#                         shaped to RATE alone (tbf), with a note on stderr
#   cluster_cut I / cluster_mend I   host I's cable out / back in: the bridge's end
#                         of its link goes down, so packets vanish without an error
#   cluster_exec I CMD... CMD inside host I, under its hostname
#   cluster_down          removes it all (also run on exit)
#
# Names start with "clt" and the test's process id (interface names stay within
# Linux's 15 characters) and each cluster picks a /24 no interface uses, so tests
# may run in parallel; leftovers of a test that was killed are swept by the next.

CL_ID="clt$$"
CL_N=0
CL_NET=""
CL_ADDR=()
CL_NS=()
CL_IF=()
CL_MPI=()
CL_NETEM=0

cluster_check() {
  local why=""
  if [ "$(id -u)" -ne 0 ]; then
    why="network namespaces need root (CI runs as root)"
  elif ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    why="ip and tc missing (apt-get install iproute2)"
  elif ! command -v unshare >/dev/null || ! command -v taskset >/dev/null || ! command -v flock >/dev/null; then
    why="unshare, taskset or flock missing (util-linux)"
  elif ! command -v mpirun >/dev/null; then
    why="mpirun missing (apt-get install openmpi-bin)"
  elif ! ip netns add "${CL_ID}probe" 2>"$tmp/netns.err"; then
    why="ip netns add failed: $(head -1 "$tmp/netns.err")"
  fi
  ip netns del "${CL_ID}probe" 2>/dev/null
  [ -z "$why" ] && return 0
  if [ -n "${CI:-}" ]; then bad "a test cluster of network namespaces can be made ($why)"; else
    echo "skipped: $why"
  fi
  return 1
}

# Namespaces, bridges and links of tests whose process is gone.
cluster_sweep() {
  local name pid
  for name in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E '^clt[0-9]+h[0-9]+$'); do
    pid=${name#clt}
    pid=${pid%%h*}
    kill -0 "$pid" 2>/dev/null && continue
    ip netns pids "$name" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$name" 2>/dev/null
  done
  for name in $(ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | sed 's/@.*//' |
    grep -E '^clt[0-9]+[bp][0-9]*$'); do
    pid=${name#clt}
    pid=${pid%%[bp]*}
    kill -0 "$pid" 2>/dev/null || ip link del "$name" 2>/dev/null
  done
}

cluster_up() {
  local n=$1 i x lock
  exec {lock}>/tmp/cltrain-netns.lock
  flock "$lock"
  cluster_sweep
  for x in $(seq 1 250); do
    ip -o -4 addr | grep -q " 10\.213\.$x\." || break
  done
  CL_NET="10.213.$x"
  trap 'cluster_down; rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM
  ip link add "${CL_ID}b" type bridge &&
    ip addr add "$CL_NET.254/24" dev "${CL_ID}b" &&
    ip link set "${CL_ID}b" up || { flock -u "$lock"; return 1; }
  CL_N=$n
  # netem (delay) is a module some kernels lack; tbf (rate) is always there.
  CL_NETEM=0
  tc qdisc add dev "${CL_ID}b" root netem delay 1ms 2>/dev/null && CL_NETEM=1
  tc qdisc del dev "${CL_ID}b" root 2>/dev/null
  for i in $(seq 1 "$n"); do
    CL_NS[i]="${CL_ID}h$i"
    CL_IF[i]="${CL_ID}v$i"
    CL_ADDR[i]="$CL_NET.$i"
    ip netns add "${CL_NS[i]}" &&
      ip link add "${CL_IF[i]}" type veth peer name "${CL_ID}p$i" &&
      ip link set "${CL_ID}p$i" master "${CL_ID}b" up &&
      ip link set "${CL_IF[i]}" netns "${CL_NS[i]}" &&
      ip -n "${CL_NS[i]}" addr add "${CL_ADDR[i]}/24" dev "${CL_IF[i]}" &&
      ip -n "${CL_NS[i]}" link set "${CL_IF[i]}" up &&
      ip -n "${CL_NS[i]}" link set lo up || { flock -u "$lock"; return 1; }
  done
  flock -u "$lock"
  CL_HOSTS=$(
    IFS=,
    echo "${CL_ADDR[*]:1}"
  )
  # The agent mpirun calls as ssh ("AGENT [options] HOST COMMAND..."): the host's
  # namespace, with its own hostname.
  {
    echo '#!/bin/sh'
    echo 'while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done'
    echo 'host=$1; shift'
    echo "case \"\$host\" in"
    for i in $(seq 1 "$n"); do echo "  ${CL_ADDR[i]}) ns=${CL_NS[i]}; name=h$i ;;"; done
    echo '  *) echo "netns agent: unknown host $host" >&2; exit 255 ;;'
    echo 'esac'
    echo 'exec ip netns exec "$ns" unshare --uts /bin/sh -c '"'"'hostname "$0" && exec /bin/sh -c "$1"'"'"' "$name" "$*"'
  } >"$tmp/netns-agent"
  printf '#!/bin/sh\nexec taskset -c $(( ${OMPI_COMM_WORLD_RANK:-0} %% %s )) "$@"\n' "$(nproc)" >"$tmp/netns-pin"
  chmod +x "$tmp/netns-agent" "$tmp/netns-pin"
  CL_PIN="$tmp/netns-pin"
  CL_MPI=(mpirun --host "$CL_HOSTS" --bind-to none --mca plm_rsh_agent "$tmp/netns-agent"
    --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include "$CL_NET.0/24"
    --mca oob_tcp_if_include "$CL_NET.0/24")
  [ "$(id -u)" -eq 0 ] && CL_MPI+=(--allow-run-as-root)
  return 0
}

cluster_shape() {
  local i rate=$1 delay=${2:-} num bits burst
  if [ "$rate" != off ]; then
    num=${rate%%[a-z]*}
    case "${rate#"$num"}" in
      kbit) bits=$((num * 1000)) ;;
      mbit) bits=$((num * 1000000)) ;;
      gbit) bits=$((num * 1000000000)) ;;
      *) echo "cluster_shape: rate $rate: give kbit, mbit or gbit" >&2; return 1 ;;
    esac
    burst=$((bits / 8 / 1000)) # a millisecond's worth, at least a few TSO segments
    [ "$burst" -lt 262144 ] && burst=262144
  fi
  for i in $(seq 1 "$CL_N"); do
    tc -n "${CL_NS[i]}" qdisc del dev "${CL_IF[i]}" root 2>/dev/null
    [ "$rate" = off ] && continue
    if [ -n "$delay" ] && [ "$CL_NETEM" = 1 ]; then
      tc -n "${CL_NS[i]}" qdisc add dev "${CL_IF[i]}" root netem delay "$delay" rate "$rate" limit 100000 ||
        return 1
    else
      tc -n "${CL_NS[i]}" qdisc add dev "${CL_IF[i]}" root tbf rate "$rate" burst "$burst" latency 100ms ||
        return 1
    fi
  done
  if [ -n "$delay" ] && [ "$CL_NETEM" != 1 ] && [ "$rate" != off ]; then
    echo "note: this kernel has no netem qdisc: links shaped to $rate, without the added $delay delay" >&2
  fi
  return 0
}

cluster_cut() { ip link set "${CL_ID}p$1" down; }
cluster_mend() { ip link set "${CL_ID}p$1" up; }

cluster_exec() {
  local i=$1
  shift
  ip netns exec "${CL_NS[i]}" unshare --uts /bin/sh -c 'hostname "$0" && shift && exec "$@"' "h$i" _ "$@"
}

cluster_down() {
  local i
  for i in $(seq 1 "$CL_N"); do
    ip netns pids "${CL_NS[i]}" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "${CL_NS[i]}" 2>/dev/null
    ip link del "${CL_ID}p$i" 2>/dev/null
  done
  [ "$CL_N" -gt 0 ] && ip link del "${CL_ID}b" 2>/dev/null
  CL_N=0
  return 0
}
