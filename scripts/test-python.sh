#!/usr/bin/env bash
# The Python that the tests run: a virtual environment in $TXL_BUILD/py that sees Debian's PyTorch,
# h5py and NumPy (--system-site-packages) and adds, from the package index, what Debian does not
# package: `tokenizers` (tests/data's BPE comparison) and `tensorboard` (tests/train's reading of
# the event files). Prints the environment's python on its last line. Where the index cannot be
# reached it says so and still succeeds: the tests that need those packages then exit 77
# (skipped), the others run as before. The system's Python is left as it is.
#   scripts/test-python.sh            (scripts/test.sh runs it and exports TXL_PYTHON)
set -euo pipefail
source "$(dirname "$0")/env.sh"
venv=$TXL_BUILD/py
mkdir -p "$TXL_BUILD"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv" >&2
if "$venv/bin/python" -c 'import tokenizers, tensorboard' 2>/dev/null; then
  echo "test-python: tokenizers and tensorboard present" >&2
elif ! "$venv/bin/python" -m pip install -q --disable-pip-version-check tokenizers tensorboard >&2; then
  echo "test-python: warning: could not install tokenizers and tensorboard: their tests will be skipped" >&2
fi
"$venv/bin/python" -c 'import importlib
for p in ("torch", "h5py", "numpy", "tokenizers", "tensorboard"):
    try: print("test-python: %s %s" % (p, importlib.import_module(p).__version__))
    except ImportError: print("test-python: %s missing" % p)' >&2
echo "$venv/bin/python"
