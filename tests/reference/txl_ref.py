#!/usr/bin/env python3
"""A PyTorch reference implementation of txl's Transformer-XL (attn_type 0 to 3 of the original code).

Written from the equations of Dai et al. 2019 ("Transformer-XL: Attentive Language Models Beyond
a Fixed-Length Context") and the original PyTorch code, as plain functions over a dict of
parameters named exactly as txl's parameter table (src/model/params.def; weights [in, out],
y = x W). It is the source of tests/golden/golden.h5 and of tests/reference/bench_ref.py.

Notation (time-major, tensors [T, B, ...]): L = segment length, M = memory length of this
segment, K = M + L keys, H heads of size dh, d = d_model, V = n_token.

Dropout masks are txl's (kernels/common/dropout.h): Philox4x32-10 with key (seed, site) and
counter (feature / 4, row, global column, step); word = output[feature % 4];
keep = (word >> 8) >= floor(p * 2^24); kept values are multiplied by (float)(1 / (1 - p)).
Rows, columns and features per site:
  site 0 (embedding output)  row t < L, column c, feature < d
  site 1 (positions R)       row p < K, column 0, feature < d
  site 2 (last layer output) row t < L, column c, feature < d
  site 16 + 16 l + 0 (dropatt on probabilities) row i < L, column c, feature h*K + j
  site 16 + 16 l + 1 (attention output)         row i < L, column c, feature < d
  site 16 + 16 l + 2 (FFN hidden after ReLU)    row i < L, column c, feature < d_inner
  site 16 + 16 l + 3 (FFN output)               row i < L, column c, feature < d

The attention variants (cfg["attn_type"], model.attn_type; the original's mem_transformer.py,
kimiyoung/transformer-xl, reproduced with its quirks):
  0 RelPartialLearnableMultiHeadAttn: the above (u, vb, R W_r).
  1 RelLearnableMultiHeadAttn (Shaw et al.): per layer r_emb [max_klen, H, dh] (stored
    [max_klen, H*dh]), r_w_bias [H, dh] (always per layer, as the original's
    r_w_bias[n_layer, H, dh]) and r_bias [max_klen, H]; max_klen = tgt_len + ext_len + mem_len
    (ext_len 0). With clamp_len > 0 the last clamp_len rows; when K exceeds the rows left, row 0
    (of the clamped table) repeated in front, else the last K rows. AC = (q + r_w_bias) . k,
    B_ = q . r_emb (no second bias), D_ = r_bias, BD = rel_shift(B_ + D_). No W_r, no r_r_bias.
    No position dropout (the original drops nothing of r_emb).
  2 MultiHeadAttn with absolute sinusoids: pos_emb of positions K-1 .. 0 (clamped to clamp_len)
    added to the word embeddings (pos_emb[-L:]) before the embedding dropout; at layer 0 the
    memory gets pos_emb[:M] added IN PLACE (mems_i += ...), so the memory that the next segment
    keeps from layer 0 holds the sum (the quirk is reproduced: the sum enters new_mems). Plain
    scaled dot-product attention with the same masks; no u, vb, W_r.
  3 MultiHeadAttn with learned absolute positions per layer (Al-Rfou et al.): r_emb [max_klen, d]
    per layer (the original's [n_layer, max_klen, H, dh] viewed as d_model); the layer input
    gets r_emb[-L:] (in place, so the memory, made from the layer inputs, holds it too) and, when
    there is memory, the memory gets cur = r_emb[:-L] padded in front with its row 0 when shorter
    than M, else its last M rows, in place. The memory rows' add takes a gradient (the original
    adds a parameter onto the detached memory). Choice made here: with L = max_klen the original's
    r_emb[:-L] is empty and its pad fails; this reference (and txl) use row 0 there (txl's
    config refuses segments longer than max_klen, as the original fails on them).
  Types 1 and 3 index their tables by key row p of K: row max(lo, max_klen - K + p), lo = rows
  cut by clamp_len (type 1) or 0 (type 3); positions.h in src/model says the same.
Dropout sites are the same for every type (type 1, 2 and 3 use no site 1: no position dropout).

Run `python3 tests/reference/txl_ref.py --selftest` for the self-checks.
"""
import argparse
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

