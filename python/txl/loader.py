"""txl.load: a checkpoint (file, run folder or pointer) as a TransformerXL with its vocabulary."""
import os

from txl import checkpoint
from txl.errors import TxlError
from txl.model import TransformerXL, architecture, eval_settings
from txl.vocab import Vocab


def _corpus_path(ck, corpus):
    """The corpus to read the vocabulary from: `corpus`, else data.corpus as written, else relative
    to the checkpoint's folder (the run folder); None when none of them exists."""
    if corpus is not None:
        corpus = os.fspath(corpus)
        if not os.path.isfile(corpus):
            raise TxlError("%s: no such corpus file" % corpus)
        return corpus
    written = ck.config.get("data.corpus", "")
    if not written:
        return None
    for p in (written, os.path.join(os.path.dirname(os.path.abspath(ck.path)), written)):
        if os.path.isfile(p):
            return p
    return None


def load(path, corpus=None, best=False, device="cpu", mem_len=None, clamp_len=None, same_length=None,
         tgt_len=None, batch_size=None):
    """The model of a txl checkpoint, in eval() mode on `device`.

    path: a checkpoint file, a run folder (its `latest`, else its newest checkpoint whose digest
    checks; best=True: its `best`), or a `latest` / `best` pointer. corpus: the corpus whose
    vocabulary to use (default: the checkpoint's data.corpus, as written or relative to the
    checkpoint's folder; none found: `vocab` is None and encode/decode raise TxlError); it must
    be the vocabulary the model was trained on (the checkpoint's `vocab_digest`). mem_len,
    clamp_len, same_length, tgt_len, batch_size replace the checkpoint's evaluation settings
    (eval_mem_len, eval_clamp_len, eval_same_length, eval_tgt_len, eval_batch_size).

    The module has `.vocab` (txl.vocab.Vocab or None), `.config` ({"section.key": str}), `.step`,
    `.path` (the checkpoint file read)."""
    ck = checkpoint.read(path, best=best)
    cfg = architecture(ck)
    em, ec, es, et, eb = eval_settings(ck)
    model = TransformerXL(cfg, mem_len=em if mem_len is None else mem_len,
                          clamp_len=ec if clamp_len is None else clamp_len,
                          same_length=es if same_length is None else same_length,
                          tgt_len=et if tgt_len is None else tgt_len,
                          batch_size=eb if batch_size is None else batch_size)
    model.load_params(ck.params, ck.path)
    model.config, model.step, model.path = ck.config, ck.step, ck.path
    cpath = _corpus_path(ck, corpus)
    if cpath is not None:
        vocab = Vocab.from_corpus(cpath)
        want = ck.attrs.get("vocab_digest")
        if want:
            got = vocab.digest_hex()
            if got != want:
                raise TxlError("%s: the vocabulary of %s (digest %s...) is not the one this checkpoint was trained on "
                               "(vocab_digest %s...)" % (ck.path, cpath, got[:12], str(want)[:12]))
        elif len(vocab) != cfg["n_token"]:
            raise TxlError("%s: the vocabulary of %s has %d tokens, the model %d"
                           % (ck.path, cpath, len(vocab), cfg["n_token"]))
        model.vocab = vocab
    return model.to(device).eval()
