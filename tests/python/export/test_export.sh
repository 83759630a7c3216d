#!/usr/bin/env bash
# txl-export (python -m txl.export): small runs of several configurations are exported to the
# original Transformer-XL's MemTransformerLM layout; orig_layout.py (a model written from the
# original's conventions, not from txl's) loads each state_dict strictly and evaluates a split with
# memory, and its mean loss must be txl-eval's. Names, shapes, order and ties against a table of
# the original's constructors; models the original cannot express, and bad input, refused in one
# line with no OUT.pt left behind.
#   test_export.sh BIN_DIR SOURCE_DIR
source "$(dirname "$0")/../../train/lib.sh" "$1" "$2"
py=/usr/bin/python3
if ! "$py" -c 'import torch, h5py, numpy' 2>/dev/null; then
  echo "SKIPPED: torch, h5py and numpy are not all installed for $py"
  exit 77
fi
export PYTHONPATH=$SRC/python
LAYOUT="$SRC/tests/python/export/orig_layout.py"

# Tolerance, relative, for orig_layout.py's mean loss against txl-eval's (both float32, different
# summation orders and kernels):
#  - txl-eval prints the loss with 6 decimals: up to 5e-7 nats off, under 1.5e-7 relative at ~3.5;
#  - each side's per-token loss is within ~1e-6 nats of the exact one at these logits' scale
#    (test_interop.sh's derivation for the reference model, the same arithmetic: d_model 32,
#    logits of a few nats); the mean over the scored tokens is off by no more than the largest
#    per-token error even with every error of one sign: two sides ~2e-6 nats, with the rounding
#    ~2.5e-6 nats, ~7e-7 relative at a loss of ~3.5.
# 5e-6 relative leaves a 7x margin. The control below shows that a wrong mapping falls outside it
# even on these barely trained models, whose attention is still nearly uniform: q and k swapped
# must move the loss by more than 10 x RTOL.
RTOL=5e-6
make_corpus "$WORK/c.h5" 1500 120

# run NAME KEY=VALUE...: 30 steps of a 2-layer model of width 32 (model.* keys added) into $WORK/NAME
run() {
  local name=$1
  shift
  ini_sections data.corpus="$WORK/c.h5" model.n_layer=2 model.d_model=32 model.n_head=2 model.d_head=16 \
    model.d_inner=64 model.dropout=0.1 train.tgt_len=16 train.mem_len=16 train.batch_size=4 train.max_step=30 \
    train.lr=0.003 train.log_interval=30 train.eval_interval=0 eval.final_test=false eval.max_eval_steps=1 eval.eval_tgt_len=12 \
    run.work_dir="$WORK/$name" run.checkpoint_interval=0 "$@" > "$WORK/$name.ini"
  "$BIN/txl-train" "$WORK/$name.ini" > "$WORK/$name.train" 2>&1
}

# case NAME EVAL_ARGS -- KEY=VALUE...: train, export, check the layout, evaluate on both sides
case_() {
  local name=$1 ev=$2
  shift 3
  if ! run "$name" "$@"; then fail "$name: training failed: $(tail -n 2 "$WORK/$name.train")"; return; fi
  if ! "$py" -m txl.export "$WORK/$name" "$WORK/$name.pt" --json "$WORK/$name.json" > "$WORK/$name.exp" 2>&1; then
    fail "$name: export failed: $(cat "$WORK/$name.exp")"
    return
  fi
  if "$py" "$LAYOUT" check "$WORK/$name.pt" "$WORK/$name.json" > "$WORK/$name.chk" 2>&1; then
    ok "$name: $(tail -n 1 "$WORK/$name.chk")"
  else
    fail "$name: layout: $(head -c 600 "$WORK/$name.chk")"
  fi
  # txl-eval and orig_layout.py with the same evaluation settings (all given, none defaulted)
  local -a e=($ev)
  local txl ours
  txl=$("$BIN/txl-eval" "$WORK/$name" --split valid --threads 1 "${e[@]}" 2>&1 | sed -n 's/.*: loss \([0-9.]*\) nats.*/\1/p' || true)
  ours=$("$py" "$LAYOUT" eval "$WORK/$name.pt" "$WORK/$name.json" "$WORK/c.h5" --split valid "${e[@]}" 2>&1 \
         | sed -n 's/^loss //p' || true)
  if [ -z "$txl" ] || [ -z "$ours" ]; then
    fail "$name: no loss (txl-eval '$txl', orig_layout '$ours')"
  elif "$py" -c "import sys; t, o = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(t - o) > $RTOL * abs(t))" \
       "$txl" "$ours"; then
    ok "$name: the original's layout gives loss $ours, txl-eval $txl (within $RTOL relative)"
  else
    fail "$name: the original's layout gives loss $ours, txl-eval $txl (over $RTOL relative)"
  fi
}

