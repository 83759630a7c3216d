"""txl's Transformer-XL as a torch.nn.Module: the parameters of a checkpoint, the forward of
txl.functional (the one implementation of the model's arithmetic), the memory carried by the caller.

Parameter names: state_dict() keys are exactly the parameter table's names (src/model/params.def,
what a checkpoint's /params holds), weights [in, out] (y = x W). The per-layer tensors
`layers.<l>.<name>` live in the ModuleList `layers` (module l registers `<name>`), the others on
the model itself, so `model.state_dict()["layers.0.w_qkv"]` is /params/layers.0.w_qkv."""
import torch

from txl import functional as Fn
from txl.errors import TxlError
from txl.evaluate import walk

ATTN_TYPES = {"rel": 0, "shaw": 1, "abs_sin": 2, "abs_learned": 3}


def _int(ck, key):
    return ck.get(key, int)


def architecture(ck):
    """txl.functional's config dict of a Checkpoint's model (the training's tgt_len and mem_len,
    which size the positional tables of attn_type 1 and 3; its dropout, clamp and same_length)."""
    at = ck.get("model.attn_type")
    if at in ATTN_TYPES:
        at = ATTN_TYPES[at]
    else:
        try:
            at = int(at)
        except ValueError:
            raise TxlError("%s: model.attn_type = '%s' is none of %s" % (ck.path, at, ", ".join(ATTN_TYPES))) from None
    cut = ck.get("model.cutoffs").strip()
    try:
        cutoffs = tuple(int(c) for c in cut.split(",")) if cut else ()
    except ValueError:
        raise TxlError("%s: model.cutoffs = '%s' is not a list of ids" % (ck.path, cut)) from None
    if "out_bias" not in ck.params:
        raise TxlError("%s: no /params/out_bias (it sizes the vocabulary)" % ck.path)
    return Fn.make_config(
        n_token=int(ck.params["out_bias"].shape[0]), n_layer=_int(ck, "model.n_layer"),
        d_model=_int(ck, "model.d_model"), n_head=_int(ck, "model.n_head"), d_head=_int(ck, "model.d_head"),
        d_inner=_int(ck, "model.d_inner"), pre_lnorm=int(ck.get("model.pre_lnorm", bool)),
        tie_weight=int(ck.get("model.tie_weight", bool)), untie_r=int(ck.get("model.untie_r", bool)),
        dropout=ck.get("model.dropout", float), dropatt=ck.get("model.dropatt", float),
        clamp_len=_int(ck, "model.clamp_len"), same_length=int(ck.get("model.same_length", bool)),
        tgt_len=_int(ck, "train.tgt_len"), mem_len=_int(ck, "train.mem_len"), batch=_int(ck, "train.batch_size"),
        seed=_int(ck, "train.seed"), cutoffs=cutoffs, div_val=_int(ck, "model.div_val"),
        d_embed=_int(ck, "model.d_embed"), tie_projs=int(ck.get("model.tie_projs", bool)), attn_type=at)


def eval_settings(ck):
    """(mem_len, clamp_len, same_length, tgt_len, batch_size) of evaluation as txl-eval takes them
    from the config: eval_mem_len (-1: train.mem_len), eval_clamp_len (-2: model.clamp_len; <= 0:
    none), eval_same_length, eval_tgt_len, eval_batch_size."""
    mem_len = _int(ck, "eval.eval_mem_len")
    mem_len = _int(ck, "train.mem_len") if mem_len < 0 else mem_len
    clamp = _int(ck, "eval.eval_clamp_len")
    clamp = _int(ck, "model.clamp_len") if clamp == -2 else clamp
    return (mem_len, clamp, int(ck.get("eval.eval_same_length", bool)), _int(ck, "eval.eval_tgt_len"),
            _int(ck, "eval.eval_batch_size"))


class _Layer(torch.nn.Module):
    """One layer's tensors (`layers.<l>.<name>` of the table, registered as `<name>`)."""


