#!/usr/bin/env bash
# The one command to run on the first machine with an NVIDIA GPU. Writes one report folder and
# ends with a summary table of what passed, failed, ran in part or was skipped (and why). The steps come in
# the order of what a short lease of a GPU should see first:
#   1. device      nvidia-smi, and every GPU's properties (nvidia-smi -q)
#   2. build       txl for the GPUs at hand (TXL_CUDA_ARCHITECTURES=native) into build-gpu/;
#                  with TXL_PREBUILT=1, the build already in $TXL_BUILD (default build-gpu/) is
#                  used as it is (a node without compilers or headers, given a build made elsewhere)
#   3. profile     txl-train --bench --profile of ref_base and of wt103_base (one GPU's share of
#                  its 8-rank run: 8 columns) in bf16: the device profile's table per op family,
#                  printed here as well as logged (profile.log), and each step's time uncaptured
#                  (run.cuda_graph = off) and as the run would take it (auto)
#   4. cuda-tests  scripts/test-cuda.sh: every ctest of label "cuda" (the kernels against the CPU
#                  ops, a whole step, txl-train / txl-eval / txl-generate on the GPU, and with two
#                  GPUs two ranks through NCCL: tests/cuda/test_train.sh), then the table of the
#                  largest error of every check
#   5. bench       scripts/bench-gpu.sh: every kernel, whole steps in fp32 / TF32 / bf16, PyTorch
#   6. sanitizers  each CUDA test program under compute-sanitizer: memcheck, racecheck, synccheck,
#                  initcheck (when compute-sanitizer exists), each run at most
#                  $TXL_SANITIZER_TIMEOUT seconds (default 600)
#   7. nsys        20 steps of wt103_base (one GPU's 8 columns) under nsys (when nsys exists)
# and, from the benchmark, txl's ref_base tokens/s against the reference figures of the best-known
# PyTorch re-implementation on one A100: 41,527 (TF32) and 59,961 (mixed precision).
#
#   scripts/gpu-acceptance.sh [REPORT_DIR]      (default: gpu-acceptance-<host>-<date>/)
#
# Where there is no GPU (no nvidia-smi, or it lists none) every step is skipped with the reason,
# nothing is built, and the exit status is 0; otherwise it is 1 when any step failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
report=${1:-$TXL_ROOT/gpu-acceptance-$(hostname -s)-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$report" || { echo "gpu-acceptance: cannot make the report folder $report"; exit 1; }
report=$(cd "$report" && pwd)
summary=$report/summary.md
steps=(device build profile cuda-tests bench sanitizers nsys)
declare -A result why
record() { # STEP RESULT WHY
  result[$1]=$2
  why[$1]=$3
  printf 'gpu-acceptance: %-10s %-7s %s\n' "$1" "$2" "$3"
  write_summary > /dev/null # kept current: a lease that ends mid-way still leaves the table
}
# runs a command into the step's log; passed or FAILED with the log named
run_step() { # STEP WHAT COMMAND...
  local step=$1 what=$2
  shift 2
  if "$@" > "$report/$step.log" 2>&1; then record "$step" passed "$what ($step.log)"
  else record "$step" FAILED "$what: status $? ($step.log)"; fi
}
write_summary() {
  {
    echo "# txl GPU acceptance, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(hostname)"
    echo
    echo "| step | result | detail |"
    echo "|---|---|---|"
    for s in "${steps[@]}"; do echo "| $s | ${result[$s]:-not run} | ${why[$s]:-} |"; done
    [ -n "${throughput:-}" ] && { echo; echo "$throughput"; }
  } > "$summary"
  echo "gpu-acceptance: summary in $summary"
}

gpus=0
command -v nvidia-smi > /dev/null && gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
if [ "$gpus" -eq 0 ]; then
  reason="no CUDA device (nvidia-smi $(command -v nvidia-smi > /dev/null && echo "lists no GPU" || echo "not found"))"
  echo "SKIPPED: $reason"
  for s in "${steps[@]}"; do record "$s" skipped "$reason"; done
  write_summary
  exit 0
fi

# 1. the device
{ nvidia-smi; nvidia-smi -q; } > "$report/device.log" 2>&1
record device passed "$gpus GPU(s): $(nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader \
  | paste -sd ';' -) (device.log)"

# 2. build for the local GPU, or the build given
if [ "${TXL_PREBUILT:-0}" = 1 ]; then
  export TXL_BUILD=${TXL_BUILD:-$TXL_ROOT/build-gpu}
  run_step build "prebuilt: $TXL_BUILD as it is (TXL_PREBUILT=1)" "$here/build.sh"
else
  export TXL_BUILD=$TXL_ROOT/build-gpu
  run_step build "native build in build-gpu/" "$here/build.sh" -DTXL_CUDA=ON -DTXL_CUDA_ARCHITECTURES=native
fi
if [ "${result[build]}" != passed ]; then
  for s in profile cuda-tests bench sanitizers nsys; do record "$s" skipped "the build failed"; done
  write_summary
  exit 1
fi

# 3. the device profile first: what a short lease most needs to see
profile_runs() {
  local cfg
  for cfg in "configs/bench/ref_base.ini" "configs/wt103_base.ini --set train.batch_size=8"; do
    for graph in off auto; do
      echo "== txl-train $cfg --bench 20, run.precision = bf16, run.cuda_graph = $graph"
      # shellcheck disable=SC2086 # cfg holds the config and its overrides
      "$TXL_BUILD/bin/txl-train" "$TXL_ROOT"/$cfg --bench 20 --set data.corpus= --set run.precision=bf16 \
        --set run.cuda_graph=$graph | grep -E '^(bench|cuda graph):' || return 1
    done
    echo "== txl-train $cfg --bench 10 --profile, run.precision = bf16"
    "$TXL_BUILD/bin/txl-train" "$TXL_ROOT"/$cfg --bench 10 --profile --set data.corpus= --set run.precision=bf16 \
      | grep -E '^(bench|profile):' || return 1
  done
}
run_step profile "ref_base and wt103_base (8 columns), bf16: steps with graphs off and auto, the profile" profile_runs
cat "$report/profile.log"

# 4. the CUDA tests and the table of their errors
run_step cuda-tests "scripts/test-cuda.sh" "$here/test-cuda.sh"

# 5. the benchmarks
run_step bench "scripts/bench-gpu.sh" "$here/bench-gpu.sh"
# txl's ref_base against the reference figures (one A100; compare on an A100, or scale by the peaks)
tps() { # PRECISION: ref_base's tokens/s of the benchmark
  sed -n "/^== txl bench\/ref_base, one GPU, run.precision = $1,/,/^==/p" "$report/bench.log" \
    | sed -n 's/.* | \([0-9,]*\) tok\/s .*/\1/p' | head -n 1
}
throughput="ref_base tokens/s on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1): txl TF32 $(tps tf32) \
(reference on an A100: 41,527), txl bf16 $(tps bf16) (reference, mixed precision on an A100: 59,961)"

# 6. each CUDA test program under the four tools of compute-sanitizer, memcheck first. A run's
# status tells the sanitizer's findings (99) from a time limit (124) and from the program's own
# checks failing (any other; cuda-tests reports those): only findings fail the step.
if command -v compute-sanitizer > /dev/null; then
  found="" late="" own=""
  for tool in memcheck racecheck synccheck initcheck; do
    for prog in test_cuda_parity test_cuda_elementwise test_cuda_rel_attn test_cuda_step; do
      rc=0
      timeout "${TXL_SANITIZER_TIMEOUT:-600}" compute-sanitizer --tool "$tool" --error-exitcode 99 \
        "$TXL_BUILD/bin/$prog" > "$report/sanitizer-$tool-$prog.log" 2>&1 || rc=$?
      case $rc in 0) ;; 99) found="$found $tool:$prog" ;; 124) late="$late $tool:$prog" ;;
                  *) own="$own $tool:$prog" ;; esac
    done
  done
  notes="${late:+; stopped at the time limit:$late}${own:+; own checks failed in:$own}"
  if [ -n "$found" ]; then record sanitizers FAILED "findings in$found$notes (sanitizer-*.log)"
  elif [ -n "$late" ]; then record sanitizers partial "no findings$notes (sanitizer-*.log)"
  else record sanitizers passed "4 tools x 4 programs, no findings$notes (sanitizer-*.log)"; fi
else
  record sanitizers skipped "compute-sanitizer not found"
fi

# 7. a profile of 20 steps
if command -v nsys > /dev/null; then
  run_step nsys "nsys profile of 20 wt103_base steps (nsys-wt103_base.nsys-rep)" \
    nsys profile --force-overwrite true -o "$report/nsys-wt103_base" "$TXL_BUILD/bin/txl-train" \
    "$TXL_ROOT/configs/wt103_base.ini" --bench 20 --set data.corpus= --set data.n_token=267735 \
    --set train.batch_size=8 --set run.device=cuda --set run.precision=bf16
else
  record nsys skipped "nsys not found"
fi
write_summary
for s in "${steps[@]}"; do [ "${result[$s]}" = FAILED ] && exit 1; done
exit 0
