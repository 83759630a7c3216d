#!/usr/bin/env bash
# The GEMMs of one training step of CONFIG, replayed against each CPU BLAS installed here (the
# library txl links, BLIS, oneDNN): the evidence for the library txl's CPU backend links.
#   scripts/bench-blas.sh [CONFIG] [RANKS] [REPEATS]   (defaults: configs/bench/tiny.ini, 2, 5)
# Runs txl-train CONFIG --bench 1 and --bench 2 on RANKS ranks of one thread each with
# tests/blas/blas_record.c preloaded (every cblas_sgemm call written down, rank 0's kept); the
# calls the second run makes more are one step's, which tests/blas/bench_blas.c times per library
# (one thread, best of REPEATS) and checks. BLIS and oneDNN: apt-get install libblis4-serial
# libdnnl2; libxsmm: apt-get install libxsmm-dev, then configure again (absent ones are skipped).
# TXL_BLAS_RECORDS=DIR keeps the records there (stepsN.rec.RANK, N = 1, 2), for a look at the
# calls themselves.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
config=${1:-$TXL_ROOT/configs/bench/tiny.ini}
ranks=${2:-2}
repeats=${3:-5}
train=$TXL_BUILD/bin/txl-train bench=$TXL_BUILD/bin/bench_blas record=$TXL_BUILD/lib/libtxl_blas_record.so
for f in "$train" "$bench" "$record"; do
  [ -e "$f" ] || { echo "bench-blas: $f is missing: build first (scripts/build.sh)" >&2; exit 1; }
done
[ -r "$config" ] || { echo "bench-blas: $config: no such config" >&2; exit 1; }
if [ -n "${TXL_BLAS_RECORDS:-}" ]; then
  out=$TXL_BLAS_RECORDS
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1
for steps in 1 2; do
  TXL_BLAS_RECORD=$out/steps$steps.rec mpirun -n "$ranks" --bind-to none -x LD_PRELOAD="$record" -x TXL_BLAS_RECORD \
    "$train" "$config" --bench "$steps" --set run.threads=1 > "$out/train$steps.txt" 2>&1 ||
    { cat "$out/train$steps.txt" >&2; echo "bench-blas: txl-train failed under the recorder" >&2; exit 1; }
done
echo "bench-blas: $(basename "$config"), rank 0 of $ranks; $(lscpu | sed -n 's/^Model name: *//p')"
"$bench" "$out/steps1.rec.0" "$out/steps2.rec.0" "$repeats"
