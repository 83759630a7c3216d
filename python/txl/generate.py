"""Sampling with the memory carried, as txl-generate (src/train/generate.c): the prompt primes the
memory in segments of tgt_len rows, then each new token is one query row over the memory.

The same as txl-generate, given the same settings: the prompt's ids (txl.vocab.Vocabulary.prompt_ids,
txl_gen_prompt_ids: an empty prompt is the start of a line), the segments, the memory of mem_len
rows, the clamp, no same_length, and the draw: p_v = exp((lp_v - max lp) / T) in double, cut to
top_k and then to the smallest set (by descending p, ties by id) whose mass reaches top_p, token i
drawn by the Philox uniform (word 0 of Philox4x32-10, counter (i, 0, 0, 0x5a3), key (seed,
0x6e6e6e), + 0.5, / 2^32) against the running sum. Not the same: the log-probabilities are
PyTorch's float32 (within ~1e-6 of txl's), so a draw that falls that close to the boundary
between two tokens may pick the other one; txl-generate's --recompute is not offered."""
import numpy as np
import torch

from txl.errors import TxlError
from txl.functional import philox4x32_10


def uniform(seed, i):
    """The Philox uniform in (0, 1) of draw i under seed."""
    w = philox4x32_10(i, 0, 0, 0x5A3, seed, 0x6E6E6E)[0]
    return (float(w) + 0.5) / 4294967296.0


def sample(logprobs, temperature, top_k, top_p, u01):
    """One token id from a row of log-probabilities [V] (generate.c's sample)."""
    lp = np.asarray(logprobs, dtype=np.float32).astype(np.float64)
    V = lp.shape[0]
    p = np.exp((lp - lp.max()) / temperature)
    if top_k <= 0 and top_p >= 1.0:
        acc = np.cumsum(p)  # sequential, as the C loop adds
        v = int(np.searchsorted(acc, u01 * acc[-1], side="right"))
        return min(v, V - 1)
    idx = np.lexsort((np.arange(V), -p))  # by descending p, ties: the smaller id first
    keep = top_k if 0 < top_k < V else V
    kept = np.cumsum(p[idx[:keep]])
    total = np.cumsum(p)[-1]
    reach = np.nonzero(kept >= top_p * total)[0]
    if reach.size:
        keep = int(reach[0]) + 1
    acc = np.cumsum(p[idx[:keep]])
    k = int(np.searchsorted(acc, u01 * acc[-1], side="right"))
    return int(idx[min(k, keep - 1)])


def generation_mem_len(model):
    """txl-generate's default memory: the evaluation memory, else mem_len, else tgt_len."""
    if model.mem_len >= 1:
        return model.mem_len
    return model.cfg["mem_len"] if model.cfg["mem_len"] > 0 else model.cfg["tgt_len"]


def generate(model, prompt, length, temperature=0.8, top_k=0, top_p=1.0, seed=None):
    """`length` new token ids (list of int) after prompt (a str, encoded as txl-generate does, or
    a sequence of ids). seed: the Philox key (default: the checkpoint's train.seed)."""
    if length < 0:
        raise TxlError("length %d: it must be >= 0" % length)
    if not temperature > 0:
        raise TxlError("temperature %r: it must be > 0" % temperature)
    if not 0 < top_p <= 1.0:
        raise TxlError("top_p %r: it must be in (0, 1]" % top_p)
    ids = list(model._vocab().prompt_ids(prompt)) if isinstance(prompt, str) else [int(i) for i in prompt]
    V = model.cfg["n_token"]
    if not ids:
        raise TxlError("the prompt has no tokens")
    if any(i < 0 or i >= V for i in ids):
        raise TxlError("the prompt has an id outside the vocabulary [0, %d)" % V)
    seed = model.cfg["seed"] if seed is None else int(seed)
    saved = model.mem_len, model.same_length, model.training
    model.mem_len, model.same_length = generation_mem_len(model), 0
    model.eval()
    dev = model.out_bias.device
    out = []
    try:
        with torch.no_grad():
            mems, lp = None, None
            L = model.tgt_len
            for off in range(0, len(ids), L):  # prime the memory with the prompt
                x = torch.tensor(ids[off:off + L], device=dev).view(-1, 1)
                lp, mems = model.logprobs(x, mems)
            for i in range(length):
                nxt = sample(lp[-1, 0].cpu().numpy(), temperature, top_k, top_p, uniform(seed, i))
                out.append(nxt)
                lp, mems = model.logprobs(torch.tensor([[nxt]], device=dev), mems)
    finally:
        model.mem_len, model.same_length = saved[0], saved[1]
        model.train(saved[2])
    return out
