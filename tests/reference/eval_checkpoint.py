#!/usr/bin/env python3
"""Evaluates a txl checkpoint with the PyTorch reference model and prints the mean loss.

    python3 tests/reference/eval_checkpoint.py CHECKPOINT CORPUS [--split valid] [--max-segments N]
                                               [--float64] [--expect LOSS --rtol R]

Reads the checkpoint's resolved configuration (root attribute `config`, INI text) and its
parameters (/params/<name>, src/checkpoint/FORMAT.md) with h5py, and the corpus split
(data/FORMAT.md) with h5py; builds the model of tests/reference/txl_ref.py (its `forward`, not a
second implementation) and walks the split as txl_trainer_evaluate (src/train/trainer.c) does
(the walk is the package's, python/txl/evaluate.py), with the configuration's EVALUATION settings:

  - the split cut into eval_batch_size columns of col_len = len // eval_batch_size tokens
    (column c = tokens [c col_len, (c+1) col_len); the tail is never read);
  - segments of eval_tgt_len rows down the columns, the last one shorter: a segment starting at
    row pos has n = min(eval_tgt_len, col_len - 1 - pos) rows, inputs rows [pos, pos+n), targets
    the next token (rows [pos+1, pos+n+1));
  - the memory starts empty and is carried from segment to segment, eval_mem_len rows per layer
    (-1: mem_len); the new memory of a layer is the last eval_mem_len rows of [memory; layer
    input] (the reference's rule, which is txl's), and eval_same_length's mask uses eval_mem_len;
  - positions clamped at eval_clamp_len (-2: clamp_len; <= 0: no clamp);
  - no dropout;
  - at most max_eval_steps segments for the valid split (-1: all), all segments for the other
    splits (txl always evaluates the test split in full); --max-segments overrides;
  - the loss is the mean over every scored token of the per-token cross entropy (nats), each
    per-token loss in the model's precision, the sums in float64.

Everything is computed in float32 as txl does (--float64: the same parameters, widened, in
float64). Prints `loss <value>` and a line of details; with --expect LOSS --rtol R, exits 1
when |loss - LOSS| > R * |LOSS|.
"""
import argparse
import math
import os
import re
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import txl_ref  # noqa: E402  (which puts the package's folder, python/, on sys.path)
from txl.errors import TxlError  # noqa: E402
from txl.evaluate import walk  # noqa: E402


