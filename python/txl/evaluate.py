"""The evaluation walk of txl_trainer_evaluate (src/train/trainer.c), written once: the split cut
into columns, segments down the columns with the memory carried, the mean per-token loss."""
from collections import namedtuple

import torch
import torch.nn.functional as F

from txl.errors import TxlError

EvalResult = namedtuple("EvalResult", "loss tokens segments last_rows")
EvalResult.__doc__ = """loss: mean cross entropy in nats over every scored token; tokens: their number;
segments: segments walked; last_rows: rows of the last one."""


def walk(step, ids, batch_size, tgt_len, max_segments=-1, device=None):
    """Walks ids (1-D integer array or tensor) as txl evaluates a split:

    - cut into batch_size columns of col_len = len // batch_size tokens (column c = tokens
      [c col_len, (c+1) col_len); the tail is never read);
    - segments of tgt_len rows down the columns, the last one shorter: a segment starting at row
      pos has n = min(tgt_len, col_len - 1 - pos) rows, inputs rows [pos, pos+n), targets the next
      token;
    - the memory starts empty (None) and is what `step` returns, segment after segment;
    - at most max_segments segments (-1: all);
    - the loss is the mean of the per-token cross entropies (each in the scores' precision, the
      sum in float64).

    step(x [n, B] long, mems) -> (scores [n, B, V], new mems): logits or log-probabilities (the
    cross entropy of log-probabilities is their negative at the target)."""
    B, L = int(batch_size), int(tgt_len)
    ids = torch.as_tensor(ids).long().reshape(-1)
    col_len = ids.numel() // B
    if col_len < 2:
        raise TxlError("the split (%d tokens) is too short for %d columns of 1+1 tokens" % (ids.numel(), B))
    cols = ids[:B * col_len].reshape(B, col_len).t().contiguous()  # [col_len, B]
    if device is not None:
        cols = cols.to(device)
    total, tokens, seg, pos, last_n = 0.0, 0, 0, 0, 0
    mems = None
    with torch.no_grad():
        while max_segments < 0 or seg < max_segments:
            left = col_len - 1 - pos  # rows that still have a target
            if left <= 0:
                break
            n = min(L, left)
            x = cols[pos:pos + n]
            y = cols[pos + 1:pos + n + 1]
            scores, mems = step(x, mems)
            per_token = F.cross_entropy(scores.reshape(n * B, -1), y.reshape(n * B), reduction="none")
            total += float(per_token.double().sum().item())  # per-token losses summed in double
            tokens += n * B
            pos += n
            seg += 1
            last_n = n
    if tokens == 0:
        raise TxlError("no segment evaluated (max_segments %d)" % max_segments)
    return EvalResult(total / tokens, tokens, seg, last_n)
