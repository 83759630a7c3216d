#!/usr/bin/env bash
# A run directory on a full disk (small tmpfs mounts) or with a file-size limit: every write of
# the run is checked. Full at start: one error naming config.ini, and no config.ini half written.
# metrics.jsonl on a disk that fills while training: the run stops at the step whose line failed,
# with one error naming metrics.jsonl and the reason, after trying a checkpoint (written where
# there is room, and the run resumes from it), and metrics.jsonl ends in a complete line.
# 1 and 2 ranks.
#
# The disk that fills is a second tmpfs that holds only metrics.jsonl (work_dir/metrics.jsonl is
# a link to it): a checkpoint attempted on a file system without a single free byte crashes in
# HDF5 at exit (src/checkpoint: HDF5 1.10 cannot close a file whose superblock it could not
# write), which is not what this test is about; work_dir keeps a few pages free, too few for the
# checkpoint.
source "$(dirname "$0")/lib.sh" "$1" "$2"
MNT=$WORK/mnt
LOGS=$WORK/logs
mkdir -p "$MNT" "$LOGS"
if ! mount -t tmpfs -o size=256k tmpfs "$MNT" 2> "$WORK/mount.err"; then
  echo "SKIPPED: cannot mount a tmpfs here ($(head -1 "$WORK/mount.err")): the full-disk cases need root"
  exit 77
fi
trap 'umount "$MNT" "$LOGS" 2>/dev/null; rm -rf "$WORK"' EXIT
mount -t tmpfs -o size=8k tmpfs "$LOGS" || { fail "cannot mount a second tmpfs"; finish; }
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.max_step=400 > "$WORK/r.ini"
# fill DIR PAGES: leaves exactly PAGES free pages (of 4 KiB: tmpfs gives every file whole pages,
# and a directory none) on the tmpfs DIR, after removing what the last case left there
fill() {
  rm -rf "${1:?}"/*
  local free
  free=$(stat -f -c %a "$1")
  [ "$free" -gt "$2" ] && dd if=/dev/zero of="$1/filler" bs=4096 count=$((free - $2)) status=none
  [ "$(stat -f -c %a "$1")" -eq "$2" ] || fail "$1 has $(stat -f -c %a "$1") pages free, not $2"
}
# metrics_ok FILE: every line is complete, strict JSON (no NaN, no half line); prints the train steps
metrics_ok() { python3 - "$1" <<'PY'
import json, sys
data = open(sys.argv[1]).read()
assert data.endswith("\n"), "the last line is cut short"
def no_constant(c):
    raise ValueError("not JSON: " + c)
rows = [json.loads(l, parse_constant=no_constant) for l in data.splitlines()]
print(" ".join(str(r["step"]) for r in rows if r["kind"] == "train"))
PY
}

for P in 1 2; do
  # full at start: room for the lock file and the first metrics line (a page each), none for
  # config.ini
  fill "$MNT" 2
  expect_error_line "P=$P: a full disk at start: an error naming config.ini" \
    "mnt/run/config.ini: cannot write: No space left on device" -- \
    $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$MNT/run"
  [ ! -e "$MNT/run/config.ini" ] && ! ls "$MNT/run" | grep -q tmp && ok "P=$P: no config.ini and no temporary left" \
    || { ls -l "$MNT/run"; fail "P=$P: a config.ini or a temporary was left"; }

  # metrics.jsonl fills its disk (2 pages: about 35 lines); work_dir has room for the lock file,
  # config.ini and 2 pages, not for a checkpoint (about 0.5 MiB)
  fill "$MNT" 4
  fill "$LOGS" 2
  mkdir -p "$MNT/run" && ln -s "$LOGS/metrics.jsonl" "$MNT/run/metrics.jsonl"
  rc=0
  $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$MNT/run" > "$WORK/full$P.out" 2> "$WORK/full$P.err" || rc=$?
  step=$(sed -n 's/.*mnt\/run\/metrics.jsonl: cannot write: No space left on device; stopped after step \([0-9]*\), no checkpoint of it either: checkpoint not written (this run has written none yet): .*No space left on device$/\1/p' "$WORK/full$P.err")
  if [ $rc -eq 1 ] && [ "$(grep -c '^txl: error:' "$WORK/full$P.err")" -eq 1 ] && [ -n "$step" ]; then
    ok "P=$P: metrics.jsonl on a full disk: one error ($(cat "$WORK/full$P.err"))"
  else
    cat "$WORK/full$P.err"; tail -3 "$WORK/full$P.out"; fail "P=$P: full disk while training (status $rc)"
  fi
  steps=$(metrics_ok "$LOGS/metrics.jsonl") && ok "P=$P: metrics.jsonl ends in a complete line, all strict JSON" \
    || fail "P=$P: metrics.jsonl is damaged"
  # the step whose line failed is the last one trained: the run did not go on without its record
  [ -n "$step" ] && [ "$steps" = "$(seq -s ' ' 1 $((step - 1)))" ] \
    && ok "P=$P: stopped at step $step, whose line failed; steps 1 to $((step - 1)) are logged" \
    || fail "P=$P: logged steps ${steps##* } vs stopped after step $step"
  ! ls "$MNT/run" | grep -Eq 'tmp|ckpt' && ok "P=$P: no checkpoint and no temporary left" || { ls "$MNT/run"; fail "P=$P: junk left"; }

  # the same with room for the checkpoint (work_dir on the scratch disk): the stop writes it, and
  # the run resumes from it
  fill "$LOGS" 2
  w=$WORK/room$P
  mkdir -p "$w" && ln -s "$LOGS/metrics.jsonl" "$w/metrics.jsonl"
  rc=0
  $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$w" > "$WORK/room$P.out" 2> "$WORK/room$P.err" || rc=$?
  step=$(sed -n 's/.*metrics.jsonl: cannot write: No space left on device; stopped after step \([0-9]*\), the checkpoint of step \1 is written: resume from it once the file can be written$/\1/p' "$WORK/room$P.err")
  [ $rc -eq 1 ] && [ -n "$step" ] && [ "$(grep -c '^txl: error:' "$WORK/room$P.err")" -eq 1 ] \
    && [ "$(cat "$w/latest")" = "$(printf 'ckpt-%08d.h5' "$step")" ] \
    && ok "P=$P: with room for it, the checkpoint of step $step is written ($(cat "$WORK/room$P.err"))" \
    || { cat "$WORK/room$P.err"; ls "$w"; fail "P=$P: checkpoint on a log failure (status $rc)"; }
  steps=$(metrics_ok "$LOGS/metrics.jsonl") && [ "$steps" = "$(seq -s ' ' 1 $((step - 1)))" ] \
    && ok "P=$P: metrics.jsonl complete up to step $((step - 1))" || fail "P=$P: metrics.jsonl with room for the checkpoint"
  rm "$w/metrics.jsonl"
  $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$w" --resume "$w" --set train.max_step=$((step + 2)) \
    > "$WORK/room$P.out" 2>&1 && grep -q "resumed from .*ckpt-0*$step.h5: step $step" "$WORK/room$P.out" \
    && ok "P=$P: with room again the run resumes from step $step" || { cat "$WORK/room$P.out"; fail "P=$P: resume"; }
done
finish
