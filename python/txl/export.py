"""txl-export: a txl checkpoint as a PyTorch state_dict of the original Transformer-XL code's
MemTransformerLM (kimiyoung/transformer-xl, pytorch/mem_transformer.py), with the model's
arguments and the vocabulary in a JSON file. docs/export.md lists the mapping name by name."""
import argparse
import collections
import json
import os
import sys

import numpy as np

from txl import checkpoint as txl_checkpoint
from txl import corpus as txl_corpus
from txl.errors import TxlError

ATTN_NAMES = ("rel", "shaw", "abs_sin", "abs_learned")  # the original's --attn_type 0..3


def _attn_type(ck):
    """model.attn_type as the original's number: the root attribute, else the config (a name, or
    the number INI files held before the names)."""
    if "attn_type" in ck.attrs:
        return int(ck.attrs["attn_type"])
    v = ck.config.get("model.attn_type", "0")
    if v in ATTN_NAMES:
        return ATTN_NAMES.index(v)
    if v.isdigit() and int(v) < len(ATTN_NAMES):
        return int(v)
    raise TxlError("%s: model.attn_type = '%s' is none of %s" % (ck.path, v, ", ".join(ATTN_NAMES)))


def model_args(ck, n_token):
    """The original's MemTransformerLM arguments, by its names (as its train.py passes them), for
    the checkpoint's model: the training's tgt_len, mem_len, clamp_len and same_length."""
    d_model = ck.get("model.d_model", int)
    d_embed = ck.get("model.d_embed", int)
    text = ck.get("model.cutoffs").strip()
    try:
        cutoffs = [int(x) for x in text.split(",")] if text else []
    except ValueError:
        raise TxlError("%s: model.cutoffs = '%s' is not a list of token ids" % (ck.path, text)) from None
    tie_projs = ck.get("model.tie_projs", bool)
    return collections.OrderedDict([
        ("n_token", n_token), ("n_layer", ck.get("model.n_layer", int)), ("n_head", ck.get("model.n_head", int)),
        ("d_model", d_model), ("d_head", ck.get("model.d_head", int)), ("d_inner", ck.get("model.d_inner", int)),
        ("dropout", ck.get("model.dropout", float)), ("dropatt", ck.get("model.dropatt", float)),
        ("tie_weight", ck.get("model.tie_weight", bool)), ("d_embed", d_model if d_embed < 0 else d_embed),
        ("div_val", ck.get("model.div_val", int)),
        # train.py's list: the head's projection is never tied, each tail cluster's as model.tie_projs
        ("tie_projs", [False] + [tie_projs] * len(cutoffs)),
        ("pre_lnorm", ck.get("model.pre_lnorm", bool)), ("tgt_len", ck.get("train.tgt_len", int)), ("ext_len", 0),
        ("mem_len", ck.get("train.mem_len", int)), ("cutoffs", cutoffs),
        ("same_length", ck.get("model.same_length", bool)), ("attn_type", _attn_type(ck)),
        ("clamp_len", ck.get("model.clamp_len", int)), ("sample_softmax", -1)])


def refuse_unexpressible(ck, a):
    """A TxlError for a txl model the original's MemTransformerLM computes differently or cannot hold."""
    at, H, dh, d = a["attn_type"], a["n_head"], a["d_head"], a["d_model"]
    if at == 0 and ck.get("model.untie_r", bool):
        raise TxlError("%s: model.untie_r = true (per-layer r_w_bias and r_r_bias): the original's PyTorch "
                       "MemTransformerLM has one pair shared by all layers for attn_type 0" % ck.path)
    if at in (2, 3) and a["pre_lnorm"]:
        raise TxlError("%s: attn_type %d with pre_lnorm: the original's MultiHeadAttn takes the query from the "
                       "layer input before its layer norm, txl after it; the exported model would compute "
                       "another function" % (ck.path, at))
    if at == 3 and H * dh != d:
        raise TxlError("%s: attn_type 3 with n_head * d_head = %d != d_model = %d: the original's r_emb "
                       "[n_layer, max_klen, n_head, d_head] is added to rows of d_model" % (ck.path, H * dh, d))


