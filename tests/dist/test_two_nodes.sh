#!/usr/bin/env bash
# Two nodes for real, on one machine: two network namespaces joined by a veth pair are the nodes
# (10.99.0.1 and 10.99.0.2, each with a host name of its own), Open MPI's rsh launcher reaches the
# second through netns_agent.sh, and TCP between them is the only way a rank on one reaches a rank
# on the other. txl-train on 2 nodes x 2 ranks computes the run of 1 node x 4 ranks (within the
# rank-equivalence tolerances of tests/train/lib.sh); a checkpoint that the 2 nodes wrote
# continues bit for bit on 2 nodes and continues on 1 node, and one written on 1 node continues
# on 2. The log proves the layout: each rank's host, and the transport (btl) to every rank it met.
# Exits 77 (skipped) where namespaces cannot be made: it needs root, iproute2 and unshare.
# Usage: test_two_nodes.sh BIN_DIR SOURCE_DIR
source "$2/tests/train/lib.sh" "$1" "$2"
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "making network namespaces needs root"
command -v ip >/dev/null || skip "no ip (iproute2) to make network namespaces"
command -v unshare >/dev/null || skip "no unshare to give each node its host name"
command -v mpirun >/dev/null || { fail "mpirun not found"; finish; }
command -v h5diff >/dev/null || { fail "h5diff not found (apt-get install hdf5-tools)"; finish; }

