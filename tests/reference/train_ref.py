#!/usr/bin/env python3
"""A whole training run of the reference model (txl_ref) in PyTorch, run the way the original
Transformer-XL's train.py runs one, to time against a whole txl-train run (scripts/bench-e2e.sh):
the token ids of a txl corpus file (HDF5, data/FORMAT.md; read with h5py), each split cut into
batch_size columns, segments of tgt_len with the memory of earlier segments carried, Adam with
txl_ref's warm-up + cosine schedule and gradient clipping, the whole validation split evaluated
every --eval-interval steps and at the end (eval segments, memory carried, no dropout), a
checkpoint (parameters and Adam's state, torch.save) every --checkpoint-interval steps and at the
end, and the test split evaluated last, as txl-train does. torch's own dropout and the original's rel-shift attention, as bench_ref.py's defaults.

    python3 tests/reference/train_ref.py --corpus wt2.h5 --config tiny --max-step 2000 \\
        --eval-interval 500 --checkpoint-interval 500 --out-dir /tmp/ref --threads 2

Prints a progress line per eval, then one line: steps, trained tokens, wall seconds from start
(imports excluded), trained tokens per wall second, the last validation and the test loss.
"""
import argparse
import math
import os
import sys
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import txl_ref  # noqa: E402
from bench_ref import CONFIGS  # noqa: E402


def columns(ids, B):
    """The original's batchify: the split's first (n // B) * B ids as B contiguous columns [n//B, B]."""
    n = len(ids) // B
    return torch.from_numpy(ids[:n * B].astype(np.int64)).view(B, n).t().contiguous()


def evaluate(params, cfg, data, tgt_len, mem_len):
    """Mean loss per token over every full-or-last segment of `data` [T, B] (the memory carried)."""
    ecfg = dict(cfg, mem_len=mem_len)
    total, count, mems = 0.0, 0, None
    with torch.no_grad():
        for i in range(0, data.shape[0] - 1, tgt_len):
            L = min(tgt_len, data.shape[0] - 1 - i)
            x, y = data[i:i + L], data[i + 1:i + 1 + L]
            _, loss, mems = txl_ref.forward(params, ecfg, x, mems, y, drop_mode="off", attn_impl="shift")
            total += float(loss) * x.numel()
            count += x.numel()
    return total / max(count, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="a txl corpus file (txl-prep)")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny", help="bench_ref.py's shapes")
    ap.add_argument("--max-step", type=int, default=1000)
    ap.add_argument("--warmup-step", type=int, default=0)
    ap.add_argument("--lr", type=float, default=2.5e-4)
    ap.add_argument("--eval-interval", type=int, default=500)
    ap.add_argument("--checkpoint-interval", type=int, default=500)
    ap.add_argument("--eval-tgt-len", type=int, default=0, help="default: the config's tgt_len")
    ap.add_argument("--eval-mem-len", type=int, default=-1, help="default: the config's mem_len")
    ap.add_argument("--eval-batch-size", type=int, default=0, help="default: the config's batch")
    ap.add_argument("--out-dir", required=True, help="where the checkpoints go")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    t0 = time.perf_counter()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    with h5py.File(a.corpus, "r") as f:
        train_ids, valid_ids, test_ids = f["train"][:], f["valid"][:], f["test"][:]
        n_token = len(f["vocab_offsets"]) - 1
    shape = dict(CONFIGS[a.config], n_token=n_token)
    cfg = txl_ref.make_config(**shape, dropout=0.1, dropatt=0.0, lr=a.lr, warmup_step=a.warmup_step,
                              max_step=a.max_step, scheduler="cosine")
    L, B = cfg["tgt_len"], cfg["batch"]
    eL = a.eval_tgt_len or L
    eM = a.eval_mem_len if a.eval_mem_len >= 0 else cfg["mem_len"]
    eB = a.eval_batch_size or B
    train, valid, test = columns(train_ids, B), columns(valid_ids, eB), columns(test_ids, eB)
    params = txl_ref.init_params(cfg, torch.Generator().manual_seed(0))
    params = {n: t.requires_grad_(True) for n, t in params.items()}
    opt = txl_ref.make_optimizer(params, cfg, foreach=None)
    os.makedirs(a.out_dir, exist_ok=True)
    mems, pos, loss, vloss = None, 0, float("nan"), float("nan")
    for s in range(a.max_step):
        if pos + L + 1 > train.shape[0]:  # a new epoch: back to the start, the memory dropped
            pos, mems = 0, None
        x, y = train[pos:pos + L], train[pos + 1:pos + L + 1]
        pos += L
        loss, _, _, mems = txl_ref.train_step(params, opt, cfg, x, y, mems, s, drop_mode="torch",
                                              attn_impl="shift")
        done = s + 1
        if done % a.eval_interval == 0 or done == a.max_step:
            vloss = evaluate(params, cfg, valid, eL, eM)
            print("step %d | loss %.4f | valid loss %.4f | valid ppl %.2f | %.1f s" %
                  (done, loss, vloss, math.exp(vloss), time.perf_counter() - t0), flush=True)
        if done % a.checkpoint_interval == 0 or done == a.max_step:
            path = os.path.join(a.out_dir, "ckpt-%08d.pt" % done)
            torch.save({"step": done, "params": {n: t.detach() for n, t in params.items()},
                        "optimizer": opt.state_dict()}, path + ".tmp")
            os.replace(path + ".tmp", path)
    tloss = evaluate(params, cfg, test, eL, eM)
    wall = time.perf_counter() - t0
    tokens = a.max_step * L * B
    print("train_ref: %d steps, %d tokens, %.2f s, %.0f tokens/s end to end, valid loss %.4f, test loss %.4f "
          "(torch %s, %d threads)" % (a.max_step, tokens, wall, tokens / wall, vloss, tloss, torch.__version__,
                                      a.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