def _t(x):
    """A torch tensor of a numpy array (copied, contiguous)."""
    import torch
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def convert(ck, a):
    """The original's state_dict (an OrderedDict of torch tensors, in its order) of the
    checkpoint's parameters; tied tensors are one tensor under each of their names."""
    import torch
    p = ck.params
    used = set()

    def take(name, shape):
        if name not in p:
            raise TxlError("%s: no parameter '%s' (the model's configuration has it)" % (ck.path, name))
        if tuple(p[name].shape) != tuple(shape):
            raise TxlError("%s: parameter '%s' has shape %s, the configuration gives %s"
                           % (ck.path, name, list(p[name].shape), list(shape)))
        used.add(name)
        return p[name]

    n_token, L, H, dh, d = a["n_token"], a["n_layer"], a["n_head"], a["d_head"], a["d_model"]
    d_inner, d_embed, div_val, at = a["d_inner"], a["d_embed"], a["div_val"], a["attn_type"]
    cutoffs = a["cutoffs"]
    if any(not 0 < c < n_token for c in cutoffs) or sorted(set(cutoffs)) != cutoffs:
        raise TxlError("%s: model.cutoffs %s are not increasing ids inside the vocabulary of %d"
                       % (ck.path, cutoffs, n_token))
    ends = [0] + cutoffs + [n_token]
    nc = len(cutoffs)
    HD = H * dh
    T = a["tgt_len"] + a["mem_len"]  # max_klen (ext_len 0)
    sd = collections.OrderedDict()

    # MemTransformerLM's own parameters come first in its state_dict (_create_params)
    if at == 0:
        sd["r_w_bias"] = _t(take("r_w_bias", (H, dh)))
        sd["r_r_bias"] = _t(take("r_r_bias", (H, dh)))
    elif at == 1:
        sd["r_emb"] = torch.stack([_t(take("layers.%d.r_emb" % l, (T, HD))).view(T, H, dh) for l in range(L)])
        sd["r_w_bias"] = torch.stack([_t(take("layers.%d.r_w_bias" % l, (H, dh))) for l in range(L)])
        sd["r_bias"] = torch.stack([_t(take("layers.%d.r_bias" % l, (T, H))) for l in range(L)])
    elif at == 3:
        sd["r_emb"] = torch.stack([_t(take("layers.%d.r_emb" % l, (T, d))).view(T, H, dh) for l in range(L)])

    # word_emb: AdaptiveEmbedding (tables [rows, d_emb_i], projections [d_model, d_emb_i], as txl's)
    emb, eproj = [], []
    if div_val == 1:
        emb.append(_t(take("word_emb", (n_token, d_embed))))
        if d_embed != d:
            eproj.append(_t(take("emb_proj_0", (d, d_embed))))
    else:
        for i in range(nc + 1):
            de = d_embed // div_val ** i
            emb.append(_t(take("word_emb" if i == 0 else "emb_%d" % i, (ends[i + 1] - ends[i], de))))
            eproj.append(_t(take("emb_proj_%d" % i, (d, de))))
    for i, w in enumerate(emb):
        sd["word_emb.emb_layers.%d.weight" % i] = w
    for i, w in enumerate(eproj):
        sd["word_emb.emb_projs.%d" % i] = w

    # layers: nn.Linear weights are [out, in], txl's [in, out]
    for l in range(L):
        q = "layers.%d." % l
        g = lambda n, shape: take(q + n, shape)
        w_qkv = g("w_qkv", (d, 3 * HD))
        if at in (0, 1):  # RelPartialLearnable / RelLearnable: qkv_net, chunked q, k, v
            sd[q + "dec_attn.qkv_net.weight"] = _t(w_qkv.T)
        else:  # MultiHeadAttn: q_net, then kv_net chunked k, v
            sd[q + "dec_attn.q_net.weight"] = _t(w_qkv[:, :HD].T)
            sd[q + "dec_attn.kv_net.weight"] = _t(w_qkv[:, HD:].T)
        sd[q + "dec_attn.o_net.weight"] = _t(g("w_o", (HD, d)).T)
        sd[q + "dec_attn.layer_norm.weight"] = _t(g("ln1_w", (d,)))
        sd[q + "dec_attn.layer_norm.bias"] = _t(g("ln1_b", (d,)))
        if at == 0:
            sd[q + "dec_attn.r_net.weight"] = _t(g("w_r", (d, HD)).T)
        sd[q + "pos_ff.CoreNet.0.weight"] = _t(g("w_ff1", (d, d_inner)).T)
        sd[q + "pos_ff.CoreNet.0.bias"] = _t(g("b_ff1", (d_inner,)))
        sd[q + "pos_ff.CoreNet.3.weight"] = _t(g("w_ff2", (d_inner, d)).T)
        sd[q + "pos_ff.CoreNet.3.bias"] = _t(g("b_ff2", (d,)))
        sd[q + "pos_ff.layer_norm.weight"] = _t(g("ln2_w", (d,)))
        sd[q + "pos_ff.layer_norm.bias"] = _t(g("ln2_b", (d,)))

    # crit: ProjectedAdaptiveLogSoftmax (its own cluster_* first, then out_layers, out_projs)
    if nc > 0:
        sd["crit.cluster_weight"] = _t(take("cluster_weight", (nc, d_embed)))
        sd["crit.cluster_bias"] = _t(take("cluster_bias", (nc,)))
    bias = take("out_bias", (n_token,))
    tie_w, tie_p = a["tie_weight"], a["tie_projs"]
    if div_val == 1:
        sd["crit.out_layers.0.weight"] = emb[0] if tie_w else _t(take("out_weight", (n_token, d_embed)))
        sd["crit.out_layers.0.bias"] = _t(bias)
    else:
        for i in range(nc + 1):
            rows, de = ends[i + 1] - ends[i], d_embed // div_val ** i
            own = "out_weight" if i == 0 else "out_%d" % i
            sd["crit.out_layers.%d.weight" % i] = emb[i] if tie_w else _t(take(own, (rows, de)))
            sd["crit.out_layers.%d.bias" % i] = _t(bias[ends[i]:ends[i + 1]])
    if div_val != 1 or d_embed != d:  # the original's out_projs are None (absent) otherwise
        for i in range(nc + 1):
            de = d_embed // div_val ** i if div_val != 1 else d_embed
            if i > 0 and tie_p[i]:
                sd["crit.out_projs.%d" % i] = eproj[i if div_val != 1 else 0]
            else:
                sd["crit.out_projs.%d" % i] = _t(take("out_proj_%d" % i, (d, de)))

    if at in (0, 2):  # PositionalEmbedding's buffer (persistent: in the state_dict)
        sd["pos_emb.inv_freq"] = 1 / (10000 ** (torch.arange(0.0, d, 2.0) / d))
    left = sorted(set(p) - used)
    if left:
        raise TxlError("%s: parameters the configuration does not explain: %s" % (ck.path, ", ".join(left)))
    return sd