# The nodes: a namespace each, named after this shell's pid so that runs side by side do not
# meet; the addresses exist only inside them, and nothing else is reachable from them.
NS=(txl-node1-$$ txl-node2-$$)
ADDR=(10.99.0.1 10.99.0.2)
VETH=(txl$$a txl$$b)
made=()
cleanup() {
  local ns p
  for ns in "${made[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true # takes its end of the veth pair, and so the pair, along
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
for i in 0 1; do
  ip netns add "${NS[i]}" 2>/dev/null || skip "cannot make a network namespace (ip netns add failed)"
  made+=("${NS[i]}")
done
ip link add "${VETH[0]}" type veth peer name "${VETH[1]}" 2>/dev/null || skip "cannot make a veth pair"
for i in 0 1; do
  ip link set "${VETH[i]}" netns "${NS[i]}"
  # IPv4 only where the kernel lets the namespace say so: no link-local IPv6 address on the veth
  ip netns exec "${NS[i]}" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' 2>/dev/null || true
  ip -n "${NS[i]}" addr add "${ADDR[i]}/24" dev "${VETH[i]}"
  ip -n "${NS[i]}" link set lo up
  ip -n "${NS[i]}" link set "${VETH[i]}" up
done
export TXL_NETNS_NODES="${ADDR[0]}=${NS[0]}=txl-node1 ${ADDR[1]}=${NS[1]}=txl-node2"
AGENT=$SRC/tests/dist/netns_agent.sh
[ "$("$AGENT" "${ADDR[1]}" hostname 2>/dev/null)" == txl-node2 ] \
  || skip "cannot enter a namespace with a host name of its own (unshare --uts failed)"
printf '%s slots=2\n' "${ADDR[@]}" > "$WORK/hosts"

make_corpus "$WORK/c.h5" 4000 300
ranks_ini "$WORK/c.h5" > "$WORK/eq.ini"
# One thread a rank: a node would otherwise take the machine's cores for its own 2 ranks. A
# checkpoint at step 15 (and the last, at 30) to continue from.
run_args=(--set run.threads=1 --set run.checkpoint_interval=15)

# on_two NAME ARGS...: mpirun ARGS (options, then the program) on 2 nodes x 2 ranks, stdout and
# stderr in $WORK/NAME.out and .err. mpirun runs on node 1 (logged in there through the agent, as
# on node 2), the daemons and ranks talk over the veth only, and spinning ranks yield: the 4 ranks
# share this machine's cores, which the hostfile's slots do not tell Open MPI.
on_two() {
  local name=$1
  shift
  local cmd=(exec mpirun --hostfile "$WORK/hosts" -n 4 --map-by ppr:2:node --bind-to none
             --mca plm rsh --mca ras ^slurm --mca plm_rsh_agent "$AGENT"
             --mca oob_tcp_if_include 10.99.0.0/24 --mca btl_tcp_if_include 10.99.0.0/24
             --mca mpi_yield_when_idle 1 "$@")
  timeout 300 "$AGENT" "${ADDR[0]}" "$(printf '%q ' "${cmd[@]}")" > "$WORK/$name.out" 2> "$WORK/$name.err"
}
two_opts=() # further options of two_train's mpirun
two_train() { # NAME ARGS...: txl-train ARGS on 2 nodes x 2 ranks into $WORK/NAME
  local name=$1
  shift
  on_two "$name" "${two_opts[@]}" "$BIN/txl-train" "$WORK/eq.ini" --set run.work_dir="$WORK/$name" "${run_args[@]}" \
    --dump-params "$WORK/$name.bin" "$@"
}
one_train() { # NAME ARGS...: the same on 1 node x 4 ranks (this machine as it is)
  local name=$1
  shift
  $MPI -n 4 "$BIN/txl-train" "$WORK/eq.ini" --set run.work_dir="$WORK/$name" "${run_args[@]}" \
    --dump-params "$WORK/$name.bin" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
}
ran() { # WHAT NAME COMMAND...: the command must succeed
  local what=$1 name=$2
  shift 2
  if "$@"; then ok "$what"; else cat "$WORK/$name.out" "$WORK/$name.err" | tail -n 30; fail "$what: failed"; fi
}

ran "1 node x 4 ranks: 30 steps" one one_train one
# the 2-node run with the byte transfer layer's choices in its log: one line for each rank a rank
# sends to, "[HOST:PID] mca: bml: Using BTL btl for send to [[JOB,1],RANK] on node NODE"
two_opts=(--mca btl_base_verbose 10)
ran "2 nodes x 2 ranks: 30 steps" two two_train two
two_opts=()

# The layout, from the log: ranks 0 and 1 on host txl-node1, 2 and 3 on txl-node2 (each rank's
# own line, "self", names it), shared memory (vader) to the rank on the same node and TCP to
# every rank met on the other, and each rank met one there.
if layout=$(python3 - "$WORK/two.err" <<'PY'
import re, sys
def fails(why):
    print(why)
    sys.exit(1)
line = re.compile(r"^\[([^:\]]+):(\d+)\] mca: bml: Using (\w+) btl for send to \[\[\d+,\d+\],(\d+)\]")
sends = [m.groups() for m in map(line.match, open(sys.argv[1])) if m]
rank_of = {(h, p): int(r) for h, p, btl, r in sends if btl == "self"}
host = {r: h for (h, _), r in rank_of.items()}
want = {0: "txl-node1", 1: "txl-node1", 2: "txl-node2", 3: "txl-node2"}
if host != want or len(rank_of) != 4:
    fails(f"ranks on hosts {host}, expected {want}")
across = set()
for h, p, btl, r in sends:
    me, peer = rank_of[(h, p)], int(r)
    if peer == me:
        continue
    expect = "vader" if host[me] == host[peer] else "tcp"
    if btl != expect:
        fails(f"rank {me} on {host[me]} sends to rank {peer} on {host[peer]} by {btl}, not {expect}")
    if btl == "tcp":
        across.add(me)
if across != set(want):
    fails(f"only ranks {sorted(across)} sent to the other node")
print("; ".join(f"rank {r}@{host[r]}" for r in sorted(host)) + f"; {len(sends)} sends chosen")
PY
); then
  ok "2 nodes: $layout, TCP across the nodes and shared memory within"
else
  fail "2 nodes: $layout"
fi
grep -q "^txl-train: 4 ranks x 1 thread on cpu (txl-node1)" "$WORK/two.out" \
  && ok "2 nodes: txl-train reports 4 ranks, rank 0 on txl-node1" || fail "2 nodes: no '4 ranks ... (txl-node1)' line"
# Without TCP the ranks of different nodes have no way to each other: the nodes share no memory.
if on_two noreach --mca btl self,vader "$BIN/txl-train" "$WORK/eq.ini" --set run.work_dir="$WORK/noreach" \
     --set run.threads=1; then
  fail "2 nodes without TCP: the run succeeded (the ranks of the two nodes shared memory)"
else
  grep -q "unable to reach each other" "$WORK/noreach.err" \
    && ok "2 nodes without TCP: Open MPI finds the ranks of the two nodes unable to reach each other" \
    || { tail -n 20 "$WORK/noreach.err"; fail "2 nodes without TCP: failed for another reason"; }
fi

# 2 x 2 against 1 x 4: the order of the sums across ranks may differ, within the tolerances
cmp_runs() { # WHAT RUN REF ARGS...
  local what=$1 run=$2 ref=$3 figures
  shift 3
  if figures=$(python3 "$SRC/tests/lib/compare_runs.py" "$WORK/$run" "$WORK/$ref" $TOL_LOSS_RANKS "$@" \
                 --params "$WORK/$run.bin" "$WORK/$ref.bin" $TOL_PARAM_RANKS); then
    ok "$what: $figures"
  else
    fail "$what: $figures"
  fi
}
cmp_runs "2 nodes x 2 ranks match 1 node x 4 ranks (losses of 30 steps, evaluations, final parameters)" \
  two one --train-steps 30

# The checkpoint of step 15 that the 2 nodes wrote (every rank its part, through MPI-IO over TCP)
ckpt2=$WORK/two/ckpt-00000015.h5
ckpt1=$WORK/one/ckpt-00000015.h5
[ -s "$ckpt2" ] && ok "2 nodes: checkpoint of step 15 written" || fail "2 nodes: no checkpoint of step 15"
# ... continues on 2 nodes bit for bit (same ranks, same layout: the project's resume guarantee)
ran "2 nodes resume the 2 nodes' checkpoint of step 15" again two_train again --resume "$ckpt2"
grep -q "resumed from .*two/ckpt-00000015.h5: step 15" "$WORK/again.out" && ok "2 nodes: resumed at step 15" \
  || fail "2 nodes: no resume message"
if [ "$(train_losses "$WORK/again")" == "$(train_losses "$WORK/two" | awk '$1 > 15')" ]; then
  ok "2 nodes, resumed: losses and gradient norms of steps 16-30 identical to the uninterrupted run"
else
  diff <(train_losses "$WORK/again") <(train_losses "$WORK/two" | awk '$1 > 15') | head || true
  fail "2 nodes, resumed: losses differ"
fi
cmp -s "$WORK/again.bin" "$WORK/two.bin" && ok "2 nodes, resumed: final parameters bit-identical" \
  || fail "2 nodes, resumed: final parameters differ"
same_state() { # A B: parameters and both Adam moments bit-identical in two checkpoints
  h5diff -q "$1" "$2" /params /params && h5diff -q "$1" "$2" /adam_m /adam_m && h5diff -q "$1" "$2" /adam_v /adam_v
}
same_state "$WORK/again/ckpt-00000030.h5" "$WORK/two/ckpt-00000030.h5" \
  && ok "2 nodes, resumed: parameters and Adam moments of the final checkpoints bit-identical" \
  || fail "2 nodes, resumed: final checkpoints differ"
# ... continues on 1 node, and 1 node's continues on 2 (the layout changes: within the tolerances)
ran "1 node resumes the 2 nodes' checkpoint of step 15" to_one one_train to_one --resume "$ckpt2"
cmp_runs "1 node, from the 2 nodes' step 15: steps 16-30 match 1 node's uninterrupted run" \
  to_one one --after-step 15 --train-steps 15
ran "2 nodes resume 1 node's checkpoint of step 15" to_two two_train to_two --resume "$ckpt1"
cmp_runs "2 nodes, from 1 node's step 15: steps 16-30 match 2 nodes' uninterrupted run" \
  to_two two --after-step 15 --train-steps 15
finish