# ---- dropout sites (kernels/common/dropout.h) ------------------------------------------------
SITE_EMBED = 0
SITE_POS = 1
SITE_OUTPUT = 2
SITE_LAYER0 = 16
LSITE_ATTN_PROB = 0
LSITE_ATTN_OUT = 1
LSITE_FF_HIDDEN = 2
LSITE_FF_OUT = 3

LN_EPS = 1e-5


def layer_site(layer, which):
    return SITE_LAYER0 + 16 * layer + which


# ---- Philox4x32-10 -----------------------------------------------------------------------------
_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = 0x9E3779B9
_PHILOX_W1 = 0xBB67AE85
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on broadcastable arrays of 32-bit counters; k0, k1 are scalars.
    Returns the four output words as uint32 arrays of the broadcast shape."""
    c0, c1, c2, c3 = (np.array(c, dtype=np.uint64) & _MASK32 for c in (c0, c1, c2, c3))
    c0, c1, c2, c3 = np.broadcast_arrays(c0, c1, c2, c3)
    k0 = int(k0) & 0xFFFFFFFF
    k1 = int(k1) & 0xFFFFFFFF
    for _ in range(10):
        p0 = _PHILOX_M0 * c0  # < 2^64: exact in uint64
        p1 = _PHILOX_M1 * c2
        hi0, lo0 = p0 >> _SHIFT32, p0 & _MASK32
        hi1, lo1 = p1 >> _SHIFT32, p1 & _MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
        k0 = (k0 + _PHILOX_W0) & 0xFFFFFFFF
        k1 = (k1 + _PHILOX_W1) & 0xFFFFFFFF
    return tuple(np.asarray(c).astype(np.uint32) for c in (c0, c1, c2, c3))


def _philox_scalar(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on Python ints, line by line as src/base/philox.h (self-test only)."""
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ c3 ^ k1, p0 & 0xFFFFFFFF
        k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
        k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c0, c1, c2, c3


def dropout_threshold(p):
    """floor(p * 2^24) with p rounded to float32 first, as txl_dropout_threshold(float p)."""
    return int(math.floor(float(np.float32(p)) * 16777216.0))


def dropout_scale(p):
    """(float)(1 / (1 - (double)(float)p)), as txl_dropout_scale."""
    return np.float32(1.0 / (1.0 - float(np.float32(p))))


def dropout_keep(p, seed, site, step, rows, cols, feats, col0=0):
    """Boolean keep mask [rows, cols, feats] of txl's dropout (kernels/common/dropout.h)."""
    groups = (feats + 3) // 4
    g = np.arange(groups, dtype=np.uint64)[None, None, :]
    r = np.arange(rows, dtype=np.uint64)[:, None, None]
    c = (np.uint64(col0) + np.arange(cols, dtype=np.uint64))[None, :, None]
    words = philox4x32_10(g, r, c, np.uint64(step), seed, site)  # each [rows, cols, groups]
    words = np.stack(words, axis=-1).reshape(rows, cols, 4 * groups)[:, :, :feats]
    return (words >> np.uint32(8)) >= np.uint32(dropout_threshold(p))


def dropout_multiplier(p, seed, site, step, rows, cols, feats, col0=0):
    """float32 [rows, cols, feats]: scale where kept, 0 where dropped."""
    keep = dropout_keep(p, seed, site, step, rows, cols, feats, col0)
    return keep.astype(np.float32) * dropout_scale(p)


