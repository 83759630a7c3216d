#!/usr/bin/env python3
"""Compares the losses two txl runs logged (metrics.jsonl) within a relative tolerance, and
optionally their parameters (--dump-params files) within a tolerance relative to the reference
run's largest parameter. For runs whose arithmetic differs only in the order of float sums (rank
counts, thread counts, layouts): the caller derives the tolerance from that arithmetic; printed
decimals are never compared as strings.

  compare_runs.py RUN_DIR REF_DIR TOL_LOSS [--kinds train,valid,test] [--train-steps N]
                  [--after-step S] [--params FILE REF_FILE TOL_PARAM]

--after-step S compares only the rows of steps after S: a run resumed into a fresh work_dir from
step S's checkpoint (which logs only those) against a whole run.

Exit status 0 when the runs logged the same rows (kinds and steps) and every difference is within
its tolerance; one line of figures either way."""
import argparse
import array
import json
import math
import sys


def rows(run, kinds, after):
    out = []
    for line in open(f"{run}/metrics.jsonl"):
        r = json.loads(line)
        if r["kind"] in kinds and (after is None or r["step"] > after):
            out.append((r["kind"], r["step"], r["loss"]))
    return out


def params(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("ref")
    ap.add_argument("tol_loss", type=float)
    ap.add_argument("--kinds", default="train,valid,test")
    ap.add_argument("--train-steps", type=int, default=None, help="the train rows both must hold")
    ap.add_argument("--after-step", type=int, default=None, help="only the rows of later steps")
    ap.add_argument("--params", nargs=3, metavar=("FILE", "REF_FILE", "TOL_PARAM"))
    a = ap.parse_args()
    kinds = set(a.kinds.split(","))
    got, ref = rows(a.run, kinds, a.after_step), rows(a.ref, kinds, a.after_step)
    if [(k, s) for k, s, _ in got] != [(k, s) for k, s, _ in ref] or not ref:
        print(f"{a.run} vs {a.ref}: the runs logged different rows ({len(got)} and {len(ref)})")
        return 1
    n_train = sum(k == "train" for k, _, _ in ref)
    if a.train_steps is not None and n_train != a.train_steps:
        print(f"{a.ref}: {n_train} train rows, expected {a.train_steps}")
        return 1
    worst = 0.0
    for (_, _, x), (_, _, y) in zip(got, ref):
        d = abs(x - y) / abs(y) if y != 0 else abs(x)
        worst = max(worst, d if math.isfinite(d) else math.inf)
    ok = worst <= a.tol_loss
    msg = f"{len(ref)} losses, largest relative difference {worst:.2e} (tolerance {a.tol_loss:.0e})"
    if a.params:
        p, q = params(a.params[0]), params(a.params[1])
        tol_p = float(a.params[2])
        if len(p) != len(q) or not q:
            print(f"{msg}; parameter files of {len(p)} and {len(q)} values")
            return 1
        scale = max(abs(x) for x in q)
        diffs = [abs(x - y) for x, y in zip(p, q)]
        # max() skips NaN when it compares: a non-finite difference is infinite here
        dp = math.inf if not all(map(math.isfinite, diffs)) else max(diffs) / scale
        ok = ok and dp <= tol_p
        msg += f"; largest parameter difference {dp:.2e} of the largest parameter (tolerance {tol_p:.0e})"
    print(msg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
