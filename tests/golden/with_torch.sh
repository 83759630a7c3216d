#!/usr/bin/env bash
# Runs a Python script of the reference with /usr/bin/python3 when it has PyTorch, NumPy and
# h5py (Debian: python3-torch, python3-h5py); where they are missing it says so and exits 77 (skipped),
# as the C tests do not depend on them.
#   with_torch.sh SCRIPT [ARGS...]
set -euo pipefail
py=/usr/bin/python3
if ! "$py" -c 'import torch, h5py, numpy' 2>/dev/null; then
  echo "SKIPPED: PyTorch/h5py not installed for $py (apt-get install python3-torch python3-h5py)"
  exit 77
fi
exec "$py" "$@"
