#!/usr/bin/env bash
# bench_cuda_kernels --count on a small config: the output parses (a table per precision and
# step), every table's total is the sum of its families, the GEMMs sit on the CUDA cores in fp32
# and on the tensor cores in tf32 and bf16, and the FFN's GEMM FLOPs equal the formula
#   training:   12 n_layer tokens d_model d_inner   (forward x W1, h W2: 2 x 2 T d di; backward:
#                                                    the weight and the input gradient of each: 4 x 2 T d di)
#   evaluation:  4 n_layer tokens d_model d_inner
# and every operand of every GEMM, weights and activations, lies on 16 bytes (pointer and leading
# dimension: the padded rows of TxlOps.row_align 8), and the optimizer's passes over the parameter
# buffer (Adam, the config's train.optim) move, in 3 launches:
#   the gradient's sum of squares in 2 (read g: 4 bytes a float of the span of the values: the buffer
#   but its trailing padding), then the fused pass (adam_fused) over the whole buffer: read p, g,
#   m, v (16), write p, m, v (12), zero g (4), write the bf16 copy of p (2; none in fp32 and tf32,
#   whose weights are their own copy): 36 bytes a float in fp32 and tf32, 38 in bf16 (before the
#   fusion: a zeroing pass, the sum of squares, Adam and to_act, 4 launches and 42 bytes in bf16)
#   test_count.sh BENCH_PROGRAM CONFIG.ini
set -euo pipefail
prog=$1
cfg=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$("$prog" --count "$cfg") || fail "$prog --count $cfg exited with status $?"