class TransformerXL(torch.nn.Module):
    """The model of a txl config (`cfg`: txl.functional.make_config's dict) with its parameters.

    mem_len, clamp_len, same_length: the attention's settings in every mode (defaults: cfg's);
    txl.load sets the checkpoint's evaluation ones. tgt_len and batch_size: evaluate()'s and
    generate()'s defaults. In eval() no dropout; in train() txl's own dropout masks (Philox keyed
    by train.seed, site and `dropout_step`, see txl.functional), so that a forward pass in train
    mode is the one txl computes at that step for columns 0..B-1 (no torch RNG involved)."""

    def __init__(self, cfg, mem_len=None, clamp_len=None, same_length=None, tgt_len=None, batch_size=None):
        super().__init__()
        self.cfg = dict(cfg)
        self.mem_len = cfg["mem_len"] if mem_len is None else int(mem_len)
        self.clamp_len = cfg["clamp_len"] if clamp_len is None else int(clamp_len)
        self.same_length = cfg["same_length"] if same_length is None else int(bool(same_length))
        self.tgt_len = cfg["tgt_len"] if tgt_len is None else int(tgt_len)
        self.batch_size = cfg["batch"] if batch_size is None else int(batch_size)
        self.dropout_step = 0
        self.vocab = None
        self.layers = torch.nn.ModuleList(_Layer() for _ in range(cfg["n_layer"]))
        for name, shape, _ in Fn.param_table(cfg):
            p = torch.nn.Parameter(torch.zeros(shape, dtype=torch.float32))
            if name.startswith("layers."):
                _, l, rest = name.split(".", 2)
                self.layers[int(l)].register_parameter(rest, p)
            else:
                self.register_parameter(name, p)

    # ---- parameters ----------------------------------------------------------------------------
    def params(self):
        """{table name: parameter}: what txl.functional takes."""
        return dict(self.named_parameters())

    def load_params(self, arrays, path="the parameters"):
        """Copies {name: array [in, out]} in (every tensor of the table with its shape, nothing else)."""
        want = {n: tuple(s) for n, s, _ in Fn.param_table(self.cfg)}
        missing = sorted(set(want) - set(arrays))
        extra = sorted(set(arrays) - set(want))
        if missing or extra:
            raise TxlError("%s: the parameters do not match the config's table: missing %s, unexpected %s"
                           % (path, missing or "none", extra or "none"))
        mine = self.params()
        with torch.no_grad():
            for n, shape in want.items():
                if tuple(arrays[n].shape) != shape:
                    raise TxlError("%s: /params/%s has shape %s, the table says %s"
                                   % (path, n, tuple(arrays[n].shape), shape))
                mine[n].copy_(torch.as_tensor(arrays[n]))

    def run_config(self):
        """The config the forward uses: cfg with this module's mem_len, clamp_len, same_length."""
        if self.same_length and self.mem_len < 1:
            raise TxlError("same_length needs memory (mem_len %d): pass same_length=False" % self.mem_len)
        c = dict(self.cfg)
        c.update(mem_len=self.mem_len, clamp_len=self.clamp_len, same_length=self.same_length)
        return c

    @property
    def plain_softmax(self):
        return not self.cfg["cutoffs"] and not Fn.adaptive_shape(self.cfg)[2]

    # ---- the model -----------------------------------------------------------------------------
    def forward(self, x, mems=None):
        """x [L, B] token ids; mems: None or the list of n_layer tensors [M, B, d_model] a previous
        call returned. Returns (scores [L, B, V], new mems): scores are logits for the plain
        softmax and log-probabilities for the adaptive one (logprobs() normalises either)."""
        x = torch.as_tensor(x, device=self.out_bias.device).long()
        if x.dim() != 2:
            raise TxlError("forward takes token ids [L, B], not a tensor of shape %s" % (tuple(x.shape),))
        if self.training:
            out, _, new = Fn.forward(self.params(), self.run_config(), x, mems, step=self.dropout_step,
                                     drop_mode="philox")
        else:
            out, _, new = Fn.forward(self.params(), self.run_config(), x, mems, drop_mode="off")
        return out, new

    def logprobs(self, x, mems=None):
        """(log p(next token) [L, B, V], new mems)."""
        out, new = self.forward(x, mems)
        return (torch.log_softmax(out, -1) if self.plain_softmax else out), new

    def loss(self, x, y, mems=None):
        """(mean cross entropy in nats of targets y [L, B], new mems)."""
        lp, new = self.logprobs(x, mems)
        y = torch.as_tensor(y, device=lp.device).long()
        return -lp.gather(-1, y.unsqueeze(-1)).mean(), new

    def evaluate(self, ids, batch_size=None, tgt_len=None, max_segments=-1):
        """The mean loss over a split's ids as txl-eval computes it (txl.evaluate.walk: columns,
        segments with the memory carried); batch_size and tgt_len default to the checkpoint's
        eval_batch_size and eval_tgt_len. Returns txl.evaluate.EvalResult (loss, tokens, ...)."""
        was = self.training
        self.eval()
        try:
            return walk(self.forward, ids, batch_size or self.batch_size, tgt_len or self.tgt_len, max_segments,
                        self.out_bias.device)
        finally:
            self.train(was)

    # ---- text ----------------------------------------------------------------------------------
    def _vocab(self):
        if self.vocab is None:
            raise TxlError("this model was loaded without a vocabulary (no corpus found: pass corpus= to txl.load)")
        return self.vocab

    def encode(self, text):
        """Token ids of text (list of int), as txl-prep makes them (txl.vocab)."""
        return self._vocab().encode(text)

    def decode(self, ids):
        """The text of token ids (str; invalid UTF-8 of byte mode replaced)."""
        return self._vocab().decode(ids)

    def generate(self, prompt, length, temperature=0.8, top_k=0, top_p=1.0, seed=None):
        """`length` token ids sampled after prompt (text or ids) with the memory carried, as
        txl-generate: see txl.generate.generate."""
        from txl.generate import generate
        return generate(self, prompt, length, temperature, top_k, top_p, seed)
