"""txl's checkpoints in PyTorch: `txl.load(path)` returns the model as a torch.nn.Module with its
vocabulary; see docs/python.md.

    model = txl.load("runs/demo")            # a run folder, a checkpoint file or a pointer
    ids = model.encode("To be")               # the corpus's ids
    lp, mems = model.logprobs(torch.tensor(ids).view(-1, 1))
    print(model.decode(model.generate("To be", 50, seed=1)))
"""
from txl.errors import TxlError
from txl.evaluate import EvalResult
from txl.loader import load
from txl.model import TransformerXL
from txl.vocab import Vocab


def encode(model, text):
    """model.encode(text): the ids of text in the vocabulary of a loaded model."""
    return model.encode(text)


def decode(model, ids):
    """model.decode(ids): the text of ids."""
    return model.decode(ids)


__all__ = ["load", "TransformerXL", "Vocab", "encode", "decode", "EvalResult", "TxlError"]
