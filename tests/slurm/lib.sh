# Shared by the slurm/ tests: a private one-node SLURM on localhost (its own munged, slurmctld and
# slurmd, all state in the test's scratch folder, stopped when the test exits). Usage, after
# tests/train/lib.sh: source tests/slurm/lib.sh; start_slurm [slurm.conf line ...] (extra lines
# replace the defaults of the same key). Exits 77 (skipped) without SLURM or munge.
for c in slurmctld slurmd munged sbatch scontrol scancel sinfo srun; do
  command -v "$c" >/dev/null || PATH=$PATH:/usr/sbin:/sbin
  command -v "$c" >/dev/null || { echo "SKIPPED: SLURM not installed ($c not found; apt-get install slurmctld slurmd slurm-client munge)"; exit 77; }
done
S=$WORK/slurm
pids=()
cleanup() {
  local rc=$?  # the test's own status: the clean-up below must not change it (set -e applies here)
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
logs() { for f in munged.log slurmctld.log slurmd.log; do echo "--- $f"; tail -n 25 "$S/$f" 2>/dev/null; done; }
die() { fail "$*"; logs; finish; exit 1; }

# the value of KEY in the extra lines, else DEFAULT
conf_line() { # KEY DEFAULT EXTRA...
  local key=$1 def=$2 l
  shift 2
  for l in "$@"; do [ "${l%%=*}" = "$key" ] && { echo "$l"; return; }; done
  echo "$key=$def"
}

# A port P such that P and P+1 are both free on this host, for slurmctld and slurmd. Searched
# below Linux's ephemeral range (32768 up by default), where no connect() or bind(0) of another
# process (mpirun's TCP wire-up, say) is handed a port, starting from a place that depends on
# this shell's pid. A fixed formula alone (20000 + pid % 20000) collides: two tests started one
# after the other get consecutive pids, so one's slurmd port is the other's slurmctld port, and
# sinfo then talks to a daemon with another munge key and hangs.
free_port_pair() {
  python3 - "$$" <<'PY'
import socket, sys
lo, hi = 20000, 32766
start = lo + (int(sys.argv[1]) * 2) % (hi - lo)
def free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False
    finally:
        s.close()
for i in range(0, hi - lo, 2):
    p = lo + (start - lo + i) % (hi - lo)
    if free(p) and free(p + 1):
        print(p)
        sys.exit(0)
sys.exit(1)
PY
}

start_slurm() { # [KEY=VALUE ...]: slurm.conf lines that replace the defaults
  mkdir -p "$S/state" "$S/spool" "$S/munge"
  chmod 700 "$S" "$S/munge"
  # munge: own key, socket, pid, log
  dd if=/dev/urandom of="$S/munge/key" bs=1024 count=1 2>/dev/null
  chmod 400 "$S/munge/key"
  munged --foreground --force --key-file="$S/munge/key" --socket="$S/munge/sock" \
    --pid-file="$S/munge/pid" --log-file="$S/munged.log" --seed-file="$S/munge/seed" > "$S/munged.stdout" 2>&1 &
  pids+=($!)
  local port
  port=$(free_port_pair) || die "no free pair of TCP ports for slurmctld and slurmd in 20000-32766"
  cat > "$S/slurm.conf" <<CONF
ClusterName=txltest
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge/sock
$(conf_line ProctrackType proctrack/linuxproc "$@")
TaskPlugin=task/none
$(conf_line MpiDefault none "$@")
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobRequeue=1
ReturnToService=2
$(conf_line KillWait 10 "$@")
MinJobAge=600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=500 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$S/slurm.conf
  for _ in $(seq 50); do [ -S "$S/munge/sock" ] && break; sleep 0.1; done
  [ -S "$S/munge/sock" ] || die "munged did not start"
  slurmctld -D -c -f "$S/slurm.conf" > "$S/slurmctld.stdout" 2>&1 &
  pids+=($!)
  slurmd -D -N localhost -f "$S/slurm.conf" > "$S/slurmd.stdout" 2>&1 &
  pids+=($!)
  local state="" t0=$SECONDS
  while [ $((SECONDS - t0)) -lt 30 ]; do
    state=$(timeout 5 sinfo -h -n localhost -o %T 2>"$S/sinfo.err" || true)
    [ "$state" = idle ] && break
    sleep 0.5
  done
  [ "$state" = idle ] && ok "private SLURM up on ports $port-$((port + 1)): node localhost idle" \
    || die "node not idle after $((SECONDS - t0)) s (state '$state'; sinfo: $(tail -n 1 "$S/sinfo.err"))"
}

# The state of job JOB once it has ended (COMPLETED, FAILED, CANCELLED, ...), waiting up to SECONDS.
wait_job_end() { # JOB SECONDS
  local j="" i
  for i in $(seq $(($2 * 2))); do
    j=$(scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $j in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED) break ;; esac
    sleep 0.5
  done
  echo "$j"
}