class Dropper:
    """Applies the model's dropouts for one forward pass.

    mode 'philox': txl's masks (deterministic; identical in forward and backward, like txl);
    mode 'torch':  torch's own F.dropout (for the benchmark only);
    mode 'off':    identity (evaluation)."""

    def __init__(self, mode, seed=0, step=0, col0=0):
        assert mode in ("philox", "torch", "off")
        self.mode, self.seed, self.step, self.col0 = mode, seed, step, col0

    def _mult(self, x, p, site, rows, cols, feats):
        m = dropout_multiplier(p, self.seed, site, self.step, rows, cols, feats, self.col0)
        return torch.from_numpy(m).to(device=x.device, dtype=x.dtype)

    def rcf(self, x, p, site):
        """x [rows, cols, feats] (rows = time, cols = batch column, feats = last dim)."""
        if self.mode == "off" or p == 0.0:
            return x
        if self.mode == "torch":
            return F.dropout(x, p, training=True)
        rows, cols, feats = x.shape
        return x * self._mult(x, p, site, rows, cols, feats)

    def pos(self, R, p):
        """R [K, d]: row p, column 0, feature = d index."""
        if self.mode == "off" or p == 0.0:
            return R
        if self.mode == "torch":
            return F.dropout(R, p, training=True)
        K, d = R.shape
        return R * self._mult(R, p, SITE_POS, K, 1, d)[:, 0, :]

    def prob_bhlk(self, P, p, site):
        """P [B, H, L, K]: row i, column b, feature h*K + j."""
        if self.mode == "off" or p == 0.0:
            return P
        if self.mode == "torch":
            return F.dropout(P, p, training=True)
        B, H, L, K = P.shape
        m = self._mult(P, p, site, L, B, H * K).view(L, B, H, K).permute(1, 2, 0, 3)
        return P * m

    def prob_lkbh(self, P, p, site):
        """P [L, K, B, H] (the original code's layout): row i, column b, feature h*K + j."""
        if self.mode == "off" or p == 0.0:
            return P
        if self.mode == "torch":
            return F.dropout(P, p, training=True)
        L, K, B, H = P.shape
        m = self._mult(P, p, site, L, B, H * K).view(L, B, H, K).permute(0, 3, 1, 2)
        return P * m


# ---- configuration and parameters ------------------------------------------------------------
DEFAULTS = dict(
    n_token=29, n_layer=2, d_model=12, n_head=3, d_head=5, d_inner=19, pre_lnorm=0,
    tie_weight=1, untie_r=0, dropout=0.1, dropatt=0.0, clamp_len=0, same_length=0,
    tgt_len=5, mem_len=7, batch=3, seed=1234, lr=2.5e-4, warmup_step=0, max_step=10,
    eta_min=0.0, clip=0.25, beta1=0.9, beta2=0.999, eps=1e-8, scheduler="cosine", init_std=0.02,
    cutoffs=(), div_val=1, d_embed=-1, tie_projs=1, proj_init_std=0.01, attn_type=0,
)


def max_klen(cfg):
    """The original's max_klen = tgt_len + ext_len + mem_len (no ext_len here): rows of r_emb."""
    return cfg["tgt_len"] + cfg["mem_len"]


def make_config(**kw):
    cfg = dict(DEFAULTS)
    for k, v in kw.items():
        if k not in cfg:
            raise KeyError("unknown config key %r" % k)
        cfg[k] = v
    return cfg


