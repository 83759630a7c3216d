#!/usr/bin/env bash
# Regenerates the golden file in memory with the PyTorch reference and compares it with the
# committed one. Needs PyTorch, NumPy and h5py for /usr/bin/python3 (Debian: python3-torch,
# python3-h5py); where they are missing it says so and passes, as the C comparison does not
# depend on it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
if ! "$py" -c 'import torch, h5py, numpy' 2>/dev/null; then
  echo "SKIPPED: PyTorch/h5py not installed for $py (apt-get install python3-torch python3-h5py)"
  exit 0
fi
exec "$py" "$here/make_golden.py" --check "$1"