def fail(msg):
    print("eval_checkpoint: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def parse_ini(text):
    """txl_config_write_ini's output: `[section]` lines and `key = value` lines (a `# default ...`
    note may follow the value when the text was printed with changes marked). Returns
    {key: value string}; key names are unique across sections."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith(";") or line.startswith("["):
            continue
        if "=" not in line:
            continue
        k, v = line.split("=", 1)
        v = re.sub(r"\s+# default .*$", "", v.strip())
        out[k.strip()] = v.strip()
    return out


def get_int(cfg, key):
    if key not in cfg:
        fail("the checkpoint's config has no key '%s'" % key)
    return int(cfg[key])


def get_bool(cfg, key):
    if key not in cfg:
        fail("the checkpoint's config has no key '%s'" % key)
    v = cfg[key].lower()
    if v in ("true", "1", "yes", "on"):
        return 1
    if v in ("false", "0", "no", "off"):
        return 0
    fail("config key '%s' = '%s' is not a boolean" % (key, cfg[key]))


def attr_str(v):
    return v.decode() if isinstance(v, (bytes, np.bytes_)) else str(v)


def load_checkpoint(path):
    """(config dict, {name: float32 numpy array}, step)"""
    with h5py.File(path, "r") as f:
        if attr_str(f.attrs.get("format", b"")) != "txl-checkpoint":
            fail("%s: not a txl checkpoint (root attribute 'format')" % path)
        # version 2 adds the root attributes run_id and vocab_digest, which this script does not need
        if int(f.attrs["format_version"]) not in (1, 2):
            fail("%s: format_version %d, this script reads 1 and 2" % (path, int(f.attrs["format_version"])))
        cfg = parse_ini(attr_str(f.attrs["config"]))
        params = {name: np.asarray(ds[()], dtype=np.float32) for name, ds in f["params"].items()}
        step = int(f.attrs["step"])
    return cfg, params, step


def load_split(path, split):
    with h5py.File(path, "r") as f:
        if attr_str(f.attrs.get("format", b"")) != "txl-corpus":
            fail("%s: not a txl corpus (root attribute 'format')" % path)
        if split not in f:
            fail("%s: no split '%s'" % (path, split))
        ids = np.asarray(f[split][()]).astype(np.int64)
        vocab = int(f.attrs["vocab_size"])
    return ids, vocab


def model_config(c, n_token):
    """The reference's config dict for EVALUATION: mem_len, clamp_len and same_length are the
    eval_ values (txl_config_eval_mem_len / txl_config_eval_clamp_len), dropout off."""
    mem_len = get_int(c, "mem_len")
    eval_mem_len = get_int(c, "eval_mem_len")
    eval_mem_len = mem_len if eval_mem_len < 0 else eval_mem_len
    eval_clamp_len = get_int(c, "eval_clamp_len")
    eval_clamp_len = get_int(c, "clamp_len") if eval_clamp_len == -2 else eval_clamp_len
    return txl_ref.make_config(
        n_token=n_token, n_layer=get_int(c, "n_layer"), d_model=get_int(c, "d_model"),
        n_head=get_int(c, "n_head"), d_head=get_int(c, "d_head"), d_inner=get_int(c, "d_inner"),
        pre_lnorm=get_bool(c, "pre_lnorm"), tie_weight=get_bool(c, "tie_weight"),
        untie_r=get_bool(c, "untie_r"), dropout=0.0, dropatt=0.0,
        clamp_len=eval_clamp_len, same_length=get_bool(c, "eval_same_length"),
        tgt_len=get_int(c, "eval_tgt_len"), mem_len=eval_mem_len,
        batch=get_int(c, "eval_batch_size"))


def check_params(params, cfg):
    """Every tensor of the reference's table, with its shape, and nothing else."""
    table = txl_ref.param_table(cfg)
    want = {name: shape for name, shape, _ in table}
    missing = [n for n in want if n not in params]
    extra = [n for n in params if n not in want]
    if missing or extra:
        fail("parameters do not match the config's table: missing %s, unexpected %s" % (missing, extra))
    for n, shape in want.items():
        if tuple(params[n].shape) != tuple(shape):
            fail("/params/%s has shape %s, the table says %s" % (n, params[n].shape, shape))


def evaluate(params, cfg, ids, max_segments):
    """txl_trainer_evaluate's walk (the package's txl.evaluate.walk) over the reference's forward.
    Returns (mean loss, tokens, segments, rows of the last one)."""
    def step(x, mems):
        logits, _, mems = txl_ref.forward(params, cfg, x, mems, drop_mode="off")
        return logits, mems
    try:
        r = walk(step, ids, cfg["batch"], cfg["tgt_len"], max_segments)
    except TxlError as e:
        fail(str(e))
    return r.loss, r.tokens, r.segments, r.last_rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="txl checkpoint (.h5)")
    ap.add_argument("corpus", help="txl corpus (.h5, made by txl-prep)")
    ap.add_argument("--split", default="valid", help="split to evaluate (default: valid)")
    ap.add_argument("--max-segments", type=int, default=None,
                    help="segments at most (-1: all); default: the config's max_eval_steps for "
                         "valid, all for other splits (as txl)")
    ap.add_argument("--float64", action="store_true", help="compute in float64 instead of float32")
    ap.add_argument("--expect", type=float, default=None, help="the loss txl reported")
    ap.add_argument("--rtol", type=float, default=None, help="allowed |loss - expect| / |expect|")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = ap.parse_args(argv)
    if (a.expect is None) != (a.rtol is None):
        ap.error("--expect and --rtol go together")
    if a.threads > 0:
        torch.set_num_threads(a.threads)

    c, np_params, step = load_checkpoint(a.checkpoint)
    ids, vocab = load_split(a.corpus, a.split)
    n_token = np_params["word_emb"].shape[0] if "word_emb" in np_params else 0
    if n_token != vocab:
        fail("the checkpoint's vocabulary (%d) is not the corpus's (%d)" % (n_token, vocab))
    cfg = model_config(c, n_token)
    check_params(np_params, cfg)
    dtype = torch.float64 if a.float64 else torch.float32
    params = {n: torch.from_numpy(v).to(dtype) for n, v in np_params.items()}
    max_segments = a.max_segments
    if max_segments is None:
        max_segments = get_int(c, "max_eval_steps") if a.split == "valid" else -1

    loss, tokens, segs, last_n = evaluate(params, cfg, ids, max_segments)
    print("loss %.12f" % loss)
    print("checkpoint step %d, split %s: %d segments (last %d rows), %d tokens, %s; eval_tgt_len %d "
          "eval_mem_len %d eval_clamp_len %d eval_same_length %d eval_batch_size %d"
          % (step, a.split, segs, last_n, tokens, "float64" if a.float64 else "float32", cfg["tgt_len"],
             cfg["mem_len"], cfg["clamp_len"], cfg["same_length"], cfg["batch"]))
    if a.expect is not None:
        diff = abs(loss - a.expect)
        rel = diff / abs(a.expect) if a.expect != 0 else math.inf
        ok = diff <= a.rtol * abs(a.expect)
        print("%s: |%.9f - %.9f| = %.3g, relative %.3g, tolerance %.3g"
              % ("agree" if ok else "DIFFER", loss, a.expect, diff, rel, a.rtol))
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