def adaptive_shape(cfg):
    """The adaptive input/softmax geometry: (cut, d_emb, has_proj) with cut = [0, cutoffs..., V]
    (cluster i holds tokens cut[i] .. cut[i+1]-1), d_emb[i] = d_embed // div_val**i, has_proj:
    the embeddings are projected to d_model (div_val > 1 or d_embed != d_model)."""
    V, d = cfg["n_token"], cfg["d_model"]
    de = cfg["d_embed"] if cfg["d_embed"] > 0 else d
    cut = [0] + list(cfg["cutoffs"]) + [V]
    d_emb = [de // cfg["div_val"] ** i for i in range(len(cut) - 1)]
    return cut, d_emb, cfg["div_val"] != 1 or de != d


def param_table(cfg):
    """[(name, shape, init)] in the order of src/model/params.def (init: 'normal', 'one', 'zero',
    'proj'). Projections P [d_model, d_emb] serve both ways: input e P^T, output h P."""
    V, d, H, dh, di = cfg["n_token"], cfg["d_model"], cfg["n_head"], cfg["d_head"], cfg["d_inner"]
    HD = H * dh
    cut, d_emb, has_proj = adaptive_shape(cfg)
    nc = len(cut) - 2
    split = cfg["div_val"] != 1
    rows0 = cut[1] if split else V
    t = [("word_emb", (rows0, d_emb[0]), "normal")]
    if split:
        t += [("emb_%d" % i, (cut[i + 1] - cut[i], d_emb[i]), "normal") for i in range(1, nc + 1)]
    if has_proj:
        t.append(("emb_proj_0", (d, d_emb[0]), "proj"))
    if split:
        t += [("emb_proj_%d" % i, (d, d_emb[i]), "proj") for i in range(1, nc + 1)]
    at, T = cfg["attn_type"], max_klen(cfg)
    if at == 0 and not cfg["untie_r"]:
        t += [("r_w_bias", (H, dh), "normal"), ("r_r_bias", (H, dh), "normal")]
    for l in range(cfg["n_layer"]):
        p = "layers.%d." % l
        if at == 0 and cfg["untie_r"]:
            t += [(p + "r_w_bias", (H, dh), "normal"), (p + "r_r_bias", (H, dh), "normal")]
        if at == 1:
            t += [(p + "r_w_bias", (H, dh), "normal"), (p + "r_emb", (T, HD), "normal"),
                  (p + "r_bias", (T, H), "zero")]
        if at == 3:
            t.append((p + "r_emb", (T, d), "normal"))
        t.append((p + "w_qkv", (d, 3 * HD), "normal"))
        if at == 0:
            t.append((p + "w_r", (d, HD), "normal"))
        t += [
            (p + "w_o", (HD, d), "normal"),
            (p + "ln1_w", (d,), "one"),
            (p + "ln1_b", (d,), "zero"),
            (p + "w_ff1", (d, di), "normal"),
            (p + "b_ff1", (di,), "zero"),
            (p + "w_ff2", (di, d), "normal"),
            (p + "b_ff2", (d,), "zero"),
            (p + "ln2_w", (d,), "one"),
            (p + "ln2_b", (d,), "zero"),
        ]
    if not cfg["tie_weight"]:
        t.append(("out_weight", (rows0, d_emb[0]), "normal"))
        if split:
            t += [("out_%d" % i, (cut[i + 1] - cut[i], d_emb[i]), "normal") for i in range(1, nc + 1)]
    t.append(("out_bias", (V,), "zero"))
    if has_proj:
        t.append(("out_proj_0", (d, d_emb[0]), "proj"))
        if not cfg["tie_projs"]:
            t += [("out_proj_%d" % i, (d, d_emb[i]), "proj") for i in range(1, nc + 1)]
    if nc:
        t += [("cluster_weight", (nc, d_emb[0]), "normal"), ("cluster_bias", (nc,), "zero")]
    return t


def init_params(cfg, generator, dtype=torch.float32):
    """Draws the parameters in table order from `generator`: N(0, init_std), N(1, init_std),
    N(0, proj_init_std), 0."""
    std = float(cfg["init_std"])
    params = {}
    for name, shape, init in param_table(cfg):
        if init == "zero":
            x = torch.zeros(shape, dtype=torch.float32)
        else:
            mean = 1.0 if init == "one" else 0.0
            sd = float(cfg["proj_init_std"]) if init == "proj" else std
            x = torch.normal(mean, sd, size=shape, generator=generator, dtype=torch.float32)
        params[name] = x.to(dtype)
    return params


# ---- the model -------------------------------------------------------------------------------
def posemb(K, d, clamp_len, dtype=torch.float32):
    """R [K, d]: row p is position K-1-p (clamped to clamp_len when > 0); sin | cos, in double; on
    torch's default device (the GPU's under torch.set_default_device("cuda"))."""
    assert d % 2 == 0
    pos = np.arange(K - 1, -1, -1, dtype=np.float64)
    if clamp_len > 0:
        pos = np.minimum(pos, float(clamp_len))
    i = np.arange(d // 2, dtype=np.float64)
    inv_freq = 1.0 / np.power(10000.0, (2.0 * i) / d)
    a = pos[:, None] * inv_freq[None, :]
    R = np.concatenate([np.sin(a), np.cos(a)], axis=1)
    return torch.from_numpy(R.astype(np.float32)).to(device=torch.empty(0).device, dtype=dtype)


def same_length_shift(L, K, mem_len):
    """s of the original's tril(ones, -s): s = L - (K - mem_len) if K > mem_len else L."""
    return L - (K - mem_len) if K > mem_len else L


def attn_mask(L, M, mem_len, same_length):
    """bool [L, K], True = masked: j > M + i, and with same_length also j <= i - s."""
    K = M + L
    i = torch.arange(L)[:, None]
    j = torch.arange(K)[None, :]
    mask = j > M + i
    if same_length:
        s = same_length_shift(L, K, mem_len)
        mask = mask | (j <= i - s)
    return mask


def rel_shift(x):
    """The original code's _rel_shift on x [L, K, ...]: out[i, j] = x[i, j + L-1-i] where
    j <= M + i (elsewhere: values that the mask removes)."""
    zero_pad = torch.zeros((x.size(0), 1) + tuple(x.size()[2:]), dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view((x.size(1) + 1, x.size(0)) + tuple(x.size()[2:]))
    return x_padded[1:].view_as(x)


def rel_index(L, M):
    """idx[i, j] = K-1-(M+i-j) = j + L-1-i: the row of r at relative distance M+i-j, clamped to
    [0, K-1] (the clamped entries are masked)."""
    K = M + L
    i = torch.arange(L)[:, None]
    j = torch.arange(K)[None, :]
    return (K - 1 - (M + i - j)).clamp(0, K - 1)


def attn_scores_gather(q, k, r, u, vb, M):
    """Unscaled scores [B, H, L, K] by the direct definition:
    (q_i + u) . k_j + (q_i + vb) . r[K-1-(M+i-j)].  q [L,B,H,dh], k [K,B,H,dh], r [K,H,dh]."""
    L, B, H, _ = q.shape
    K = k.shape[0]
    ac = torch.einsum("ibhd,jbhd->bhij", q + u, k)
    bd_full = torch.einsum("ibhd,phd->bhip", q + vb, r)
    idx = rel_index(L, M).expand(B, H, L, K)
    return ac + torch.gather(bd_full, 3, idx)


def attn_scores_shift(q, k, r, u, vb):
    """Unscaled scores [L, K, B, H] as the original code computes them (einsum + _rel_shift)."""
    ac = torch.einsum("ibnd,jbnd->ijbn", q + u, k)
    bd = torch.einsum("ibnd,jnd->ijbn", q + vb, r)
    return ac + rel_shift(bd)


def attn_scores_naive(q, k, r, u, vb, M):
    """Element by element from the paper's A^rel = (a) + (b) + (c) + (d), in Python loops:
    q_i.k_j + q_i.r(M+i-j) + u.k_j + vb.r(M+i-j), with r(t) the row of position t.
    Returns [B, H, L, K] with masked (j > M + i) entries set to 0."""
    L, B, H, _ = q.shape
    K = k.shape[0]
    out = torch.zeros(B, H, L, K, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            for i in range(L):
                for j in range(K):
                    t = M + i - j  # relative distance query -> key
                    if t < 0:
                        continue
                    rt = r[K - 1 - t, h]  # R row p has position K-1-p
                    qi, kj = q[i, b, h], k[j, b, h]
                    out[b, h, i, j] = qi @ kj + qi @ rt + u[h] @ kj + vb[h] @ rt
    return out


def _lin(x, w):
    return torch.matmul(x, w)


def learnable_rows(r_emb, r_bias, K, clamp_len, H, dh):
    """attn_type 1: the rows of r_emb [max_klen, H*dh] and r_bias [max_klen, H] the attention of K
    keys uses, as the original: the last clamp_len rows (clamp_len > 0), then the last K of them,
    or all of them after copies of their first row when fewer than K. Returns ([K, H, dh], [K, H])."""
    r_emb = r_emb.view(r_emb.shape[0], H, dh)
    if clamp_len > 0:
        r_emb, r_bias = r_emb[-clamp_len:], r_bias[-clamp_len:]
    if K > r_emb.size(0):
        r_emb_pad = r_emb[0:1].expand(K - r_emb.size(0), -1, -1)
        r_bias_pad = r_bias[0:1].expand(K - r_bias.size(0), -1)
        return torch.cat([r_emb_pad, r_emb], 0), torch.cat([r_bias_pad, r_bias], 0)
    return r_emb[-K:], r_bias[-K:]


def attn_scores_learnable(q, k, u, r_emb, r_bias):
    """attn_type 1's unscaled scores [L, K, B, H] as the original (RelLearnableMultiHeadAttn):
    AC = (q + u) . k, BD = rel_shift(q . r_emb + r_bias)."""
    ac = torch.einsum("ibnd,jbnd->ijbn", q + u, k)
    b_ = torch.einsum("ibnd,jnd->ijbn", q, r_emb)
    d_ = r_bias[None, :, None]
    return ac + rel_shift(b_ + d_)


def attn_scores_learnable_naive(q, k, u, r_emb, r_bias, M):
    """The same element by element: (q_i + u) . k_j + q_i . r_emb[K-1-(M+i-j)] + r_bias[K-1-(M+i-j)]
    for j <= M + i (0 elsewhere). Returns [B, H, L, K]."""
    L, B, H, _ = q.shape
    K = k.shape[0]
    out = torch.zeros(B, H, L, K, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            for i in range(L):
                for j in range(M + i + 1):
                    p = K - 1 - (M + i - j)
                    out[b, h, i, j] = (q[i, b, h] + u[h]) @ k[j, b, h] + q[i, b, h] @ r_emb[p, h] + r_bias[p, h]
    return out


def absolute_rows(r_emb, M, L):
    """attn_type 3: (rows added to the M memory rows, rows added to the L input rows) of r_emb
    [max_klen, d], as the original: cur = r_emb[:-L], padded in front with its row 0 when shorter
    than M, else its last M rows; and r_emb[-L:]. (L = max_klen: row 0, see the module notes.)"""
    T = r_emb.shape[0]
    idx = [max(0, T - (M + L) + t) for t in range(M)]
    return r_emb[idx], r_emb[T - L:]


def layer_forward(h, m, R, params, l, cfg, drop, attn_impl="gather"):
    """One Transformer-XL layer. h [L,B,d] input, m [M,B,d] this layer's memory (no gradient but,
    with attn_type 3, that of its positions), R [K,d] positions after dropout (attn_type 0).
    Returns the layer output [L,B,d]."""
    L, B, d = h.shape
    M = m.shape[0]
    K = M + L
    H, dh = cfg["n_head"], cfg["d_head"]
    HD = H * dh
    P = lambda n: params["layers.%d.%s" % (l, n)]
    at = cfg["attn_type"]

    cat = torch.cat([m, h], 0)  # [K, B, d]
    c = F.layer_norm(cat, (d,), P("ln1_w"), P("ln1_b"), LN_EPS) if cfg["pre_lnorm"] else cat
    w_qkv = P("w_qkv")
    q = _lin(c[M:], w_qkv[:, 0:HD]).view(L, B, H, dh)
    k = _lin(c, w_qkv[:, HD:2 * HD]).view(K, B, H, dh)
    v = _lin(c, w_qkv[:, 2 * HD:3 * HD]).view(K, B, H, dh)
    scale = 1.0 / math.sqrt(dh)
    mask = attn_mask(L, M, cfg["mem_len"], cfg["same_length"])  # [L, K]
    site = layer_site(l, LSITE_ATTN_PROB)
    if at != 0:  # the original's own formulation for the other types ([L, K, B, H])
        if at == 1:
            r_emb, r_bias = learnable_rows(P("r_emb"), P("r_bias"), K, cfg["clamp_len"], H, dh)
            score = attn_scores_learnable(q, k, P("r_w_bias"), r_emb, r_bias) * scale
        else:
            score = torch.einsum("ibnd,jbnd->ijbn", q, k) * scale
        score = score.masked_fill(mask[:, :, None, None], float("-inf"))
        prob = torch.softmax(score, dim=1)
        prob = drop.prob_lkbh(prob, cfg["dropatt"], site)
        vec = torch.einsum("ijbn,jbnd->ibnd", prob, v)
        attn_impl = "done"
    if cfg["untie_r"]:
        u, vb = (P("r_w_bias"), P("r_r_bias")) if at == 0 else (None, None)
    else:
        u, vb = params.get("r_w_bias"), params.get("r_r_bias")
    r = _lin(R, P("w_r")).view(K, H, dh) if at == 0 else None
    if attn_impl == "done":
        pass
    elif attn_impl == "gather":
        score = attn_scores_gather(q, k, r, u, vb, M) * scale  # [B, H, L, K]
        score = score.masked_fill(mask[None, None], float("-inf"))
        prob = torch.softmax(score, dim=3)
        prob = drop.prob_bhlk(prob, cfg["dropatt"], site)
        vec = torch.einsum("bhij,jbhd->ibhd", prob, v)
    elif attn_impl == "shift":
        score = attn_scores_shift(q, k, r, u, vb) * scale  # [L, K, B, H]
        score = score.masked_fill(mask[:, :, None, None], float("-inf"))
        prob = torch.softmax(score, dim=1)
        prob = drop.prob_lkbh(prob, cfg["dropatt"], site)
        vec = torch.einsum("ijbn,jbnd->ibnd", prob, v)
    else:
        raise ValueError(attn_impl)
    attn_out = _lin(vec.reshape(L, B, HD), P("w_o"))
    attn_out = drop.rcf(attn_out, cfg["dropout"], layer_site(l, LSITE_ATTN_OUT))
    if cfg["pre_lnorm"]:
        out1 = h + attn_out
        ff_in = F.layer_norm(out1, (d,), P("ln2_w"), P("ln2_b"), LN_EPS)
    else:
        out1 = F.layer_norm(h + attn_out, (d,), P("ln1_w"), P("ln1_b"), LN_EPS)
        ff_in = out1
    a = torch.relu(_lin(ff_in, P("w_ff1")) + P("b_ff1"))
    a = drop.rcf(a, cfg["dropout"], layer_site(l, LSITE_FF_HIDDEN))
    f = _lin(a, P("w_ff2")) + P("b_ff2")
    f = drop.rcf(f, cfg["dropout"], layer_site(l, LSITE_FF_OUT))
    if cfg["pre_lnorm"]:
        return out1 + f
    return F.layer_norm(out1 + f, (d,), P("ln2_w"), P("ln2_b"), LN_EPS)


def forward(params, cfg, x, mems=None, target=None, step=0, drop_mode="philox", col0=0,
            attn_impl="gather"):
    """x [L, B] token ids, mems: list of n_layer tensors [M, B, d] or None (M = 0).
    Returns (logits [L,B,V], loss (mean cross entropy, or None without target), new_mems: list of
    n_layer detached tensors [min(M+L, mem_len), B, d])."""
    L, B = x.shape
    d, nl, mem_len = cfg["d_model"], cfg["n_layer"], cfg["mem_len"]
    emb = params["word_emb"]
    drop = Dropper(drop_mode, seed=cfg["seed"], step=step, col0=col0)
    if mems is None:
        mems = [emb.new_zeros(0, B, d) for _ in range(nl)]
    M = mems[0].shape[0]
    K = M + L

    at = cfg["attn_type"]
    h = adaptive_embedding(params, cfg, x) * math.sqrt(d)
    R = posemb(K, d, cfg["clamp_len"], emb.dtype)
    if at == 2:  # absolute sinusoids: word_emb + pos_emb[-qlen:], dropped together
        h = h + R[M:][:, None, :]
    h = drop.rcf(h, cfg["dropout"], SITE_EMBED)
    if at == 0:
        R = drop.pos(R, cfg["dropout"])
    new_mems = []
    for l in range(nl):
        m = mems[l].detach()
        if at == 2 and l == 0 and M > 0:  # mems_i += pos_emb[:mlen] (in place in the original)
            m = m + R[:M][:, None, :]
        if at == 3:  # mems_i += cur_emb (when mlen > 0); core_out += r_emb[-qlen:]
            cur, last = absolute_rows(params["layers.%d.r_emb" % l], M, L)
            if M > 0:
                m = m + cur[:, None, :]
            h = h + last[:, None, :]
        cat = torch.cat([m, h], 0)
        new_mems.append(cat[K - min(K, mem_len):].detach())
        h = layer_forward(h, m, R, params, l, cfg, drop, attn_impl)
    h = drop.rcf(h, cfg["dropout"], SITE_OUTPUT)
    loss = None
    if not cfg["cutoffs"] and not adaptive_shape(cfg)[2]:  # the plain softmax: logits
        w_out = emb if cfg["tie_weight"] else params["out_weight"]
        logits = torch.matmul(h, w_out.t()) + params["out_bias"]
        if target is not None:
            loss = F.cross_entropy(logits.reshape(L * B, -1), target.long().reshape(L * B))
        return logits, loss, new_mems
    logprobs = adaptive_logprobs(params, cfg, h.reshape(L * B, d))  # log-probabilities as logits
    if target is not None:
        loss = -logprobs.gather(1, target.long().reshape(L * B, 1)).mean()
    return logprobs.reshape(L, B, -1), loss, new_mems


def _cluster_tensors(params, cfg, i):
    """(E_i, W_i, b_i, emb proj, out proj) of cluster i: rows of the embedding / output weight,
    the output bias slice and the projections (None without projections)."""
    cut, _, has_proj = adaptive_shape(cfg)
    split = cfg["div_val"] != 1
    lo, hi = cut[i], cut[i + 1]
    if split:
        E = params["word_emb"] if i == 0 else params["emb_%d" % i]
        W = E if cfg["tie_weight"] else (params["out_weight"] if i == 0 else params["out_%d" % i])
    else:
        E = params["word_emb"][lo:hi]
        W = E if cfg["tie_weight"] else params["out_weight"][lo:hi]
    pe = po = None
    if has_proj:
        pe = params["emb_proj_%d" % (i if split else 0)]
        if i == 0:
            po = params["out_proj_0"]
        else:
            po = pe if cfg["tie_projs"] else params["out_proj_%d" % i]
    return E, W, params["out_bias"][lo:hi], pe, po


def adaptive_embedding(params, cfg, x):
    """The (adaptive) input embedding [L, B, d_model] before the sqrt(d_model) scale: each token
    the row of its cluster's table, projected by e P^T when there are projections."""
    cut, _, _ = adaptive_shape(cfg)
    x = x.long()
    out = None
    for i in range(len(cut) - 1):
        E, _, _, pe, _ = _cluster_tensors(params, cfg, i)
        mask = (x >= cut[i]) & (x < cut[i + 1])
        e = F.embedding((x - cut[i]).clamp(0, cut[i + 1] - cut[i] - 1), E)
        if pe is not None:
            e = torch.matmul(e, pe.t())
        e = e * mask.unsqueeze(-1).to(e.dtype)
        out = e if out is None else out + e
    return out


def adaptive_logprobs(params, cfg, h):
    """log p(v | h) [N, V] of the adaptive softmax (the original's ProjectedAdaptiveLogSoftmax):
    the head scores the shortlist (cluster 0) and one token per tail cluster (cluster i at head
    column head_size - i); a tail token's log-probability is its cluster's head log-probability
    plus its log-probability within the cluster."""
    cut, _, _ = adaptive_shape(cfg)
    nc = len(cut) - 2
    _, W0, b0, _, po0 = _cluster_tensors(params, cfg, 0)
    hw, hb = W0, b0
    if nc:
        hw = torch.cat([W0, params["cluster_weight"]], 0)
        hb = torch.cat([b0, params["cluster_bias"]], 0)
    hp = h if po0 is None else torch.matmul(h, po0)
    head_lp = F.log_softmax(torch.matmul(hp, hw.t()) + hb, dim=-1)
    parts = [head_lp[:, :cut[1]]]
    head_size = cut[1] + nc
    for i in range(1, nc + 1):
        _, W, b, _, po = _cluster_tensors(params, cfg, i)
        hp = h if po is None else torch.matmul(h, po)
        tail_lp = F.log_softmax(torch.matmul(hp, W.t()) + b, dim=-1)
        parts.append(head_lp[:, head_size - i:head_size - i + 1] + tail_lp)
    return torch.cat(parts, 1)


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
