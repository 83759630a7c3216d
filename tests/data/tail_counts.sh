#!/usr/bin/env bash
# The adaptive softmax's tail targets per segment, counted in the corpus at start (data/window_count.c
# through src/train/tail_cap.c), end to end on a corpus of Zipf-distributed ids:
#   - the counts `txl-train --check` prints for 1, 3 and 4 ranks (train.varlen: segments of up
#     to tgt_len + 15 rows; train.batch_chunk: column groups; uneven shards; the evaluation shape
#     over valid and test) equal a brute force in Python over the split's ids: per rank and column
#     group, every window of L_max consecutive target rows of the group's columns together, the
#     largest of any rank;
#   - the memory estimate with the counts is below the estimate of the worst-case sizing (every
#     target in the widest cluster: what --check prints when the corpus is not here), by the
#     difference of the tail logits it prints;
#   - a short training run (2 ranks, varlen, column groups, validation) prints the counts at start
#     and trains through them.
#   tail_counts.sh BIN_DIR CORPUS_TOOL WORKDIR PYTHON3
BIN=$1 TOOL=$2 WORK=$3 PY=${4:-}
. "$(dirname "$0")/lib.sh"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
if [ -z "$PY" ]; then
  echo "SKIPPED: every case (no python3 for the brute force)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

"$TOOL" make-zipf z.h5 30011 4001 3989 2000 11
for s in train valid test; do "$TOOL" ids z.h5 "$s" > "$s.ids"; done
cat > run.ini <<INI
[data]
corpus = $WORK/z.h5
[model]
$(small_model_shape)
cutoffs = 100,500
div_val = 2
[train]
tgt_len = 32
mem_len = 32
batch_size = 7
batch_chunk = 2
varlen = true
max_step = 6
lr = 0.003
log_interval = 2
eval_interval = 3
[eval]
eval_tgt_len = 24
eval_batch_size = 5
max_eval_steps = 4
[run]
work_dir = $WORK/run
INI

# brute RANKS: "training a, b; evaluation c, d" as --check prints them, from the ids
brute() {
  "$PY" - "$1" <<'PYEOF'
import sys
P = int(sys.argv[1])
cut = [100, 500, 2000]  # tail clusters [100, 500), [500, 2000)
ids = {s: [int(x) for x in open(s + ".ids")] for s in ("train", "valid", "test")}
def shard(B, r):
    base, extra = divmod(B, P)
    return base + (r < extra), r * base + min(r, extra)
def most(split, B_global, col0, B, window, groups):
    col_len = len(ids[split]) // B_global
    want = min(groups, B) if groups > 1 else 1
    gc = -(-B // want)
    best = [0, 0]
    for g0 in range(0, B, gc):
        cols = range(col0 + g0, col0 + min(B, g0 + gc))
        for k in range(2):
            # per target row (positions 1 .. col_len - 1): the group's ids of cluster k
            row = [sum(cut[k] <= ids[split][c * col_len + p] < cut[k + 1] for c in cols) for p in range(1, col_len)]
            for p in range(len(row)):  # every window [p, p + window), clipped at the end
                best[k] = max(best[k], sum(row[p:p + window]))
    return best
tr, ev = [0, 0], [0, 0]
for r in range(P):
    B, col0 = shard(7, r)
    tr = [max(a, b) for a, b in zip(tr, most("train", 7, col0, B, 32 + 15, 2))]
    B, col0 = shard(5, r)
    for s in ("valid", "test"):
        ev = [max(a, b) for a, b in zip(ev, most(s, 5, col0, B, 24, 1))]
print("training %d, %d; evaluation %d, %d" % (tr[0], tr[1], ev[0], ev[1]))
PYEOF
}
# bytes "12.3 MiB" / "1.20 GiB" -> a number of bytes
to_bytes() { "$PY" -c 'import sys; v, u = sys.argv[1].split(); print(float(v) * {"MiB": 2**20, "GiB": 2**30}[u])' "$1"; }
estimate() { sed -n 's/^memory per rank (estimate): \([0-9.]* [MG]iB\) on .*/\1/p' "$1"; }

for P in 1 3 4; do
  "$BIN/txl-train" run.ini --check --ranks "$P" > "c$P.out" 2>&1 || { cat "c$P.out"; fail "--check on $P ranks"; continue; }
  got=$(sed -n 's/^adaptive softmax: the most targets of each tail cluster in any segment of a rank: //p' "c$P.out")
  check_eq "$P rank(s): --check's tail counts as the brute force" "$got" "$(brute "$P")"
  "$BIN/txl-train" run.ini --check --ranks "$P" --set data.corpus="$WORK/absent.h5" --set data.n_token=2000 \
    > "w$P.out" 2>&1 || { cat "w$P.out"; fail "--check without the corpus on $P ranks"; continue; }
  counted=$(to_bytes "$(estimate "c$P.out")")
  worst=$(to_bytes "$(estimate "w$P.out")")
  tail_w=$(sed -n 's/^adaptive softmax tail logits (in the above): \([0-9.]* [MG]iB\), sized as if every.*/\1/p' "w$P.out")
  tail_c=$(sed -n 's/^adaptive softmax tail logits (in the above): \([0-9.]* [MG]iB\), sized by the most .*(\([0-9.]* [MG]iB\) if every.*/\1|\2/p' "c$P.out")
  if [ -n "$tail_w" ] && [ "${tail_c#*|}" = "$tail_w" ] && "$PY" -c "import sys; sys.exit(0 if $counted < $worst else 1)"; then
    ok "$P rank(s): estimate $(estimate "c$P.out") with the counts, $(estimate "w$P.out") without (tail logits ${tail_c%|*} against $tail_w)"
  else
    fail "$P rank(s): estimate $(estimate "c$P.out") with the counts, $(estimate "w$P.out") without: $(grep tail "c$P.out" "w$P.out")"
  fi
done

timeout 300 mpirun --oversubscribe --bind-to none -n 2 "$BIN/txl-train" run.ini > train.out 2>&1 \
  || { cat train.out; fail "training on 2 ranks"; finish; }
got=$(sed -n 's/^adaptive softmax: the most targets of each tail cluster in any segment (counted .*: training \(.*\) of [0-9]*; evaluation \(.*\) of [0-9]*$/training \1; evaluation \2/p' train.out)
check_eq "2 ranks: the counts printed at start as the brute force" "$got" "$(brute 2)"
grep -q '"kind": *"test"' run/metrics.jsonl && ok "2 ranks: trained 6 steps with validation and test" \
  || fail "no test line in metrics.jsonl"
finish
