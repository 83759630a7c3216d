#!/usr/bin/env bash
# The demo: installs what building and running need (scripts/install-deps.sh, group run only),
# builds the tools, prepares the bundled Tiny Shakespeare corpus and trains a small character-level
# Transformer-XL on 2 MPI ranks on the CPU (a few minutes), which ends by printing generated text;
# draws the run's curves where matplotlib is installed (install-deps.sh --with plot).
# Run from anywhere: scripts/demo.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/install-deps.sh"
TXL_TARGETS=txl-tools "$here/build.sh"   # the tools only (scripts/test.sh builds the rest)
source "$here/env.sh"
demo=$TXL_BUILD/demo
mkdir -p "$demo"
"$TXL_BUILD/bin/txl-prep" --mode char \
  --train "$TXL_ROOT/data/demo/tinyshakespeare/train.txt" \
  --valid "$TXL_ROOT/data/demo/tinyshakespeare/valid.txt" \
  --test "$TXL_ROOT/data/demo/tinyshakespeare/test.txt" \
  --out "$demo/shakespeare.h5"
ranks=${TXL_DEMO_RANKS:-2}
# every demo is a fresh run (txl-train refuses to start one over another run's checkpoints)
rm -rf "$demo/run"
mpirun -n "$ranks" --bind-to none "$TXL_BUILD/bin/txl-train" "$TXL_ROOT/configs/demo.ini" \
  --set data.corpus="$demo/shakespeare.h5" --set run.work_dir="$demo/run" "$@"
echo "demo: metrics in $demo/run/metrics.jsonl"
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  /usr/bin/python3 "$TXL_ROOT/scripts/plot-metrics.py" "$demo/run"
else
  echo "demo: for the curves, scripts/install-deps.sh --with plot, then scripts/plot-metrics.py $demo/run"
fi
