#!/usr/bin/env python3
"""A small PyTorch model in the original Transformer-XL code's layout (kimiyoung/transformer-xl,
pytorch/mem_transformer.py and utils/proj_adaptive_softmax.py), written from its conventions for
this test: its module tree and parameter names, nn.Linear weights [out, in], the qkv_net output
chunked q, k, v with heads [n_head, d_head] inside each, its _rel_shift (pad a zero column, view,
drop the first row), AdaptiveEmbedding (times d_proj**0.5), ProjectedAdaptiveLogSoftmax (the head
with one column per tail cluster, tail cluster i at head column -i), the ties of MemTransformerLM
(an output table IS the embedding table, a tail projection IS the input's).

    orig_layout.py table ARGS.json                 expected names and shapes, one per line
    orig_layout.py check STATE.pt ARGS.json        STATE.pt's names, shapes, order and shared tensors
                                                   against the table and the ties; exit 1 if not
    orig_layout.py eval STATE.pt ARGS.json CORPUS --split S --tgt-len N --mem-len M
                   --clamp-len C [--same-length] --batch-size B --max-segments K
                                                   loads STATE.pt strictly, prints `loss <mean>`

`eval` walks the split as txl-eval does (B columns of len // B tokens; segments of N rows down
them, the last shorter; memory of M rows carried across), with the original's memory rule (the
last M rows of [memory; layer input]) and its eval-time mem_len / clamp_len / same_length.
"""
import argparse
import json
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def expected_table(a):
    """{name: shape} of MemTransformerLM(**a).state_dict(), from its constructors."""
    V, L, H, d, dh, di = a["n_token"], a["n_layer"], a["n_head"], a["d_model"], a["d_head"], a["d_inner"]
    de, dv, at, cut = a["d_embed"], a["div_val"], a["attn_type"], a["cutoffs"]
    T = a["tgt_len"] + a["ext_len"] + a["mem_len"]
    ends = [0] + cut + [V]
    t = {}
    if at == 0:
        t["r_w_bias"] = t["r_r_bias"] = (H, dh)
        t["pos_emb.inv_freq"] = (d // 2,)
    elif at == 1:
        t["r_emb"], t["r_w_bias"], t["r_bias"] = (L, T, H, dh), (L, H, dh), (L, T, H)
    elif at == 2:
        t["pos_emb.inv_freq"] = (d // 2,)
    else:
        t["r_emb"] = (L, T, H, dh)
    if dv == 1:
        t["word_emb.emb_layers.0.weight"] = (V, de)
        if de != d:
            t["word_emb.emb_projs.0"] = (d, de)
        t["crit.out_layers.0.weight"], t["crit.out_layers.0.bias"] = (V, de), (V,)
        if de != d:
            for i in range(len(cut) + 1):
                t["crit.out_projs.%d" % i] = (d, de)
    else:
        for i in range(len(cut) + 1):
            n, e = ends[i + 1] - ends[i], de // dv ** i
            t["word_emb.emb_layers.%d.weight" % i] = (n, e)
            t["word_emb.emb_projs.%d" % i] = (d, e)
            t["crit.out_layers.%d.weight" % i], t["crit.out_layers.%d.bias" % i] = (n, e), (n,)
            t["crit.out_projs.%d" % i] = (d, e)
    if cut:
        t["crit.cluster_weight"], t["crit.cluster_bias"] = (len(cut), de), (len(cut),)
    for l in range(L):
        p = "layers.%d." % l
        if at in (0, 1):
            t[p + "dec_attn.qkv_net.weight"] = (3 * H * dh, d)
        else:
            t[p + "dec_attn.q_net.weight"], t[p + "dec_attn.kv_net.weight"] = (H * dh, d), (2 * H * dh, d)
        if at == 0:
            t[p + "dec_attn.r_net.weight"] = (H * dh, d)
        t[p + "dec_attn.o_net.weight"] = (d, H * dh)
        t[p + "dec_attn.layer_norm.weight"] = t[p + "dec_attn.layer_norm.bias"] = (d,)
        t[p + "pos_ff.CoreNet.0.weight"], t[p + "pos_ff.CoreNet.0.bias"] = (di, d), (di,)
        t[p + "pos_ff.CoreNet.3.weight"], t[p + "pos_ff.CoreNet.3.bias"] = (d, di), (d,)
        t[p + "pos_ff.layer_norm.weight"] = t[p + "pos_ff.layer_norm.bias"] = (d,)
    return t


def expected_ties(a):
    """Pairs of names that are one tensor in the original (its tie_weight and tie_projs loops)."""
    n = len(a["cutoffs"]) + 1
    ties = []
    if a["tie_weight"]:
        ties += [("crit.out_layers.%d.weight" % i, "word_emb.emb_layers.%d.weight" % i)
                 for i in range(n if a["div_val"] != 1 else 1)]
    for i, tie in enumerate(a["tie_projs"]):
        if tie and a["div_val"] == 1 and a["d_model"] != a["d_embed"]:
            ties.append(("crit.out_projs.%d" % i, "word_emb.emb_projs.0"))
        elif tie and a["div_val"] != 1:
            ties.append(("crit.out_projs.%d" % i, "word_emb.emb_projs.%d" % i))
    return ties


def _param(*shape):
    return nn.Parameter(torch.zeros(*shape))


class Embedding(nn.Module):  # the original's AdaptiveEmbedding
    def __init__(s, a):
        super().__init__()
        s.V, s.de, s.d, s.dv = a["n_token"], a["d_embed"], a["d_model"], a["div_val"]
        s.ends = [0] + a["cutoffs"] + [s.V]
        s.emb_layers, s.emb_projs = nn.ModuleList(), nn.ParameterList()
        if s.dv == 1:
            s.emb_layers.append(nn.Embedding(s.V, s.de))
            if s.de != s.d:
                s.emb_projs.append(_param(s.d, s.de))
        else:
            for i in range(len(s.ends) - 1):
                e = s.de // s.dv ** i
                s.emb_layers.append(nn.Embedding(s.ends[i + 1] - s.ends[i], e))
                s.emb_projs.append(_param(s.d, e))

    def forward(s, x):
        if s.dv == 1:
            e = s.emb_layers[0](x)
            if s.de != s.d:
                e = F.linear(e, s.emb_projs[0])
        else:
            flat = x.reshape(-1)
            e = torch.zeros(flat.numel(), s.d)
            for i in range(len(s.ends) - 1):
                idx = ((flat >= s.ends[i]) & (flat < s.ends[i + 1])).nonzero().view(-1)
                if idx.numel():
                    e.index_copy_(0, idx, F.linear(s.emb_layers[i](flat[idx] - s.ends[i]), s.emb_projs[i]))
            e = e.view(*x.shape, s.d)
        return e * s.d ** 0.5


class Crit(nn.Module):  # the original's ProjectedAdaptiveLogSoftmax
    def __init__(s, a):
        super().__init__()
        s.V, s.de, s.d, s.dv = a["n_token"], a["d_embed"], a["d_model"], a["div_val"]
        s.ends = [0] + a["cutoffs"] + [s.V]
        s.nc = len(a["cutoffs"])
        if s.nc:
            s.cluster_weight, s.cluster_bias = _param(s.nc, s.de), _param(s.nc)
        s.out_layers, s.out_projs = nn.ModuleList(), nn.ParameterList()
        if s.dv == 1:
            s.out_layers.append(nn.Linear(s.de, s.V))
            s.proj = s.de != s.d
            if s.proj:
                for _ in range(s.nc + 1):
                    s.out_projs.append(_param(s.d, s.de))
        else:
            s.proj = True
            for i in range(s.nc + 1):
                e = s.de // s.dv ** i
                s.out_layers.append(nn.Linear(e, s.ends[i + 1] - s.ends[i]))
                s.out_projs.append(_param(s.d, e))

    def logit(s, h, w, b, i):
        if s.proj:
            h = F.linear(h, s.out_projs[i].t())
        return F.linear(h, w, b)

    def forward(s, h, y):  # per-token nll [N]
        ws, bs = [], []
        for i in range(s.nc + 1):
            if s.dv == 1:
                w, b = s.out_layers[0].weight[s.ends[i]:s.ends[i + 1]], s.out_layers[0].bias[s.ends[i]:s.ends[i + 1]]
            else:
                w, b = s.out_layers[i].weight, s.out_layers[i].bias
            if i == 0 and s.nc:
                w, b = torch.cat([w, s.cluster_weight]), torch.cat([b, s.cluster_bias])
            ws.append(w)
            bs.append(b)
        head = F.log_softmax(s.logit(h, ws[0], bs[0], 0), dim=1)
        if not s.nc:
            return -head.gather(1, y[:, None])[:, 0]
        nll = torch.zeros(y.shape[0])
        for i in range(s.nc + 1):
            idx = ((y >= s.ends[i]) & (y < s.ends[i + 1])).nonzero().view(-1)
            if not idx.numel():
                continue
            t = y[idx] - s.ends[i]
            if i == 0:
                lp = head[idx].gather(1, t[:, None])[:, 0]
            else:
                tail = F.log_softmax(s.logit(h[idx], ws[i], bs[i], i), dim=1)
                lp = head[idx, -i] + tail.gather(1, t[:, None])[:, 0]
            nll[idx] = -lp
        return nll


class FF(nn.Module):  # PositionwiseFF
    def __init__(s, d, di, pre):
        super().__init__()
        s.CoreNet = nn.Sequential(nn.Linear(d, di), nn.ReLU(), nn.Dropout(0), nn.Linear(di, d), nn.Dropout(0))
        s.layer_norm, s.pre = nn.LayerNorm(d), pre

    def forward(s, x):
        return s.CoreNet(s.layer_norm(x)) + x if s.pre else s.layer_norm(x + s.CoreNet(x))


def rel_shift(x):  # the original's _rel_shift of [qlen, klen, ...]
    pad = torch.zeros((x.size(0), 1) + x.shape[2:])
    return torch.cat([pad, x], 1).view((x.size(1) + 1, x.size(0)) + x.shape[2:])[1:].view_as(x)


class Attn(nn.Module):  # Rel(Partial)LearnableMultiHeadAttn (at 0, 1) and MultiHeadAttn (at 2, 3)
    def __init__(s, a):
        super().__init__()
        s.H, s.dh, d, s.at, s.pre = a["n_head"], a["d_head"], a["d_model"], a["attn_type"], a["pre_lnorm"]
        HD = s.H * s.dh
        if s.at in (0, 1):
            s.qkv_net = nn.Linear(d, 3 * HD, bias=False)
        else:
            s.q_net = nn.Linear(d, HD, bias=False)
            s.kv_net = nn.Linear(d, 2 * HD, bias=False)
        s.o_net = nn.Linear(HD, d, bias=False)
        s.layer_norm = nn.LayerNorm(d)
        if s.at == 0:
            s.r_net = nn.Linear(d, HD, bias=False)

    def forward(s, w, mem, mask, pos):
        L, B = w.shape[:2]
        cat = torch.cat([mem, w], 0)
        K = cat.shape[0]
        if s.at in (0, 1):
            q, k, v = torch.chunk(s.qkv_net(s.layer_norm(cat) if s.pre else cat), 3, dim=-1)
            q = q[-L:]
        else:
            q = s.q_net(w)  # the original's query: the input, never layer-normed
            k, v = torch.chunk(s.kv_net(s.layer_norm(cat) if s.pre else cat), 2, dim=-1)
        q, k, v = q.view(L, B, s.H, s.dh), k.view(K, B, s.H, s.dh), v.view(K, B, s.H, s.dh)
        if s.at == 0:
            r, u, vb = pos
            rk = s.r_net(r).view(K, s.H, s.dh)
            score = torch.einsum("ibnd,jbnd->ijbn", q + u, k) + rel_shift(torch.einsum("ibnd,jnd->ijbn", q + vb, rk))
        elif s.at == 1:
            r_emb, u, r_bias = pos
            if K > r_emb.size(0):
                r_emb = torch.cat([r_emb[0:1].expand(K - r_emb.size(0), -1, -1), r_emb])
                r_bias = torch.cat([r_bias[0:1].expand(K - r_bias.size(0), -1), r_bias])
            else:
                r_emb, r_bias = r_emb[-K:], r_bias[-K:]
            score = torch.einsum("ibnd,jbnd->ijbn", q + u[None], k) + \
                rel_shift(torch.einsum("ibnd,jnd->ijbn", q, r_emb) + r_bias[None, :, None])
        else:
            score = torch.einsum("ibnd,jbnd->ijbn", q, k)
        score = (score / s.dh ** 0.5).masked_fill(mask[:, :, None, None], float("-inf"))
        vec = torch.einsum("ijbn,jbnd->ibnd", torch.softmax(score, dim=1), v).reshape(L, B, s.H * s.dh)
        out = s.o_net(vec)
        return w + out if s.pre else s.layer_norm(w + out)


class Layer(nn.Module):
    def __init__(s, a):
        super().__init__()
        s.dec_attn = Attn(a)
        s.pos_ff = FF(a["d_model"], a["d_inner"], a["pre_lnorm"])

    def forward(s, w, mem, mask, pos):
        return s.pos_ff(s.dec_attn(w, mem, mask, pos))


class PosEmb(nn.Module):
    def __init__(s, d):
        super().__init__()
        s.register_buffer("inv_freq", 1 / (10000 ** (torch.arange(0.0, d, 2.0) / d)))

    def forward(s, pos):
        x = torch.outer(pos, s.inv_freq)
        return torch.cat([x.sin(), x.cos()], -1)


class Model(nn.Module):  # MemTransformerLM, evaluation only (no dropout)
    def __init__(s, a):
        super().__init__()
        s.a, at, L, H, dh = a, a["attn_type"], a["n_layer"], a["n_head"], a["d_head"]
        T = a["tgt_len"] + a["ext_len"] + a["mem_len"]
        if at == 0:
            s.r_w_bias, s.r_r_bias = _param(H, dh), _param(H, dh)
        elif at == 1:
            s.r_emb, s.r_w_bias, s.r_bias = _param(L, T, H, dh), _param(L, H, dh), _param(L, T, H)
        elif at == 3:
            s.r_emb = _param(L, T, H, dh)
        s.word_emb = Embedding(a)
        s.layers = nn.ModuleList(Layer(a) for _ in range(L))
        s.crit = Crit(a)
        if at in (0, 2):
            s.pos_emb = PosEmb(a["d_model"])
        if a["tie_weight"]:  # MemTransformerLM's ties: the same Parameter
            for i in range(len(s.crit.out_layers)):
                s.crit.out_layers[i].weight = s.word_emb.emb_layers[i].weight
        for i, tie in enumerate(a["tie_projs"]):
            if tie and a["div_val"] == 1 and a["d_model"] != a["d_embed"]:
                s.crit.out_projs[i] = s.word_emb.emb_projs[0]
            elif tie and a["div_val"] != 1:
                s.crit.out_projs[i] = s.word_emb.emb_projs[i]

    def forward(s, x, y, mems, mem_len, clamp_len, same_length):
        at, (L, B) = s.a["attn_type"], x.shape
        h = s.word_emb(x)
        M = mems[0].shape[0]
        K = M + L
        ones = torch.ones(L, K)
        if same_length:
            mask_len = K - mem_len
            shift = L - mask_len if mask_len > 0 else L
            mask = (torch.triu(ones, 1 + M) + torch.tril(ones, -shift)) > 0
        else:
            mask = torch.triu(ones, 1 + M) > 0
        pos_seq = torch.arange(K - 1, -1, -1.0)
        if clamp_len > 0:
            pos_seq = pos_seq.clamp(max=clamp_len)
        if at == 2:
            R = s.pos_emb(pos_seq)[:, None, :]
            h = h + R[-L:]
            if M:
                mems[0] = mems[0] + R[:M]  # the original's in-place add: the kept memory holds it
        hids = []
        for i, layer in enumerate(s.layers):
            pos = None
            if at == 0:
                pos = (s.pos_emb(pos_seq), s.r_w_bias, s.r_r_bias)
            elif at == 1:
                r_emb, r_bias = s.r_emb[i], s.r_bias[i]
                if clamp_len > 0:
                    r_emb, r_bias = r_emb[-clamp_len:], r_bias[-clamp_len:]
                pos = (r_emb, s.r_w_bias[i], r_bias)
            elif at == 3:
                re = s.r_emb[i].reshape(s.r_emb.shape[1], -1)
                if M:
                    cur = re[:-L]
                    cur = torch.cat([cur[0:1].expand(M - cur.shape[0], -1), cur]) if cur.shape[0] < M else cur[-M:]
                    mems[i] = mems[i] + cur[:, None, :]
                h = h + re[-L:][:, None, :]
            hids.append(h)
            h = layer(h, mems[i], mask, pos)
        hids.append(h)
        new = [torch.cat([m, hh], 0)[-mem_len:] if mem_len > 0 else m[:0] for m, hh in zip(mems, hids)]
        return s.crit(h.reshape(L * B, -1), y.reshape(-1)), new


def evaluate(model, ids, o):
    B, N = o.batch_size, o.tgt_len
    col_len = len(ids) // B
    cols = torch.from_numpy(ids[:B * col_len].reshape(B, col_len).T.copy())
    d = model.a["d_model"]
    mems = [torch.zeros(0, B, d) for _ in range(model.a["n_layer"] + 1)]
    total, tokens, seg, pos = 0.0, 0, 0, 0
    with torch.no_grad():
        while (o.max_segments < 0 or seg < o.max_segments) and col_len - 1 - pos > 0:
            n = min(N, col_len - 1 - pos)
            nll, mems = model(cols[pos:pos + n], cols[pos + 1:pos + n + 1], mems, o.mem_len, o.clamp_len,
                              o.same_length)
            total += float(nll.double().sum())
            tokens, pos, seg = tokens + n * B, pos + n, seg + 1
    return total / tokens, tokens, seg


def check(sd, a):
    """0 when sd has exactly the table's names and shapes, in the order of the original's module
    tree, and the tied names (only those) share one tensor."""
    bad = []
    want = expected_table(a)
    if set(sd) != set(want):
        bad.append("names: missing %s, unexpected %s" % (sorted(set(want) - set(sd)), sorted(set(sd) - set(want))))
    bad += ["%s: shape %s, the original's %s" % (n, list(sd[n].shape), list(want[n]))
            for n in sd if n in want and tuple(sd[n].shape) != tuple(want[n])]
    order = list(Model(a).state_dict())
    if not bad and list(sd) != order:
        bad.append("order %s, the original's module tree gives %s" % (list(sd), order))
    group = {}  # the tied names' classes: two ties to one tensor tie those two as well
    for x, y in expected_ties(a):
        merged = group.get(x, {x}) | group.get(y, {y})
        for n in merged:
            group[n] = merged
    ties = {frozenset((x, y)) for g in group.values() for x in g for y in g if x != y}
    names = list(sd)
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            shared = sd[x].data_ptr() == sd[y].data_ptr() and sd[x].numel() > 0
            if shared != (frozenset((x, y)) in ties):
                bad.append("%s and %s: %s" % (x, y, "one tensor, not tied in the original" if shared
                                             else "tied in the original, two tensors here"))
    for b in bad:
        print("MISMATCH " + b)
    print("%d names, %d ties: %s" % (len(sd), len(ties), "as the original" if not bad else "%d mismatches" % len(bad)))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["table", "check", "eval"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--split", default="valid")
    ap.add_argument("--tgt-len", type=int)
    ap.add_argument("--mem-len", type=int)
    ap.add_argument("--clamp-len", type=int, default=-1)
    ap.add_argument("--same-length", action="store_true")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--max-segments", type=int, default=-1)
    o = ap.parse_args()
    if o.what == "table":
        a = json.load(open(o.files[0]))["model_args"]
        for name, shape in sorted(expected_table(a).items()):
            print(name, list(shape))
        for x, y in expected_ties(a):
            print("tie", x, y)
        return 0
    if o.what == "check":
        return check(torch.load(o.files[0]), json.load(open(o.files[1]))["model_args"])
    state, args, corpus = o.files
    a = json.load(open(args))["model_args"]
    model = Model(a)
    model.load_state_dict(torch.load(state), strict=True)
    with h5py.File(corpus, "r") as f:
        ids = np.asarray(f[o.split][()]).astype(np.int64)
    loss, tokens, segs = evaluate(model, ids, o)
    print("loss %.9f" % loss)
    print("%d segments, %d tokens" % (segs, tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
