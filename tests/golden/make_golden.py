#!/usr/bin/env python3
"""Writes tests/golden/golden.h5, the whole-model golden file for txl, from the PyTorch reference
tests/reference/txl_ref.py; or, with --check FILE, regenerates it in memory and compares.

    python3 tests/golden/make_golden.py --out tests/golden/golden.h5
    python3 tests/golden/make_golden.py --check tests/golden/golden.h5

See tests/golden/README.md for the layout of the file.
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import txl_ref  # noqa: E402

N_SEG_A = 3      # phase A: segments with fixed parameters
N_TRAIN = 10     # phase B: updates

COMMON = dict(
    n_token=29, n_layer=2, d_model=12, n_head=3, d_head=5, d_inner=19, tgt_len=5, batch=3,
    seed=1234, lr=2e-3, warmup_step=3, max_step=10, eta_min=1e-4, clip=0.25, beta1=0.9,
    beta2=0.999, eps=1e-8, init_std=0.02,
)
CASES = {
    "post": dict(COMMON, pre_lnorm=0, tie_weight=1, untie_r=0, dropout=0.1, dropatt=0.1,
                 clamp_len=6, same_length=1, mem_len=7, scheduler="cosine"),
    "pre": dict(COMMON, pre_lnorm=1, tie_weight=0, untie_r=1, same_length=0, clamp_len=0,
                mem_len=4, dropatt=0.0, dropout=0.1, scheduler="inv_sqrt"),
    # adaptive input and softmax: three clusters, widths 12 / 6 / 3, tied weights and projections
    "adaptive": dict(COMMON, pre_lnorm=0, tie_weight=1, untie_r=0, same_length=0, clamp_len=0,
                     mem_len=7, dropout=0.1, dropatt=0.0, scheduler="cosine", cutoffs=(8, 17),
                     div_val=2, tie_projs=1),
    # one table projected from d_embed 8, untied output weight and projections, two clusters
    "adaptive_one_table": dict(COMMON, pre_lnorm=1, tie_weight=0, untie_r=0, same_length=0,
                               clamp_len=0, mem_len=4, dropout=0.1, dropatt=0.1, scheduler="cosine",
                               cutoffs=(10,), div_val=1, d_embed=8, tie_projs=0),
    # the attention variants (model.attn_type), each over three segments with memory:
    # 1 (Shaw et al.) with clamp_len 6 < K = 10, 12 keys of segments 1 and 2 (rows padded in front)
    "shaw": dict(COMMON, attn_type=1, pre_lnorm=0, tie_weight=1, untie_r=0, dropout=0.1, dropatt=0.1,
                 clamp_len=6, same_length=1, mem_len=7, scheduler="cosine"),
    # 2 (absolute sinusoids), mem_len 7 > tgt_len: layer 0's memory rows keep their added positions
    "abs_sin": dict(COMMON, attn_type=2, pre_lnorm=1, tie_weight=0, untie_r=0, dropout=0.1, dropatt=0.1,
                    clamp_len=8, same_length=0, mem_len=7, scheduler="cosine"),
    # 3 (learned absolute per layer): post-norm, and pre-norm (the memory rows' gradient through
    # LayerNorm 1)
    "abs_learned": dict(COMMON, attn_type=3, pre_lnorm=0, tie_weight=1, untie_r=0, dropout=0.1,
                        dropatt=0.0, clamp_len=0, same_length=1, mem_len=7, scheduler="inv_sqrt"),
    "abs_learned_pre": dict(COMMON, attn_type=3, pre_lnorm=1, tie_weight=0, untie_r=0, dropout=0.1,
                            dropatt=0.1, clamp_len=0, same_length=0, mem_len=4, scheduler="cosine"),
}
FLOAT_KEYS = ("dropout", "dropatt", "lr", "eta_min", "clip", "beta1", "beta2", "eps", "init_std",
              "proj_init_std")

# Tolerance of --check, relative to the largest magnitude in each dataset (see README.md):
# the same torch build on the same CPU reproduces the file exactly; another build may sum in
# another order, and even evaluating this reference in float64 moves no dataset by more than
# 1e-6 of its largest magnitude, so 1e-5 accepts summation order and catches real changes.
CHECK_RTOL = 1e-5


def f32(t):
    return t.detach().to(torch.float32).numpy().copy()


def build_case(name, cfg):
    """Returns (attrs, datasets) of one group: datasets maps a path inside the group to an array."""
    cfg = txl_ref.make_config(**cfg)
    L, B, V = cfg["tgt_len"], cfg["batch"], cfg["n_token"]
    torch.manual_seed(cfg["seed"])
    gen = torch.Generator().manual_seed(cfg["seed"])
    params0 = txl_ref.init_params(cfg, gen)  # table order, float32
    data = torch.randint(0, V, (N_TRAIN * L + 1, B), generator=gen, dtype=torch.int64)

    attrs = {}
    for k, v in cfg.items():
        if k == "attn_type" and v == 0:
            continue  # absent = 0: the cases made before the key existed stay byte for byte the same
        if k == "scheduler":
            attrs[k] = v
        elif k == "cutoffs":
            attrs[k] = ",".join(str(c) for c in v)
        elif k in FLOAT_KEYS:
            attrs[k] = np.float64(v)
        else:
            attrs[k] = np.int64(v)
    attrs["generator"] = "tests/reference/txl_ref.py, torch %s" % torch.__version__
    attrs["phaseA_segments"] = np.int64(N_SEG_A)
    attrs["train_steps"] = np.int64(N_TRAIN)

    ds = {"data": data.numpy().astype(np.int32)}
    for n, t in params0.items():
        ds["params/" + n] = f32(t)

    # phase A: fixed parameters, memory carried, gradient of each segment's loss
    params = {n: t.clone().requires_grad_(True) for n, t in params0.items()}
    mems = None
    for s in range(N_SEG_A):
        x = data[s * L:s * L + L]
        y = data[s * L + 1:s * L + L + 1]
        for p in params.values():
            p.grad = None
        logits, loss, mems = txl_ref.forward(params, cfg, x, mems, y, step=s)
        loss.backward()
        g = "segA%d/" % s
        ds[g + "logits"] = f32(logits)
        ds[g + "loss"] = np.float64(np.float32(loss.item()))
        ds[g + "mems"] = np.stack([f32(m) for m in mems], 0)
        for n, p in params.items():
            ds[g + "grads/" + n] = f32(p.grad)

    # phase B: N_TRAIN updates from the initial parameters, fresh memory
    params = {n: t.clone().requires_grad_(True) for n, t in params0.items()}
    opt = txl_ref.make_optimizer(params, cfg, foreach=False)
    mems = None
    losses, norms, lrs = [], [], []
    for s in range(N_TRAIN):
        x = data[s * L:s * L + L]
        y = data[s * L + 1:s * L + L + 1]
        loss, gn, lr, mems = txl_ref.train_step(params, opt, cfg, x, y, mems, s)
        losses.append(loss)
        norms.append(gn)
        lrs.append(lr)
    ds["train/loss"] = np.array(losses, dtype=np.float64)
    ds["train/grad_norm"] = np.array(norms, dtype=np.float64)
    ds["train/lr"] = np.array(lrs, dtype=np.float64)
    for n, p in params.items():
        ds["train/params/" + n] = f32(p)
    return attrs, ds


def build_all():
    torch.set_num_threads(1)
    return {name: build_case(name, cfg) for name, cfg in CASES.items()}


def _group(parent, name):
    """parent[name], created without modification times (so the file is byte-for-byte reproducible)."""
    if name in parent:
        return parent[name]
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl)
    return parent[name]


def write(path, cases):
    """Writes every case; the file's bytes depend only on its contents (no time stamps)."""
    tmp = path + ".tmp"
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    fid = h5py.h5f.create(tmp.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl)
    with h5py.File(fid) as f:
        f.attrs["description"] = ("txl golden file: a Transformer-XL run by the PyTorch reference "
                                  "tests/reference/txl_ref.py; see tests/golden/README.md")
        for name, (attrs, ds) in cases.items():
            g = _group(f, name)
            for k, v in attrs.items():
                g.attrs[k] = v
            for p, a in ds.items():
                parent = g
                for part in p.split("/")[:-1]:
                    parent = _group(parent, part)
                parent.create_dataset(p.split("/")[-1], data=a, track_times=False)
    os.replace(tmp, path)


