"""Byte-level BPE (GPT-2, Hugging Face tokenizers' ByteLevel pre-tokenizer + BPE model) exactly as
txl-prep --mode bpe and txl-generate encode text (data/bpe.c; docs/bpe.md), in pure Python with
the standard library only. The tables come from a bpe corpus (data/FORMAT.md):

    import h5py
    from txl import bpe
    with h5py.File("corpus.h5") as f:
        v, o = f["vocab"][:].tobytes(), f["vocab_offsets"][:]
        vocab = [v[o[i]:o[i + 1]] for i in range(len(o) - 1)]
        merges = [tuple(m) for m in f["bpe_merges"][:].tolist()]
        special = f["bpe_special"][:].tolist()
        prefix = bool(f.attrs["bpe_prefix_space"])
    ids = bpe.encode("To be, or not to be", vocab, merges, special, prefix)
    assert bpe.decode(ids, vocab) == "To be, or not to be".encode()

The classes \\p{L}, \\p{N} of the pattern come from unicodedata (the Unicode version of this
Python; the C tables name theirs in data/unicode_class.c), \\s is the White_Space property.
"""
import heapq
import unicodedata

__all__ = ["Encoder", "encode", "decode"]

_WHITE_SPACE = frozenset(
    [chr(c) for c in range(0x09, 0x0E)] + [" ", "\x85", "\xa0", "\u1680"] + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"])
_OTHER, _LETTER, _NUMBER, _SPACE = range(4)


def _cls(ch):
    cat = unicodedata.category(ch)[0]
    if cat == "L":
        return _LETTER
    if cat == "N":
        return _NUMBER
    return _SPACE if ch in _WHITE_SPACE else _OTHER


def _pre_token(s, i):
    """The end of the pre-token at s[i:] (GPT-2's pattern, as data/bpe.c's pre_token)."""
    n = len(s)
    if s[i] == "'" and i + 1 < n:
        if s[i + 1] in "stmd":
            return i + 2
        if s[i + 1:i + 3] in ("re", "ve", "ll"):
            return i + 3
    cls = _cls(s[i])
    j = i + 1
    if s[i] == " " and j < n and _cls(s[j]) != _SPACE:
        cls = _cls(s[j])
        j += 1
    if cls != _SPACE:
        while j < n and _cls(s[j]) == cls:
            j += 1
        return j
    last = i
    while j < n and _cls(s[j]) == _SPACE:
        last = j
        j += 1
    return last if j < n and last > i else j


class Encoder:
    """The tables of one vocabulary, built once (encode() builds one per call)."""

    def __init__(self, vocab_bytes, merges, special_ids, prefix_space, use_regex=True):
        index = {}
        for i, t in enumerate(vocab_bytes):
            if not t or t in index:
                raise ValueError(f"token {i} is empty or has the bytes of token {index.get(t)}")
            index[t] = i
        self.byte_id = []
        for b in range(256):
            if bytes([b]) not in index:
                raise ValueError(f"byte 0x{b:02X} is no token of the vocabulary")
            self.byte_id.append(index[bytes([b])])
        self.pairs = {}
        for r, (a, b) in enumerate(merges):
            m = index.get(vocab_bytes[a] + vocab_bytes[b])
            if m is None or (a, b) in self.pairs:
                raise ValueError(f"merge {r} ({a}, {b}) gives no token or repeats one")
            self.pairs[(a, b)] = (r, m)
        self.special = {}
        for i in special_ids:
            self.special[vocab_bytes[i].decode("utf-8", "surrogateescape")] = i
        self.prefix_space = bool(prefix_space)
        self.use_regex = bool(use_regex)
        self.cache = {}

    def _word(self, piece, out):
        cached = self.cache.get(piece)
        if cached is not None:
            out.extend(cached)
            return
        ids = [self.byte_id[b] for b in piece.encode("utf-8", "surrogateescape")]
        n = len(ids)
        nxt = list(range(1, n)) + [-1]
        prv = list(range(-1, n - 1))
        heap = []

        def push(p):
            q = nxt[p]
            if q >= 0:
                hit = self.pairs.get((ids[p], ids[q]))
                if hit:
                    heapq.heappush(heap, (hit[0], p, ids[p], ids[q]))

        for p in range(n - 1):
            push(p)
        while heap:
            _, p, left, right = heapq.heappop(heap)
            q = nxt[p]
            if ids[p] != left or q < 0 or ids[q] != right:
                continue  # stale: a symbol was merged since (a merged token is another id)
            ids[p] = self.pairs[(left, right)][1]
            ids[q] = -1
            nxt[p] = nxt[q]
            if nxt[q] >= 0:
                prv[nxt[q]] = p
            if prv[p] >= 0:
                push(prv[p])
            push(p)
        res = [t for t in ids if t >= 0]
        if len(self.cache) < 100000:
            self.cache[piece] = res
        out.extend(res)

    def _stretch(self, s, out):
        if not s:
            return
        if self.prefix_space and s[0] != " ":
            s = " " + s
        if not self.use_regex:
            self._word(s, out)
            return
        i = 0
        while i < len(s):
            j = _pre_token(s, i)
            self._word(s[i:j], out)
            i = j

    def encode(self, text):
        """The ids of text (a str)."""
        out = []
        pos = 0
        while self.special:
            # leftmost, then longest, of the added tokens
            best = None
            for tok, tid in self.special.items():
                k = text.find(tok, pos)
                if k >= 0 and (best is None or k < best[0] or (k == best[0] and len(tok) > len(best[1]))):
                    best = (k, tok, tid)
            if best is None:
                break
            self._stretch(text[pos:best[0]], out)
            out.append(best[2])
            pos = best[0] + len(best[1])
        self._stretch(text[pos:], out)
        return out


def encode(text: str, vocab_bytes: "list[bytes]", merges: "list[tuple[int, int]]", special_ids: "list[int]",
           prefix_space: bool, use_regex: bool = True) -> "list[int]":
    """The ids of text as txl-prep --mode bpe gives them (data/bpe.h)."""
    return Encoder(vocab_bytes, merges, special_ids, prefix_space, use_regex).encode(text)


def decode(ids: "list[int]", vocab_bytes: "list[bytes]") -> bytes:
    """The bytes of ids: the tokens' bytes concatenated."""
    return b"".join(vocab_bytes[i] for i in ids)
