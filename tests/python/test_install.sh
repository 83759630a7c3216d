#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment that sees the system's packages (torch,
# h5py, numpy: nothing is downloaded), then, from outside the source tree, `import txl` is the
# installed copy and txl.load evaluates and generates. Skipped (77) where the Python has no venv or
# ensurepip (Debian: python3-venv).
source "$(dirname "$0")/lib.sh" "$1" "$2"
if ! "$PY" -m venv --system-site-packages "$WORK/venv" > "$WORK/venv.out" 2>&1; then
  echo "SKIPPED: $PY -m venv does not work here (Debian: apt-get install python3-venv): $(tail -n 1 "$WORK/venv.out")"
  exit 77
fi
vpy=$WORK/venv/bin/python
# a copy of the package's folder: pip's build writes into the folder it builds (build/, *.egg-info)
cp -r "$SRC/python" "$WORK/pkg"
if "$vpy" -m pip install --no-build-isolation --no-deps --no-index --quiet "$WORK/pkg" > "$WORK/pip.out" 2>&1; then
  ok "pip install ./python into a virtual environment"
else
  cat "$WORK/pip.out"
  fail "pip install failed"
  finish
fi
make_corpus "$WORK/c.h5" 1000 100
tiny_run run "$WORK/c.h5" train.max_step=10 || { cat "$WORK/run.out"; fail "training failed"; finish; }
want=$(txl_eval_loss "$WORK/run" test)
mkdir "$WORK/elsewhere"
out=$(cd "$WORK/elsewhere" && env -u PYTHONPATH "$vpy" - "$WORK/run" "$WORK/venv" <<'PY' 2>&1
import sys
import h5py
import txl
print("file", txl.__file__)
print("installed", txl.__file__.startswith(sys.argv[2]))
m = txl.load(sys.argv[1])
with h5py.File(m.vocab.path, "r") as f:
    print("loss %.6f" % m.evaluate(f["test"][()]).loss)
print("text", repr(m.decode(m.generate("KING", 20, seed=1))))
PY
) || true
printf '%s\n' "$out"
grep -qx "installed True" <<<"$out" && ok "import txl from outside the tree is the installed package" \
  || fail "import txl is not the installed package"
got=$(sed -n 's/^loss //p' <<<"$out")
# the computation of tests/python/test_eval.sh, whose tolerance (5e-6 relative) it takes
if [ -n "$got" ] && python3 -c "import sys; sys.exit(0 if abs($got - $want) <= 5e-6 * $want else 1)"; then
  ok "the installed txl.load(...).evaluate: test loss $got, txl-eval's $want"
else
  fail "the installed txl.load(...).evaluate: test loss '$got', txl-eval's '$want'"
fi
grep -q "^text '" <<<"$out" && ok "the installed package generates text" || fail "no generated text"
finish
