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


def _coder(source):
    """A loaded model, a Vocab, or the path of a corpus file: what encodes and decodes."""
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        return Vocab.from_corpus(source)
    return source


def encode(source, text):
    """The ids of text in the vocabulary of `source` (a loaded model, a txl.Vocab, or a corpus file)."""
    return _coder(source).encode(text)


def decode(source, ids):
    """The text of ids in the vocabulary of `source` (a loaded model, a txl.Vocab, or a corpus file)."""
    return _coder(source).decode(ids)


__all__ = ["load", "TransformerXL", "Vocab", "encode", "decode", "EvalResult", "TxlError"]
