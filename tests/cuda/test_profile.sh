#!/usr/bin/env bash
# txl-train-emu --bench --profile (the device profile, kernels/cuda/profile.h): on the emulator,
# for the small model in several configurations (precisions, adaptive input and softmax with
# div_val 2, batch_chunk 2, attn_type shaw, SGD, LAMB, 2 ranks):
#   - the table parses: every family of kernels/profile.h once, in order, then the total, whose
#     calls, launches, issued launches and synchronisations are the sums of the rows, and whose
#     shares add up to 100% (each printed to 0.1%: within 0.05% a row);
#   - the launches counted from the shapes (kernels/cuda/count_ops.c) are, op by op, those the
#     emulator saw the host issue ("the same in every op"), and all of them together are the
#     step's launches of the bench's own count: the profile sees every launch of the step;
#   - the host synchronisations in the ops are the bench's count less the profile's own wait at
#     the end of each step (1): none but fp16's 2 (its dynamic loss scaling reads the record and
#     the loss after every step) and LAMB's (its trust ratios are taken on the host);
#   - the FFN's GEMMs are 6 calls a layer (forward W1 with its epilogue and W2; backward the
#     weight's and the input's gradient of each), the attention 1 forward and 1 backward a layer,
#     per column group;
#   - with 2 ranks the all-reduce's wait is a row of its own (no call, time spent);
#   - the loss of the last step is the same with and without --profile (the profile only watches).
# Then the refusals: --profile without --bench, and on the CPU backend.
#   test_profile.sh BIN_DIR
set -euo pipefail
BIN=$1
source "$(dirname "$0")/../lib/checks.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/txl-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
N_LAYER=2
small_cuda_bench_ini "$WORK/small.ini"
FAMILIES="attn_fwd attn_bwd gemm_ffn gemm_proj gemm_io embedding layernorm elementwise dropout softmax_xent grad_norm optimizer allreduce upload other"

