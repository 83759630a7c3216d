"""txl's Transformer-XL (attn_type 0 to 3 of the original code) in PyTorch, as plain functions.

Written from the equations of Dai et al. 2019 ("Transformer-XL: Attentive Language Models Beyond
a Fixed-Length Context") and the original PyTorch code, as plain functions over a dict of
parameters named exactly as txl's parameter table (src/model/params.def; weights [in, out],
y = x W). txl.model.TransformerXL holds the parameters as a torch.nn.Module and calls these;
tests/reference/txl_ref.py (the reference of the golden file, tests/golden/golden.h5) adds the
optimiser and the self-checks (`txl_ref.py --selftest`).

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
"""
import math

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

    def _prob(self, P, p, site, L, B, H, K, perm):
        """The attention probabilities' mask, made as [L, B, H, K] (row i, column b, feature
        h*K + j) and permuted into P's layout."""
        if self.mode == "off" or p == 0.0:
            return P
        if self.mode == "torch":
            return F.dropout(P, p, training=True)
        return P * self._mult(P, p, site, L, B, H * K).view(L, B, H, K).permute(*perm)

    def prob_bhlk(self, P, p, site):
        """P [B, H, L, K]: row i, column b, feature h*K + j."""
        B, H, L, K = P.shape
        return self._prob(P, p, site, L, B, H, K, (1, 2, 0, 3))

    def prob_lkbh(self, P, p, site):
        """P [L, K, B, H] (the original code's layout): row i, column b, feature h*K + j."""
        L, K, B, H = P.shape
        return self._prob(P, p, site, L, B, H, K, (0, 3, 1, 2))


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
def posemb(K, d, clamp_len, dtype=torch.float32, device=None):
    """R [K, d]: row p is position K-1-p (clamped to clamp_len when > 0); sin | cos, in double; on
    `device`, else torch's default device (the GPU's under torch.set_default_device("cuda"))."""
    assert d % 2 == 0
    pos = np.arange(K - 1, -1, -1, dtype=np.float64)
    if clamp_len > 0:
        pos = np.minimum(pos, float(clamp_len))
    i = np.arange(d // 2, dtype=np.float64)
    inv_freq = 1.0 / np.power(10000.0, (2.0 * i) / d)
    a = pos[:, None] * inv_freq[None, :]
    R = np.concatenate([np.sin(a), np.cos(a)], axis=1)
    return torch.from_numpy(R.astype(np.float32)).to(device=device or torch.empty(0).device, dtype=dtype)


def same_length_shift(L, K, mem_len):
    """s of the original's tril(ones, -s): s = L - (K - mem_len) if K > mem_len else L."""
    return L - (K - mem_len) if K > mem_len else L


def attn_mask(L, M, mem_len, same_length, device=None):
    """bool [L, K], True = masked: j > M + i, and with same_length also j <= i - s."""
    K = M + L
    i = torch.arange(L, device=device)[:, None]
    j = torch.arange(K, device=device)[None, :]
    mask = j > M + i
    if same_length:
        s = same_length_shift(L, K, mem_len)
        mask = mask | (j <= i - s)
    return mask


def rel_shift(x):
    """The original code's _rel_shift on x [L, K, ...]: out[i, j] = x[i, j + L-1-i] where
    j <= M + i (elsewhere: values that the mask removes)."""
    zero_pad = torch.zeros((x.size(0), 1) + tuple(x.size()[2:]), dtype=x.dtype, device=x.device)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view((x.size(1) + 1, x.size(0)) + tuple(x.size()[2:]))
    return x_padded[1:].view_as(x)


def rel_index(L, M, device=None):
    """idx[i, j] = K-1-(M+i-j) = j + L-1-i: the row of r at relative distance M+i-j, clamped to
    [0, K-1] (the clamped entries are masked)."""
    K = M + L
    i = torch.arange(L, device=device)[:, None]
    j = torch.arange(K, device=device)[None, :]
    return (K - 1 - (M + i - j)).clamp(0, K - 1)


def attn_scores_gather(q, k, r, u, vb, M):
    """Unscaled scores [B, H, L, K] by the direct definition:
    (q_i + u) . k_j + (q_i + vb) . r[K-1-(M+i-j)].  q [L,B,H,dh], k [K,B,H,dh], r [K,H,dh]."""
    L, B, H, _ = q.shape
    K = k.shape[0]
    ac = torch.einsum("ibhd,jbhd->bhij", q + u, k)
    bd_full = torch.einsum("ibhd,phd->bhip", q + vb, r)
    idx = rel_index(L, M, q.device).expand(B, H, L, K)
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
    mask = attn_mask(L, M, cfg["mem_len"], cfg["same_length"], h.device)  # [L, K]
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
    R = posemb(K, d, cfg["clamp_len"], emb.dtype, emb.device)
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