EV="--tgt-len 12 --mem-len 20 --batch-size 3 --max-segments 30 --clamp-len -1"
case_ rel_softmax "$EV" -- model.tie_weight=true
case_ rel_clamp_same "--tgt-len 10 --mem-len 14 --batch-size 2 --max-segments 30 --clamp-len 9 --same-length" \
  -- model.tie_weight=false model.same_length=true
case_ rel_adaptive_div2_pre "$EV" -- model.pre_lnorm=true model.cutoffs=10,30 model.div_val=2 model.d_embed=16 \
  model.tie_projs=true
case_ rel_adaptive_div1_untied "$EV" -- model.cutoffs=12 model.div_val=1 model.d_embed=24 model.tie_projs=false \
  model.tie_weight=false
case_ rel_adaptive_div1_tied "$EV" -- model.cutoffs=8,20 model.d_embed=24 model.tie_projs=true
case_ shaw "--tgt-len 12 --mem-len 30 --batch-size 3 --max-segments 30 --clamp-len 20" -- model.attn_type=shaw \
  model.pre_lnorm=true
case_ abs_sin "$EV" -- model.attn_type=abs_sin
case_ abs_learned "--tgt-len 12 --mem-len 16 --batch-size 3 --max-segments 30 --clamp-len -1" \
  -- model.attn_type=abs_learned model.cutoffs=10 model.div_val=2

# the control: q and k swapped in the exported qkv_net (a wrong split) must change the loss
if [ -f "$WORK/rel_softmax.pt" ]; then
  "$py" - "$WORK/rel_softmax.pt" "$WORK/swapped.pt" <<'PY'
import sys, torch
sd = torch.load(sys.argv[1])
for k in [k for k in sd if k.endswith("qkv_net.weight")]:
    q, kk, v = sd[k].chunk(3, 0)
    sd[k] = torch.cat([kk, q, v], 0)
torch.save(sd, sys.argv[2])
PY
  good=$("$py" "$LAYOUT" eval "$WORK/rel_softmax.pt" "$WORK/rel_softmax.json" "$WORK/c.h5" $EV | sed -n 's/^loss //p')
  bad=$("$py" "$LAYOUT" eval "$WORK/swapped.pt" "$WORK/rel_softmax.json" "$WORK/c.h5" $EV | sed -n 's/^loss //p')
  if "$py" -c "import sys; g, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(g - b) <= 10 * $RTOL * g)" "$good" "$bad"
  then ok "control: q and k swapped give loss $bad, not $good (over 10 x $RTOL relative)"
  else fail "control: q and k swapped give loss $bad, the export $good: the comparison cannot see a wrong split"; fi
fi

# models the original's PyTorch MemTransformerLM computes differently or cannot hold
run untie model.untie_r=true || fail "untie: training failed"
expect_error "attn_type 0 with untie_r" "untie_r" "shared by all layers" -- \
  "$py" -m txl.export "$WORK/untie" "$WORK/untie.pt"