def check(path, cases):
    """Compares a golden file against freshly computed cases; returns the number of mismatches."""
    bad = 0
    with h5py.File(path, "r") as f:
        for name, (attrs, ds) in cases.items():
            if name not in f:
                print("MISSING group /%s" % name)
                bad += 1
                continue
            g = f[name]
            for k, v in attrs.items():
                old = g.attrs.get(k)
                if isinstance(old, bytes):
                    old = old.decode()
                if k == "generator":
                    if old != v:
                        print("note  /%s attr generator: file %r, now %r" % (name, old, v))
                    continue
                if old is None or old != v:
                    print("FAIL  /%s attr %s: file %r, now %r" % (name, k, old, v))
                    bad += 1
            for p, a in ds.items():
                full = "/%s/%s" % (name, p)
                if p not in g:
                    print("FAIL  %s missing" % full)
                    bad += 1
                    continue
                b = g[p][()]
                if np.shape(b) != np.shape(a) or np.asarray(b).dtype != np.asarray(a).dtype:
                    print("FAIL  %s shape/type %s %s, now %s %s" % (full, np.shape(b), np.asarray(b).dtype,
                                                                   np.shape(a), np.asarray(a).dtype))
                    bad += 1
                    continue
                a64 = np.asarray(a, dtype=np.float64)
                b64 = np.asarray(b, dtype=np.float64)
                diff = float(np.max(np.abs(a64 - b64))) if a64.size else 0.0
                scale = float(np.max(np.abs(b64))) if b64.size else 0.0
                if np.issubdtype(np.asarray(a).dtype, np.integer):
                    ok = diff == 0.0
                    tol = 0.0
                else:
                    tol = CHECK_RTOL * max(scale, 1e-30)
                    ok = diff <= tol
                print("%-5s %-40s max|diff| %.3e  (max|value| %.3e, tol %.1e)" %
                      ("ok" if ok else "FAIL", full, diff, scale, tol))
                bad += 0 if ok else 1
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the golden file here")
    ap.add_argument("--check", metavar="FILE", help="regenerate in memory and compare with FILE")
    a = ap.parse_args()
    if not a.out and not a.check:
        ap.error("give --out FILE or --check FILE")
    cases = build_all()
    if a.out:
        write(a.out, cases)
        print("wrote %s (%d bytes)" % (a.out, os.path.getsize(a.out)))
    if a.check:
        bad = check(a.check, cases)
        print("%s: %s" % (a.check, "MISMATCH (%d)" % bad if bad else "matches"))
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
