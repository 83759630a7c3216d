#!/usr/bin/env python3
"""A PyTorch reference implementation of txl's Transformer-XL (attn_type 0 to 3 of the original code).

The model (notation, txl's Philox dropout masks, the attention variants and their quirks,
adaptive input and softmax) is python/txl/functional.py, the txl package's, imported here under
the same names; this file adds the optimiser (Adam, the learning-rate schedules, one training
step) and the self-checks. It is the source of tests/golden/golden.h5 and of
tests/reference/bench_ref.py.

Run `python3 tests/reference/txl_ref.py --selftest` for the self-checks.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

# The model itself is the product's (python/txl/functional.py): its public names are this
# module's, so that make_golden.py, train_ref.py, bench_ref.py and eval_checkpoint.py keep
# calling txl_ref.forward, txl_ref.make_config, ...
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from txl.functional import *  # noqa: E402,F401,F403
from txl.functional import _philox_scalar  # noqa: E402,F401


# ---- optimiser -------------------------------------------------------------------------------
def lr_at(s, cfg):
    """Learning rate of update s (0-based), in double."""
    lr, W = float(cfg["lr"]), int(cfg["warmup_step"])
    sched = cfg["scheduler"]
    if sched == "cosine":
        if s < W:
            return lr * (s + 1) / W
        eta = float(cfg["eta_min"])
        return eta + (lr - eta) * (1.0 + math.cos(math.pi * s / cfg["max_step"])) / 2.0
    if sched == "inv_sqrt":
        if s < W:
            return lr * (s + 1) / W
        return lr * math.sqrt(max(W, 1)) / math.sqrt(s + 1)
    if sched == "constant":
        # the original code warms up linearly for 'constant' too
        return lr * (s + 1) / W if s < W else lr
    raise ValueError("unknown scheduler %r" % sched)


def make_optimizer(params, cfg, foreach=False):
    kw = dict(lr=float(cfg["lr"]), betas=(float(cfg["beta1"]), float(cfg["beta2"])),
              eps=float(cfg["eps"]))
    if foreach is not None:
        kw["foreach"] = foreach
    return torch.optim.Adam(list(params.values()), **kw)


def train_step(params, opt, cfg, x, y, mems, s, drop_mode="philox", attn_impl="gather"):
    """One update: forward, backward, clip_grad_norm_, Adam with lr_at(s).
    Returns (loss as float, total grad norm before clipping as float, lr, new_mems)."""
    for p in params.values():
        p.grad = None
    _, loss, new_mems = forward(params, cfg, x, mems, y, step=s, drop_mode=drop_mode,
                                attn_impl=attn_impl)
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(list(params.values()), float(cfg["clip"]))
    lr = lr_at(s, cfg)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.step()
    return float(loss.item()), float(gn.item()), lr, new_mems


# ---- self-tests ------------------------------------------------------------------------------
class _Checks:
    def __init__(self):
        self.failed = 0

    def __call__(self, name, ok, detail=""):
        print("%-4s %s%s" % ("ok" if ok else "FAIL", name, ("  (" + detail + ")") if detail else ""))
        if not ok:
            self.failed += 1


def _selftest():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    check = _Checks()

    # Philox known answers (Random123 kat_vectors for philox4x32_10).
    w = philox4x32_10(0, 0, 0, 0, 0, 0)
    got = tuple(int(x) for x in w)
    check("philox4x32-10 known answer, counter 0 key 0", got == (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8),
          " ".join("%08x" % x for x in got))
    w = philox4x32_10(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff)
    got = tuple(int(x) for x in w)
    check("philox4x32-10 known answer, all ones", got == (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd),
          " ".join("%08x" % x for x in got))
    w = philox4x32_10(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0)
    got = tuple(int(x) for x in w)
    check("philox4x32-10 known answer, pi digits", got == (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1),
          " ".join("%08x" % x for x in got))
    # vectorised == scalar at scattered coordinates
    rng = np.random.default_rng(1)
    cs = rng.integers(0, 2**32, size=(4, 64), dtype=np.uint64)
    vec = np.stack(philox4x32_10(cs[0], cs[1], cs[2], cs[3], 77, 3), 0)
    scal = np.array([_philox_scalar(*(int(c) for c in cs[:, n]), 77, 3) for n in range(64)]).T
    check("philox vectorised (numpy) == scalar (Python ints)", np.array_equal(vec, scal))

    # dropout masks: shape, keep rate, scale, layout
    p = 0.1
    keep = dropout_keep(p, 1234, SITE_EMBED, 3, 40, 6, 37, col0=0)
    rate = keep.mean()
    check("dropout mask shape [rows, cols, feats]", keep.shape == (40, 6, 37), str(keep.shape))
    check("dropout keep rate ~ 1-p", abs(rate - 0.9) < 0.02, "%.4f" % rate)
    check("dropout threshold / scale", dropout_threshold(0.1) == 1677721 and
          dropout_scale(0.1) == np.float32(1.0 / (1.0 - float(np.float32(0.1)))),
          "%d %.9g" % (dropout_threshold(0.1), dropout_scale(0.1)))
    k2 = dropout_keep(p, 1234, SITE_EMBED, 3, 40, 4, 37, col0=2)
    check("dropout mask keyed by GLOBAL column (col0 offset)", np.array_equal(k2, keep[:, 2:6]))
    w4 = philox4x32_10(9 // 4, 5, 1, 3, 1234, SITE_EMBED)
    check("dropout mask element = word[f%4] of counter (f/4, row, col, step)",
          bool(keep[5, 1, 9]) == bool((int(w4[9 % 4]) >> 8) >= 1677721))
    k3 = dropout_keep(p, 1234, SITE_POS, 3, 40, 6, 37)
    k4 = dropout_keep(p, 1234, SITE_EMBED, 4, 40, 6, 37)
    check("dropout masks differ across site and step", (k3 != keep).any() and (k4 != keep).any())
    P = torch.ones(2, 3, 4, 5)
    Pd = Dropper("philox", seed=7, step=1).prob_bhlk(P, 0.3, 16)
    kk = dropout_keep(0.3, 7, 16, 1, 4, 2, 15)  # [L, B, H*K]
    ok = all(bool(Pd[b, h, i, j] != 0) == bool(kk[i, b, h * 5 + j])
             for b in range(2) for h in range(3) for i in range(4) for j in range(5))
    check("dropatt mask: row i, column b, feature h*K + j", ok)
    Pl = Dropper("philox", seed=7, step=1).prob_lkbh(P.permute(2, 3, 0, 1).contiguous(), 0.3, 16)
    check("dropatt mask in [L,K,B,H] layout == [B,H,L,K] layout", torch.equal(Pl.permute(2, 3, 0, 1), Pd))

    # attention masks
    for (L, M, mem_len, same) in [(5, 0, 7, 1), (5, 5, 7, 1), (5, 7, 7, 1), (5, 4, 4, 0), (3, 9, 6, 1)]:
        K = M + L
        mask = attn_mask(L, M, mem_len, same)
        ones = torch.ones(L, K)
        ref = torch.triu(ones, 1 + M)
        if same:
            mask_len = K - mem_len
            s = L - mask_len if mask_len > 0 else L
            ref = ref + torch.tril(ones, -s)
        ok = mask.shape == (L, K) and torch.equal(mask, ref > 0)
        seen = (~mask).sum(1).tolist()
        check("attention mask == original triu/tril, L=%d M=%d mem_len=%d same_length=%d" % (L, M, mem_len, same),
              ok and min(seen) > 0, "keys seen per query %s" % seen)

    # rel-shift == direct gather == paper's equation, on unmasked entries
    for dtype, tol in [(torch.float64, 1e-12), (torch.float32, 2e-6)]:
        for (L, M) in [(5, 0), (5, 7), (4, 9), (6, 2)]:
            K, B, H, dh = M + L, 2, 3, 4
            q = torch.randn(L, B, H, dh, dtype=dtype)
            k = torch.randn(K, B, H, dh, dtype=dtype)
            r = torch.randn(K, H, dh, dtype=dtype)
            u = torch.randn(H, dh, dtype=dtype)
            vb = torch.randn(H, dh, dtype=dtype)
            g = attn_scores_gather(q, k, r, u, vb, M)
            s = attn_scores_shift(q, k, r, u, vb).permute(2, 3, 0, 1)
            valid = ~attn_mask(L, M, 10**9, 0)[None, None].expand(B, H, L, K)
            d1 = (g - s)[valid].abs().max().item()
            check("rel_shift == gather r[K-1-(M+i-j)] (%s, L=%d M=%d)" % (str(dtype)[6:], L, M), d1 <= tol,
                  "max diff %.3g" % d1)
            if dtype == torch.float64:
                n = attn_scores_naive(q, k, r, u, vb, M)
                d2 = (g - n)[valid].abs().max().item()
                check("gather == paper's (a)+(b)+(c)+(d), elementwise loops (L=%d M=%d)" % (L, M), d2 <= tol,
                      "max diff %.3g" % d2)

    # posemb: row p is position K-1-p, clamped
    R = posemb(9, 6, 4, torch.float64)
    ok = abs(R[9 - 1 - 2, 0].item() - math.sin(2.0)) < 1e-7 and abs(R[0, 3].item() - math.cos(4.0)) < 1e-7 \
        and torch.equal(R[0], R[4]) and abs(R[8, 3].item() - 1.0) < 1e-7
    check("posemb rows and clamp", ok)

    # whole-model checks in float64, tiny sizes, memory present
    base = dict(n_token=7, n_layer=2, d_model=4, n_head=2, d_head=3, d_inner=5, tgt_len=3, mem_len=4,
                batch=2, seed=99, init_std=0.3)
    cases = [
        ("post, tied, shared r, same_length, clamp", dict(pre_lnorm=0, tie_weight=1, untie_r=0, same_length=1,
                                                          clamp_len=3, dropout=0.0, dropatt=0.0)),
        ("pre, untied, per-layer r", dict(pre_lnorm=1, tie_weight=0, untie_r=1, same_length=0, clamp_len=0,
                                          dropout=0.0, dropatt=0.0)),
        ("post with Philox dropout + dropatt", dict(pre_lnorm=0, tie_weight=1, untie_r=0, same_length=1,
                                                   clamp_len=0, dropout=0.2, dropatt=0.2)),
        ("pre with Philox dropout + dropatt", dict(pre_lnorm=1, tie_weight=0, untie_r=1, same_length=1,
                                                  clamp_len=2, dropout=0.2, dropatt=0.2)),
    ]
    for title, kw in cases:
        cfg = make_config(**base, **kw)
        gen = torch.Generator().manual_seed(5)
        params = init_params(cfg, gen, torch.float64)
        names = list(params)
        L, B = cfg["tgt_len"], cfg["batch"]
        x = torch.randint(0, cfg["n_token"], (L, B), generator=gen)
        y = torch.randint(0, cfg["n_token"], (L, B), generator=gen)
        mems = [torch.randn(2, B, cfg["d_model"], generator=gen, dtype=torch.float64) for _ in range(2)]

        def f(*tensors):
            pd = dict(zip(names, tensors))
            return forward(pd, cfg, x, mems, y, step=1)[1]

        inputs = tuple(params[n].clone().requires_grad_(True) for n in names)
        try:
            ok = torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
        except Exception as e:  # gradcheck raises on mismatch
            ok = False
            print(str(e)[:2000])
        check("gradcheck float64 (%s), %d parameter elements" % (title, sum(t.numel() for t in inputs)), ok)

        # same gradients with the original's rel_shift formulation
        pa = {n: params[n].clone().requires_grad_(True) for n in names}
        pb = {n: params[n].clone().requires_grad_(True) for n in names}
        la = forward(pa, cfg, x, mems, y, step=1, attn_impl="gather")[1]
        lb = forward(pb, cfg, x, mems, y, step=1, attn_impl="shift")[1]
        la.backward()
        lb.backward()
        dmax = max((pa[n].grad - pb[n].grad).abs().max().item() for n in names)
        check("gather vs rel_shift: loss and all gradients (%s)" % title,
              abs(la.item() - lb.item()) < 1e-12 and dmax < 1e-12, "max grad diff %.3g" % dmax)

    # attention variants: attn_type 1's rel_shift(B_ + D_) == the element-by-element definition
    # (clamped and padded rows included), and each type's gradients by finite differences
    for (L, M, T, clamp) in [(3, 4, 7, 0), (3, 4, 7, 5), (4, 2, 6, 3), (5, 0, 9, 2)]:
        K, B, H, dh = M + L, 2, 2, 3
        q = torch.randn(L, B, H, dh, dtype=torch.float64)
        k = torch.randn(K, B, H, dh, dtype=torch.float64)
        u = torch.randn(H, dh, dtype=torch.float64)
        r_emb_t = torch.randn(T, H * dh, dtype=torch.float64)
        r_bias_t = torch.randn(T, H, dtype=torch.float64)
        r_emb, r_bias = learnable_rows(r_emb_t, r_bias_t, K, clamp, H, dh)
        avail = min(clamp, T) if clamp > 0 else T
        rows = [max(T - avail, T - K + p) for p in range(K)]
        ok_rows = torch.equal(r_emb, r_emb_t.view(T, H, dh)[rows]) and torch.equal(r_bias, r_bias_t[rows])
        check("attn_type 1 rows = max(lo, max_klen - K + p) (L=%d M=%d max_klen=%d clamp_len=%d)" % (L, M, T, clamp),
              ok_rows, "rows %s" % rows)
        s = attn_scores_learnable(q, k, u, r_emb, r_bias).permute(2, 3, 0, 1)
        n = attn_scores_learnable_naive(q, k, u, r_emb, r_bias, M)
        valid = ~attn_mask(L, M, 10**9, 0)[None, None].expand(B, H, L, K)
        d1 = (s - n)[valid].abs().max().item()
        check("attn_type 1: rel_shift(q r_emb + r_bias) == per-element definition (L=%d M=%d)" % (L, M), d1 <= 1e-12,
              "max diff %.3g" % d1)
    r3 = torch.arange(8.0)[:, None].expand(8, 2)
    cur, last = absolute_rows(r3, 5, 3)
    cur2, _ = absolute_rows(r3, 6, 4)
    check("attn_type 3 rows: memory r_emb[:-L][-M:], input r_emb[-L:]; row 0 padded in front",
          cur[:, 0].tolist() == [0, 1, 2, 3, 4] and last[:, 0].tolist() == [5, 6, 7] and
          cur2[:, 0].tolist() == [0, 0, 0, 1, 2, 3], "%s %s %s" % (cur[:, 0].tolist(), last[:, 0].tolist(),
                                                                   cur2[:, 0].tolist()))
    var_cases = [
        ("attn_type 1, post, clamp_len 2 (padded rows), same_length", dict(attn_type=1, pre_lnorm=0, same_length=1,
                                                                        clamp_len=2, dropout=0.0, dropatt=0.0)),
        ("attn_type 1, pre, Philox dropout + dropatt", dict(attn_type=1, pre_lnorm=1, clamp_len=0, dropout=0.2,
                                                           dropatt=0.2)),
        ("attn_type 2, post, clamp_len 3", dict(attn_type=2, pre_lnorm=0, clamp_len=3, dropout=0.0, dropatt=0.0)),
        ("attn_type 2, pre, Philox dropout", dict(attn_type=2, pre_lnorm=1, dropout=0.2, dropatt=0.2)),
        ("attn_type 3, post", dict(attn_type=3, pre_lnorm=0, dropout=0.0, dropatt=0.0, same_length=1)),
        ("attn_type 3, pre, untied, Philox dropout", dict(attn_type=3, pre_lnorm=1, tie_weight=0, dropout=0.2,
                                                         dropatt=0.2)),
    ]
    for title, kw in var_cases:
        cfg = make_config(**base, **kw)
        gen = torch.Generator().manual_seed(11)
        params = init_params(cfg, gen, torch.float64)
        for n in params:  # r_bias starts at 0 and r_emb small: spread them so every term counts
            if "r_bias" in n or "r_emb" in n:
                params[n] = torch.randn(params[n].shape, generator=gen, dtype=torch.float64) * 0.5
        names = list(params)
        L, B = cfg["tgt_len"], cfg["batch"]
        x = torch.randint(0, cfg["n_token"], (L, B), generator=gen)
        y = torch.randint(0, cfg["n_token"], (L, B), generator=gen)
        mems = [torch.randn(4, B, cfg["d_model"], generator=gen, dtype=torch.float64) for _ in range(2)]

        def fv(*tensors):
            return forward(dict(zip(names, tensors)), cfg, x, mems, y, step=1)[1]

        inputs = tuple(params[n].clone().requires_grad_(True) for n in names)
        try:
            ok = torch.autograd.gradcheck(fv, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
        except Exception as e:
            ok = False
            print(str(e)[:2000])
        check("gradcheck float64 (%s), %d parameter elements" % (title, sum(t.numel() for t in inputs)), ok)
    # attn_type 2: layer 0's new memory = [memory + R[:M]; embeddings + R[M:]] (the in-place quirk)
    cfg = make_config(**base, attn_type=2, dropout=0.0, dropatt=0.0)
    params = init_params(cfg, torch.Generator().manual_seed(1), torch.float64)
    x = torch.randint(0, 7, (3, 2))
    m0 = [torch.randn(4, 2, 4, dtype=torch.float64) for _ in range(2)]
    _, _, m1 = forward(params, cfg, x, m0)
    R = posemb(7, 4, 0, torch.float64)
    e = F.embedding(x, params["word_emb"]) * math.sqrt(4) + R[4:][:, None, :]
    ok = torch.allclose(m1[0], torch.cat([m0[0] + R[:4][:, None, :], e], 0)[3:]) and torch.equal(m1[1][:1], m0[1][3:])
    check("attn_type 2: layer 0's memory keeps the positions added to it, the other layers' do not", ok)

    # adaptive input and softmax: normalised log-probabilities, the plain softmax as the special
    # case without clusters and projections, and gradients by finite differences
    ad_cases = [
        ("2 clusters, div_val 1, projected (d_embed 6)", dict(cutoffs=(5, 11), d_embed=6)),
        ("2 clusters, div_val 2, tied projections", dict(cutoffs=(5, 11), div_val=2, d_embed=8)),
        ("2 clusters, div_val 2, untied weights and projections",
         dict(cutoffs=(5, 11), div_val=2, tie_weight=0, tie_projs=0)),
        ("1 cluster, no projections", dict(cutoffs=(9,))),
    ]
    for title, kw in ad_cases:
        merged = dict(base, n_token=17, pre_lnorm=0, untie_r=0, dropout=0.0, dropatt=0.0, tie_weight=1)
        merged.update(kw)
        cfg = make_config(**merged)
        gen = torch.Generator().manual_seed(7)
        params = init_params(cfg, gen, torch.float64)
        for n in params:  # projections of N(0, 0.01) make every logit ~0: spread them
            if "proj" in n or "cluster" in n or n == "out_bias":
                params[n] = torch.randn(params[n].shape, generator=gen, dtype=torch.float64) * 0.5
        names = list(params)
        L, B = cfg["tgt_len"], cfg["batch"]
        x = torch.randint(0, 17, (L, B), generator=gen)
        y = torch.randint(0, 17, (L, B), generator=gen)
        y[0, 0], y[0, 1], y[1, 0] = 0, 16, 9  # head, last cluster, a cluster boundary
        lp, loss, _ = forward(params, cfg, x, None, y)
        norm = torch.logsumexp(lp, -1).abs().max().item()
        check("adaptive log-probabilities sum to 1 (%s)" % title, norm < 1e-12, "max |logsumexp| %.2g" % norm)

        def fa(*tensors):
            return forward(dict(zip(names, tensors)), cfg, x, None, y)[1]

        inputs = tuple(params[n].clone().requires_grad_(True) for n in names)
        try:
            ok = torch.autograd.gradcheck(fa, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
        except Exception as e:
            ok = False
            print(str(e)[:2000])
        check("gradcheck float64 (adaptive: %s)" % title, ok)
    cfg = make_config(**base, pre_lnorm=0, tie_weight=1, untie_r=0, dropout=0.0, dropatt=0.0)
    params = init_params(cfg, torch.Generator().manual_seed(3), torch.float64)
    h = torch.randn(6, cfg["d_model"], dtype=torch.float64)
    plain = F.log_softmax(torch.matmul(h, params["word_emb"].t()) + params["out_bias"], -1)
    diff = (adaptive_logprobs(params, cfg, h) - plain).abs().max().item()
    check("adaptive softmax without clusters = log_softmax", diff < 1e-14, "max diff %.2g" % diff)

    # memory update: last mem_len rows of [m; layer input]
    cfg = make_config(**base, pre_lnorm=0, tie_weight=1, untie_r=0, dropout=0.0, dropatt=0.0)
    params = init_params(cfg, torch.Generator().manual_seed(1))
    x = torch.randint(0, 7, (3, 2))
    _, _, m1 = forward(params, cfg, x)
    _, _, m2 = forward(params, cfg, x, m1)
    h0 = F.embedding(x, params["word_emb"]) * math.sqrt(4)
    ok = m1[0].shape == (3, 2, 4) and m2[0].shape == (4, 2, 4) and torch.allclose(m1[0], h0) \
        and torch.equal(m2[0][:1], m1[0][2:]) and torch.allclose(m2[0][1:], h0)
    check("new memory = last mem_len rows of [memory; layer input]", ok)

    # schedules
    c = make_config(lr=2e-3, warmup_step=3, max_step=10, eta_min=1e-4, scheduler="cosine")
    ok = abs(lr_at(0, c) - 2e-3 / 3) < 1e-18 and abs(lr_at(3, c) - (1e-4 + 1.9e-3 * (1 + math.cos(math.pi * 0.3)) / 2)) < 1e-18
    c2 = make_config(lr=2e-3, warmup_step=3, scheduler="inv_sqrt")
    ok = ok and abs(lr_at(5, c2) - 2e-3 * math.sqrt(3) / math.sqrt(6)) < 1e-18
    check("learning-rate schedules", ok)

    print("%d check(s) failed" % check.failed if check.failed else "all checks passed")
    return 1 if check.failed else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--selftest", action="store_true", help="run the self-checks")
    a = ap.parse_args(argv)
    if a.selftest:
        return _selftest()
    ap.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