# the training shapes from the config itself (one rank: every column)
key() { sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p" "$cfg" | head -n 1; }
n_layer=$(key n_layer) d=$(key d_model) di=$(key d_inner) L=$(key tgt_len) B=$(key batch_size)
[[ -n $n_layer && -n $d && -n $di && -n $L && -n $B ]] || fail "$cfg lacks n_layer, d_model, d_inner, tgt_len or batch_size"
optim=$(sed -n "s/^[[:space:]]*optim[[:space:]]*=[[:space:]]*\([a-z]*\).*/\1/p" "$cfg" | head -n 1)
[[ -z $optim || $optim == adam ]] || fail "$cfg sets train.optim = $optim: the optimizer's bytes are checked for Adam's passes"

echo "$out" | awk -v nl="$n_layer" -v d="$d" -v di="$di" -v L="$L" -v B="$B" '
  function abs(x) { return x < 0 ? -x : x }
  function bad(msg) { print "FAIL: " msg > "/dev/stderr"; failed = 1; exit 1 }
  function close_table() {
    if (!in_table) return
    if (nfam != 11) bad(title ": " nfam " families, expected 11")
    if (!have_total) bad(title ": no total row")
    if (!have_attn) bad(title ": no attention line")
    if (!have_est) bad(title ": no ESTIMATE line")
    if (!have_align) bad(title ": no GEMM alignment line")
    if (train && !have_opt) bad(title ": no optimizer line")
    in_table = 0
  }
  /^-- / {
    close_table()
    title = $0; in_table = 1; nfam = 0; have_total = 0; have_attn = 0; have_est = 0; have_align = 0; have_opt = 0
    split($0, f, "|"); prec = f[2]; gsub(/ /, "", prec)
    train = index($0, "training step") > 0
    if (!match($0, /: [0-9]+ rows/)) bad(title ": no rows")
    rows = substr($0, RSTART + 2, RLENGTH - 7) + 0
    if (!match($0, /, [0-9]+ columns/)) bad(title ": no columns")
    cols = substr($0, RSTART + 2, RLENGTH - 10) + 0
    if (train && (rows != L || cols != B)) bad(title ": training shape " rows " x " cols ", the config says " L " x " B)
    for (i = 2; i <= 6; i++) sum[i] = 0
    tables++
    next
  }
  in_table && $1 == "family" { next }
  in_table && NF == 6 && $1 != "total" {
    if ($2 !~ /^[0-9]+$/) bad(title ": unparsable row: " $0)
    nfam++
    for (i = 2; i <= 6; i++) sum[i] += $i
    if ($1 ~ /^gemm_/ && $2 > 0) {
      if (prec == "fp32" && $3 != 0) bad(title ": " $1 " on tensor cores in fp32")
      if (prec != "fp32" && $4 != 0) bad(title ": " $1 " on CUDA cores in " prec)
    }
    if ($1 == "gemm_ffn") {
      want = (train ? 12 : 4) * nl * rows * cols * d * di / 1e9
      got = $3 + $4
      if (abs(got - want) > 2e-6 + 1e-9 * want) bad(title ": gemm_ffn " got " GFLOP, the formula gives " want)
      ffn_checked++
    }
    next
  }
  in_table && $1 == "total" {
    have_total = 1
    if ($2 != sum[2]) bad(title ": total launches " $2 " != the families sum " sum[2])
    for (i = 3; i <= 5; i++) if (abs($i - sum[i]) > 1e-5) bad(title ": total column " i " " $i " != the families sum " sum[i])
    if (abs($6 - sum[6]) > 1e-3) bad(title ": total estimate " $6 " != the families sum " sum[6])
    next
  }
  in_table && /^attention: [0-9.]+% of the step/ { have_attn = 1; next }
  # the rows of the weights and of the activations padded (TxlOps.row_align 8): every operand of every
  # GEMM on 16 bytes, pointer and leading dimension
  in_table && /^GEMM operands on 16 bytes/ {
    have_align = 1
    if (!match($0, /the weight in [0-9]+ of [0-9]+ calls/)) bad(title ": unparsable: " $0)
    split(substr($0, RSTART, RLENGTH), w, " ")
    if (w[6] + 0 == 0 || w[4] != w[6]) bad(title ": weight operands aligned in " w[4] " of " w[6] " GEMM calls")
    if (!match($0, /all three operands in [0-9]+ of [0-9]+ calls/)) bad(title ": unparsable: " $0)
    split(substr($0, RSTART, RLENGTH), a3, " ")
    if (a3[7] + 0 == 0 || a3[5] != a3[7]) bad(title ": all three operands aligned in " a3[5] " of " a3[7] " GEMM calls")
    aligned_checked++
    next
  }
  # the optimizer: sum of squares 4 bytes a float of the span of the values (2 launches: the partial
  # sums of chunks, then their sum and the clipping record), then the fused pass over the buffer (read
  # p, g, m, v 16, write p, m, v 12, zero g 4, the bf16 copy 2 in bf16), in 3 launches
  in_table && /^optimizer: / {
    have_opt = 1
    if (!train) bad(title ": an optimizer line in an evaluation table")
    if (!match($0, /: [0-9]+ bytes and [0-9]+ launches over the [0-9]+ floats of the parameter buffer \(its values span [0-9]+\)/))
      bad(title ": unparsable: " $0)
    split(substr($0, RSTART + 2, RLENGTH - 3), o, " ")
    total = o[8]; span = o[17]
    if (span > total || span < total - 128) bad(title ": the values span " span " of " total " floats")
    pass = 16 + 12 + 4 + (prec ~ /^bf16/ ? 2 : 0)
    want = 4 * span + pass * total
    if (o[1] != want) bad(title ": the optimizer moves " o[1] " bytes; the arithmetic gives 4 x " span " + " pass " x " total " = " want)
    if (o[4] != 3) bad(title ": the optimizer takes " o[4] " launches, expected 3 (sum of squares in 2, the fused pass)")
    opt_checked++
    next
  }
  in_table && /^ESTIMATE \(not measured\)/ { have_est = 1; next }
  END {
    if (failed) exit 1
    close_table()
    if (tables != 8) bad(tables " tables, expected 8 (fp32, tf32, bf16, bf16-fused; training, evaluation)")
    if (ffn_checked != 8) bad("gemm_ffn checked in " ffn_checked " tables")
    if (aligned_checked != 8) bad("GEMM alignment checked in " aligned_checked " tables")
    if (opt_checked != 4) bad("the optimizer checked in " opt_checked " training tables, expected 4")
    print "count: 8 tables parse, totals are the sums of their families, gemm_ffn matches the formula in each, every operand of every GEMM (weights and activations) on 16 bytes, the optimizer 4 bytes a float of the span of the values and 32 (fp32, tf32) or 34 (bf16, bf16-fused) a float of the buffer, in 3 launches"
  }'