# profile NAME RANKS GROUPS WANT_SYNCS [--set ...]   (WANT_SYNCS "some": more than 0)
profile() {
  local name=$1 ranks=$2 groups=$3 want_syncs=$4
  shift 4
  local run=("$BIN/txl-train-emu" "$WORK/small.ini" --bench 2 --bench-warmup 1 --set run.cuda_graph=off "$@")
  # several ranks: the emulated node has as many GPUs (TXL_EMU_GPUS), one a rank
  (( ranks == 1 )) || run=(env TXL_EMU_GPUS="$ranks" timeout 300 mpirun --oversubscribe --bind-to none -n "$ranks" "${run[@]}")
  local out plain
  if ! out=$("${run[@]}" --profile 2>&1); then
    fail "$name: --profile exited non-zero: $(tail -n 3 <<< "$out")"
    return
  fi
  plain=$("${run[@]}" 2>&1) || { fail "$name: the run without --profile exited non-zero"; return; }
  local loss_p loss
  loss_p=$(grep -oE '^bench: .*\| loss [0-9.]+' <<< "$out" | grep -oE '[0-9.]+$' || true)
  loss=$(grep -oE '^bench: .*\| loss [0-9.]+' <<< "$plain" | grep -oE '[0-9.]+$' || true)
  if [[ -n $loss && $loss == "$loss_p" ]]; then ok "$name: the last step's loss $loss with and without --profile"
  else fail "$name: loss '$loss_p' with --profile, '$loss' without"; fi

  local per_step launches syncs
  per_step=$(grep -E '^bench: per step: ' <<< "$out" || true)
  if [[ $per_step =~ ^bench:\ per\ step:\ ([0-9]+)\ kernel\ launches,\ ([0-9]+)\ host\ synchronisations ]]; then
    launches=${BASH_REMATCH[1]} syncs=${BASH_REMATCH[2]}
  else
    fail "$name: no constant 'per step' line: $per_step"
    return
  fi
  if grep -qE '^profile: launches counted from the shapes against those the emulator saw: the same in every op$' <<< "$out"
  then ok "$name: every op's counted launches are those the emulator saw"
  else fail "$name: $(grep -E '^profile: launches counted' <<< "$out" || echo 'no launch comparison line')"; fi

  # the rows: family ms share% host_ms calls launches tensor_TF core_TF GB/s roofline% issued syncs
  local table
  table=$(grep -E '^profile: [a-z_]+ +[0-9.]+ +[0-9.]+% ' <<< "$out" | sed 's/^profile: //; s/%//g' || true)
  local got_names
  got_names=$(awk '{ print $1 }' <<< "$table" | tr '\n' ' ')
  check_eq "$name: the families in order, then the total" "$got_names" "$FAMILIES total "
  local sums
  sums=$(awk -v launches="$launches" -v syncs="$syncs" -v layers="$N_LAYER" -v groups="$groups" -v ranks="$ranks" '
    function bad(m) { print m; failed = 1 }
    $1 != "total" {
      share += $3; calls += $5; counted += $6; issued += $11; sync += $12; n++
      row[$1] = $0; c[$1] = $5; ms[$1] = $2
      next
    }
    {
      if ($5 != calls || $6 != counted || $11 != issued || $12 != sync)
        bad("the total row " $0 " is not the sum of the rows (calls " calls ", launches " counted ", issued " issued ", syncs " sync ")")
      if (share < 100 - 0.05 * n || share > 100 + 0.05 * n) bad("the shares add up to " share "%")
      if (counted != launches) bad(counted " launches counted in the ops, the step launched " launches)
      if (sync + 1 != syncs) bad(sync " synchronisations in the ops, the step made " syncs " (the profile waits once)")
      if (c["gemm_ffn"] != 6 * layers * groups) bad(c["gemm_ffn"] " FFN GEMM calls, expected 6 x " layers " layers x " groups)
      if (c["attn_fwd"] != layers * groups || c["attn_bwd"] != layers * groups)
        bad(c["attn_fwd"] " + " c["attn_bwd"] " attention calls, expected " layers * groups " each")
      if (c["allreduce"] != 0) bad("calls in the all-reduce row")
      if (ranks > 1 && ms["allreduce"] <= 0) bad("no time in the all-reduce with " ranks " ranks")
      if (!failed) print "ok " sync
      done = 1
    }
    END { if (!done) print "no total row" }' <<< "$table")
  if [[ $sums == "ok "* ]]; then
    ok "$name: totals are the sums; $launches launches a step, all counted; ${sums#ok } synchronisations in the ops"
    if [[ $want_syncs == some ]]; then
      if (( ${sums#ok } > 0 )); then ok "$name: the host waits in the step's ops (${sums#ok } times)"
      else fail "$name: no host synchronisation in the step's ops"; fi
    else
      check_eq "$name: host synchronisations in the step's ops" "${sums#ok }" "$want_syncs"
    fi
  else
    fail "$name: $sums"
  fi
}

profile "fp32" 1 1 0
profile "bf16" 1 1 0 --set run.precision=bf16
profile "fp16, dynamic loss scaling" 1 1 2 --set run.precision=fp16
profile "tf32" 1 1 0 --set run.precision=tf32
profile "adaptive input and softmax, div_val 2" 1 1 0 --set model.cutoffs=100,300 --set model.div_val=2
profile "batch_chunk 2" 1 2 0 --set train.batch_chunk=2
profile "attn_type shaw" 1 1 0 --set model.attn_type=shaw
profile "sgd" 1 1 0 --set train.optim=sgd
# LAMB takes each tensor's trust ratio on the host: it waits for the device in the update
profile "lamb" 1 1 some --set train.optim=lamb
if command -v mpirun > /dev/null; then
  profile "2 ranks" 2 1 0
else
  echo "2 ranks: not run here (no mpirun)"
fi

expect_error "--profile without --bench" 'give --bench too' -- "$BIN/txl-train-emu" "$WORK/small.ini" --profile
expect_error "--profile on the CPU" 'has no device profile' -- \
  "$BIN/txl-train-emu" "$WORK/small.ini" --bench 1 --profile --set run.device=cpu
finish
