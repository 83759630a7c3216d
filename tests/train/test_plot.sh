#!/usr/bin/env bash
# scripts/plot-metrics.py on a real run folder: three PNG files (checked by their signature and
# size), also with null figures; two runs compared in one PNG; a missing folder, a damaged metrics
# line, a run with no steps and two runs without --out are one-line errors.
source "$(dirname "$0")/lib.sh" "$1" "$2"
PY=/usr/bin/python3
PLOT="$SRC/scripts/plot-metrics.py"
make_corpus "$WORK/c.h5" 2000 100
{ small_model_ini "$WORK/c.h5"; cat <<INI
[train]
tgt_len = 16
mem_len = 16
batch_size = 4
max_step = 30
log_interval = 5
eval_interval = 10
[eval]
eval_batch_size = 2
[run]
work_dir = $WORK/run
INI
} > "$WORK/run.ini"
"$BIN/txl-train" "$WORK/run.ini" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training failed"; finish; }
"$PY" "$PLOT" "$WORK/run" --out "$WORK/plots" || fail "plot-metrics failed"
for f in loss lr throughput; do
  png="$WORK/plots/$f.png"
  if [ -f "$png" ] && [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
     [ "$(stat -c %s "$png")" -gt 10000 ]; then
    ok "$f.png: a PNG of $(stat -c %s "$png") bytes"
  else
    fail "$f.png missing or not a PNG"
  fi
done
# null figures (NaN or an infinity in the run: the last train line and the last validation) are
# gaps, not errors
mkdir -p "$WORK/nulls"
python3 - "$WORK/run/metrics.jsonl" "$WORK/nulls/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last_train = max(i for i, r in enumerate(rows) if r["kind"] == "train")
last_valid = max(i for i, r in enumerate(rows) if r["kind"] == "valid")
for i, keys in ((last_train, ("loss", "bpc", "grad_norm", "tokens_per_s")), (last_valid, ("loss", "bpc"))):
    rows[i].update({k: None for k in keys})
with open(sys.argv[2], "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
PY
if "$PY" "$PLOT" "$WORK/nulls" > "$WORK/nulls.out" 2>&1 && [ -s "$WORK/nulls/loss.png" ] && [ -s "$WORK/nulls/throughput.png" ]; then
  ok "null figures: the plots are written"
else
  tail -3 "$WORK/nulls.out"; fail "null figures"
fi
perr() { # NAME PATTERN ARGS...: plot-metrics must fail with one error line matching PATTERN
  local name=$1 pattern=$2; shift 2
  if "$PY" "$PLOT" "$@" > /dev/null 2> "$WORK/err.txt"; then fail "$name: exit status 0"
  elif [ "$(grep -c '^plot-metrics: error:' "$WORK/err.txt")" -ne 1 ] || ! grep -Eq "$pattern" "$WORK/err.txt"; then
    fail "$name: $(cat "$WORK/err.txt")"
  else ok "$name ($(cat "$WORK/err.txt"))"; fi
}
# two runs compared: one PNG of both (the second a copy of the first with every loss + 0.5)
mkdir -p "$WORK/shifted"
python3 - "$WORK/run/metrics.jsonl" "$WORK/shifted/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    if r["kind"] in ("train", "valid") and r.get("loss") is not None:
        r["loss"] += 0.5
with open(sys.argv[2], "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
PY
if "$PY" "$PLOT" "$WORK/run" "$WORK/shifted" --out "$WORK/cmp" > "$WORK/cmp.out" 2>&1 &&
   [ "$(head -c 8 "$WORK/cmp/compare.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
   [ "$(stat -c %s "$WORK/cmp/compare.png")" -gt 10000 ] && [ ! -e "$WORK/cmp/loss.png" ]; then
  ok "two runs: compare.png, a PNG of $(stat -c %s "$WORK/cmp/compare.png") bytes"
else
  cat "$WORK/cmp.out"; fail "two runs: no compare.png"
fi
perr "two runs without --out" "give --out DIR" "$WORK/run" "$WORK/shifted"
mkdir -p "$WORK/nosteps2" && grep -v '"kind": "train"' "$WORK/run/metrics.jsonl" > "$WORK/nosteps2/metrics.jsonl"
perr "two runs, one without steps" "nosteps2/metrics.jsonl: no training steps" "$WORK/run" "$WORK/nosteps2" --out "$WORK/cmp2"
perr "missing folder" "nowhere/metrics.jsonl: No such file" "$WORK/nowhere"
mkdir -p "$WORK/bad" && { head -n 3 "$WORK/run/metrics.jsonl"; echo '{"kind": "train", "step": 1'; } > "$WORK/bad/metrics.jsonl"
perr "damaged line" "metrics.jsonl: line 4 is not JSON" "$WORK/bad"
mkdir -p "$WORK/nosteps" && grep -v '"kind": "train"' "$WORK/run/metrics.jsonl" > "$WORK/nosteps/metrics.jsonl"
perr "no training steps" "no training steps logged" "$WORK/nosteps"
finish
