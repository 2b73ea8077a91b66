#!/usr/bin/env bash
# The test cluster (netns.sh) itself: hosts with their own addresses and names,
# mpirun starting one rank in each pinned to its own core, shaped links, a cut
# that stops traffic and a mend that restores it, and nothing left behind when
# the test ends, also when it is killed.
#   test_netns.sh
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"
cluster_check || skip_exit

cluster_up 2 || { bad "cluster_up 2"; finish; exit 1; }
ok "two hosts: $CL_HOSTS"
out=$(timeout 60 "${CL_MPI[@]}" -np 2 "$CL_PIN" sh -c \
  'echo "rank $OMPI_COMM_WORLD_RANK $(hostname) $(ip -o -4 addr show scope global | awk "{print \$4}") $(taskset -pc $$ | sed "s/.*: //")"' 2>"$tmp/mpirun.err" | sort)
cores=$(nproc)
want="rank 0 h1 ${CL_ADDR[1]}/24 0
rank 1 h2 ${CL_ADDR[2]}/24 $((1 % cores))"
if [ "$out" = "$want" ]; then ok "mpirun: one rank a host, its own name, address and core"; else
  bad "mpirun: one rank a host, its own name, address and core (got: $out)"; fi

cluster_shape 1gbit 0.5ms 2>"$tmp/shape.err" || bad "cluster_shape 1gbit"
if tc -n "${CL_NS[2]}" qdisc show dev "${CL_IF[2]}" | grep -Eq "(tbf|netem).*1Gbit"; then ok "links shaped to 1 Gbit/s"; else
  bad "links shaped to 1 Gbit/s ($(tc -n "${CL_NS[2]}" qdisc show dev "${CL_IF[2]}"))"; fi
cluster_shape off

# A listener on host 2; host 1 connects with bash's /dev/tcp.
reach() { cluster_exec 1 timeout 3 bash -c "echo hi >/dev/tcp/${CL_ADDR[2]}/7777" 2>/dev/null; }
cluster_exec 2 timeout 30 python3 -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7777))
s.listen(8)
while True:
    s.accept()[0].close()
' &
listener=$!
sleep 0.5
if reach; then ok "host 1 reaches host 2"; else bad "host 1 reaches host 2"; fi
cluster_cut 2
if reach; then bad "a cut link stops traffic"; else ok "a cut link stops traffic"; fi
cluster_mend 2
for _ in $(seq 1 20); do reach && break; sleep 0.5; done
if reach; then ok "a mended link carries it again"; else bad "a mended link carries it again"; fi
kill "$listener" 2>/dev/null
wait 2>/dev/null

# A test killed midway leaves nothing: a cluster made by a child that is then
# killed with SIGTERM is removed by its exit trap.
bash -c ". '$(dirname "$0")/lib.sh'; . '$(dirname "$0")/netns.sh'; cluster_up 2 && echo up && { sleep 60 & wait \$!; }" >"$tmp/child.txt" 2>&1 &
child=$!
for _ in $(seq 1 50); do grep -q up "$tmp/child.txt" && break; sleep 0.2; done
made=$(ip netns list | grep -c "^clt${child}h")
kill -TERM "$child"
wait "$child" 2>/dev/null
left=$(ip netns list | grep -c "^clt${child}h")
links=$(ip -o link | grep -c "clt${child}[bp]")
if [ "$made" -eq 2 ] && [ "$left" -eq 0 ] && [ "$links" -eq 0 ]; then ok "a killed test leaves no namespace or link"; else
  bad "a killed test leaves no namespace or link (made $made, left $left namespaces, $links links)"; fi

cluster_down
if [ "$(ip netns list | grep -c "^$CL_ID")" -eq 0 ]; then ok "cluster_down removes the hosts"; else bad "cluster_down removes the hosts"; fi
finish