run abs_pre model.attn_type=abs_sin model.pre_lnorm=true || fail "abs_pre: training failed"
expect_error "attn_type 2 with pre_lnorm" "pre_lnorm" "query" -- "$py" -m txl.export "$WORK/abs_pre" "$WORK/abs_pre.pt"
[ ! -e "$WORK/untie.pt" ] && [ ! -e "$WORK/abs_pre.pt" ] && ok "refused: no OUT.pt written" \
  || fail "a refused export left an OUT.pt"

# bad input: one line, non-zero exit, nothing written (an OUT.pt already there stays as it was)
expect_error "no such checkpoint" "$(re_quote "$WORK/nothing.h5")" "no such file" -- \
  "$py" -m txl.export "$WORK/nothing.h5" "$WORK/x.pt"
ckpt="$WORK/rel_softmax/$(cat "$WORK/rel_softmax/latest")"
cp "$ckpt" "$WORK/damaged.h5"
"$py" -c "
import sys; f = open(sys.argv[1], 'r+b'); f.seek(40000); b = f.read(1); f.seek(40000); f.write(bytes([b[0] ^ 1]))" \
  "$WORK/damaged.h5"
echo "an older export" > "$WORK/kept.pt"
expect_error "a damaged checkpoint" "$(re_quote "$WORK/damaged.h5")" "damaged" -- \
  "$py" -m txl.export "$WORK/damaged.h5" "$WORK/kept.pt" --json "$WORK/kept.json"
[ "$(cat "$WORK/kept.pt")" = "an older export" ] && [ ! -e "$WORK/kept.json" ] \
  && [ -z "$(ls "$WORK" | grep '\.tmp')" ] && ok "damaged: OUT.pt untouched, no JSON, no temporary left" \
  || fail "damaged: OUT.pt changed or files left behind"
"$BIN/txl-prep" --mode byte --quiet --train "$WORK/train.txt" --valid "$WORK/valid.txt" --test "$WORK/test.txt" \
  --out "$WORK/other.h5"
expect_error "a corpus of another vocabulary" "vocabulary" "$(re_quote "$WORK/other.h5")" -- \
  "$py" -m txl.export "$WORK/rel_softmax" "$WORK/y.pt" --corpus "$WORK/other.h5"
# the JSON's vocabulary gives back every token's bytes, by id (byte mode: 128 of them are not UTF-8)
if run bytes data.corpus="$WORK/other.h5" && "$py" -m txl.export "$WORK/bytes" "$WORK/bytes.pt" \
     --json "$WORK/bytes.json" > "$WORK/bytes.exp" 2>&1; then
  for pair in "rel_softmax c.h5" "bytes other.h5"; do
    set -- $pair
    if msg=$("$py" - "$WORK/$1.json" "$WORK/$2" <<'PY'
import json, sys
from txl.corpus import read_vocabulary
j, v = json.load(open(sys.argv[1]))["vocab"], read_vocabulary(sys.argv[2])
back = [bytes.fromhex(j["non_utf8"][str(i)]) if str(i) in j["non_utf8"] else s.encode("utf-8")
        for i, s in enumerate(j["symbols"])]
assert back == v.tokens and j["size"] == len(v) and j["digest"] == v.digest(), "the tokens differ"
assert all(s == t.decode("utf-8", "backslashreplace") for s, t in zip(j["symbols"], v.tokens))
print("%d symbols, %d not UTF-8" % (len(back), len(j["non_utf8"])))
PY
    ); then ok "$1: the JSON's vocabulary gives back the corpus's tokens: $msg"
    else fail "$1: the JSON's vocabulary is not the corpus's: $msg"; fi
  done
else
  fail "bytes: training or export failed: $(tail -n 2 "$WORK/bytes.train" "$WORK/bytes.exp" 2>/dev/null)"
fi
"$py" -m txl.export --help > "$WORK/help.txt" 2>&1
for opt in --json --corpus --best CKPT OUT.pt; do
  grep -q -- "$opt" "$WORK/help.txt" || fail "--help does not name $opt"
done
ok "--help names every option"
finish