def symbol(token):
    """A token's bytes as a JSON string: its UTF-8 text; bytes that are not UTF-8 as \\xHH (Python's
    backslashreplace; the exact bytes are in the JSON's vocab.non_utf8)."""
    return token.decode("utf-8", errors="backslashreplace")


def vocab_json(v):
    non_utf8 = collections.OrderedDict()
    for i, t in enumerate(v.tokens):
        try:
            t.decode("utf-8")
        except UnicodeDecodeError:
            non_utf8[str(i)] = t.hex()
    return collections.OrderedDict([
        ("mode", v.mode), ("size", len(v.tokens)), ("eos_id", v.eos_id), ("unk_id", v.unk_id),
        ("eos", symbol(v.tokens[v.eos_id]) if 0 <= v.eos_id < len(v.tokens) else None),
        ("unk", symbol(v.tokens[v.unk_id]) if 0 <= v.unk_id < len(v.tokens) else None),
        ("lower", v.lower), ("add_eos", v.add_eos), ("digest", v.digest()),
        ("symbols", [symbol(t) for t in v.tokens]), ("non_utf8", non_utf8)])


def _write(path, write):
    """write(tmp) then rename over path: a failure leaves no partial file at path."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def export(target, out, json_out=None, corpus=None, best=False):
    """Writes the state_dict to `out` (and the JSON to json_out); returns (state_dict, info)."""
    import torch
    ck = txl_checkpoint.read(target, best=best)
    cpath = corpus or ck.get("data.corpus")
    if not os.path.isfile(cpath):
        raise TxlError("%s: no such corpus file (the checkpoint's data.corpus; --corpus names another)" % cpath)
    vocab = txl_corpus.read_vocabulary(cpath)
    want = ck.attrs.get("vocab_digest")
    if want and want != vocab.digest():
        raise TxlError("%s: the vocabulary of %s is not the checkpoint's (vocab_digest differs)" % (ck.path, cpath))
    a = model_args(ck, len(vocab))
    refuse_unexpressible(ck, a)
    sd = convert(ck, a)
    info = collections.OrderedDict([
        ("model_args", a),
        ("txl", collections.OrderedDict([
            ("checkpoint", os.path.abspath(ck.path)), ("step", ck.step), ("run_id", ck.attrs.get("run_id")),
            ("attn_type", ATTN_NAMES[a["attn_type"]]), ("corpus", os.path.abspath(cpath)),
            ("vocab_digest", want or None)])),
        ("vocab", vocab_json(vocab))])
    _write(out, lambda tmp: torch.save(sd, tmp))
    if json_out:
        def put(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(info, f, indent=1, ensure_ascii=False)
                f.write("\n")
        try:
            _write(json_out, put)
        except BaseException:
            os.remove(out)
            raise
    return sd, info


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="txl-export",
        description="Writes a txl checkpoint as a PyTorch state_dict (torch.save of an OrderedDict) of the original "
                    "Transformer-XL code's MemTransformerLM (pytorch/mem_transformer.py): its parameter names and "
                    "shapes for the same arguments, nn.Linear weights [out, in], tied tensors shared. "
                    "The mapping: docs/export.md.")
    ap.add_argument("checkpoint", metavar="CKPT",
                    help="a checkpoint file, a run folder (its 'latest', else its newest whole checkpoint) or a "
                         "'latest' / 'best' pointer file")
    ap.add_argument("out", metavar="OUT.pt", help="the state_dict file to write (written whole or not at all)")
    ap.add_argument("--json", metavar="OUT.json",
                    help="also write the MemTransformerLM arguments by the original's names, the vocabulary "
                         "(symbols in id order), txl's step and source checkpoint")
    ap.add_argument("--corpus", metavar="FILE",
                    help="the corpus whose vocabulary the model uses (default: the checkpoint's data.corpus); "
                         "its vocabulary must be the checkpoint's (vocab_digest)")
    ap.add_argument("--best", action="store_true", help="with a run folder: the checkpoint its 'best' pointer names")
    o = ap.parse_args(argv)
    try:
        sd, info = export(o.checkpoint, o.out, o.json, o.corpus, o.best)
    except TxlError as e:
        print("txl: error: %s" % e, file=sys.stderr)
        return 1
    except (OSError, ImportError) as e:
        print("txl: error: %s" % e, file=sys.stderr)
        return 1
    n = sum(t.numel() for t in {id(t): t for t in sd.values()}.values())
    print("%s: %d tensors (%d values) of step %d of %s" % (o.out, len(sd), n, info["txl"]["step"],
                                                           info["txl"]["checkpoint"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
