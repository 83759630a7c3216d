"""A txl corpus file's vocabulary (data/FORMAT.md) with h5py: the tokens' bytes, the mode and
the options that turn text into ids, and the digest (txl_corpus_vocab_digest) that a checkpoint's
`vocab_digest` attribute records."""
import hashlib
import struct

import h5py
import numpy as np

from txl.errors import TxlError


def _attr(f, name, default=None):
    v = f.attrs.get(name, default)
    return v.decode() if isinstance(v, (bytes, np.bytes_)) else v


class Vocabulary:
    """`tokens` (list of bytes, by id), `mode` ("word", "char", "byte", "spm", "bpe"), `eos_id`,
    `unk_id` (-1: none), `lower`, `add_eos`, and per mode: `spm_model` (bytes), `bpe_merges`
    (list of (id, id) in rank order), `bpe_special` (ids matched literally), `bpe_prefix_space`."""

    def __init__(self, path, mode, tokens, attrs, extra):
        self.path, self.mode, self.tokens = path, mode, tokens
        self.eos_id = int(attrs.get("eos_id", -1))
        self.unk_id = int(attrs.get("unk_id", -1))
        self.lower = bool(int(attrs.get("lower", 0)))
        self.add_eos = bool(int(attrs.get("add_eos", 0)))
        self.spm_model = extra.get("spm_model")
        self.bpe_merges = extra.get("bpe_merges", [])
        self.bpe_special = extra.get("bpe_special", [])
        self.bpe_prefix_space = bool(int(attrs.get("bpe_prefix_space", 0)))
        self.index = {t: i for i, t in enumerate(tokens)}

    def __len__(self):
        return len(self.tokens)

    def digest(self):
        """txl_corpus_vocab_digest: SHA-256 of the mode and its NUL, then each token's byte length
        (8 bytes, little-endian) and bytes, in id order."""
        h = hashlib.sha256(self.mode.encode() + b"\0")
        for t in self.tokens:
            h.update(struct.pack("<Q", len(t)))
            h.update(t)
        return h.hexdigest()


def read_vocabulary(path):
    """The Vocabulary of the corpus file at path; TxlError naming the file when it is not one."""
    try:
        with h5py.File(path, "r") as f:
            if _attr(f, "format") != "txl-corpus":
                raise TxlError("%s: not a txl corpus (root attribute 'format')" % path)
            mode = _attr(f, "mode")
            if "vocab" not in f or "vocab_offsets" not in f:
                raise TxlError("%s: no /vocab or /vocab_offsets" % path)
            text = f["vocab"][()].tobytes()
            offsets = np.asarray(f["vocab_offsets"][()], dtype=np.int64)
            if len(offsets) < 2 or offsets[0] != 0 or offsets[-1] != len(text) or np.any(np.diff(offsets) <= 0):
                raise TxlError("%s: /vocab_offsets does not cut /vocab into tokens" % path)
            tokens = [text[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
            attrs = {k: _attr(f, k) for k in f.attrs}
            extra = {}
            if "spm_model" in f:
                extra["spm_model"] = f["spm_model"][()].tobytes()
            if "bpe_merges" in f:
                extra["bpe_merges"] = [tuple(int(x) for x in row) for row in np.asarray(f["bpe_merges"][()]).reshape(-1, 2)]
            if "bpe_special" in f:
                extra["bpe_special"] = [int(x) for x in np.asarray(f["bpe_special"][()]).reshape(-1)]
    except OSError as e:
        raise TxlError("%s: cannot read it as HDF5: %s" % (path, e)) from None
    if int(attrs.get("vocab_size", -1)) != len(tokens):
        raise TxlError("%s: vocab_size %s, /vocab holds %d tokens" % (path, attrs.get("vocab_size"), len(tokens)))
    return Vocabulary(path, mode, tokens, attrs, extra)
