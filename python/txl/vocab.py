"""Text <-> token ids with a corpus's vocabulary, as txl-prep makes the ids (data/FORMAT.md, "From
text to tokens") and txl-generate prints them:

  word  lines (ends \\n, \\r\\n or a lone \\r) split on whitespace as str.split(), <eos> after each
        line (add_eos); a word outside the vocabulary is <unk> (an error when there is none);
        decode: a line's words joined by one space, <eos> a line end
  char  every code point a token, line ends as they are; outside the vocabulary: <unk>
  byte  every byte (text is UTF-8 encoded; bytes are taken as they are); decode replaces
        invalid UTF-8 (decode_bytes gives the bytes)
  spm   the stored SentencePiece model encodes each line (needs the `sentencepiece` package),
        </s> (eos_id) after it; decode joins the pieces, U+2581 is a space, and drops the space
        the model puts in front of a line; </s> is a line end, <unk> " \u2047 " as SentencePiece
        decodes it
  bpe   txl.bpe
--lower (the corpus's `lower`) lower-cases ASCII A-Z before anything else, in every mode."""
import re

from txl.corpus import read_vocabulary
from txl.errors import TxlError

_LINE_END = re.compile(r"\r\n|\r|\n")
_ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_SPM_SPACE = "\u2581"
_SPM_UNK = " \u2047 ".encode("utf-8")  # how SentencePiece decodes its <unk>


def _lower(text):
    if isinstance(text, bytes):
        return text.translate(_ASCII_LOWER)
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _lines(text):
    """The lines of text as txl-prep reads them: a last line without its end still a line."""
    parts = _LINE_END.split(text)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


class Vocab:
    """encode(text) -> ids, decode(ids) -> str over a txl.corpus.Vocabulary (`.v`): `tokens`
    (bytes by id), `mode`, `eos_id`, `unk_id`, `digest()`, `path`."""

    def __init__(self, v):
        self.v = v
        self.mode = v.mode
        self._spm = None

    @classmethod
    def from_corpus(cls, path):
        return cls(read_vocabulary(path))

    def __len__(self):
        return len(self.v)

    def digest_hex(self):
        """txl_corpus_vocab_digest of the vocabulary (what a checkpoint's vocab_digest holds)."""
        return self.v.digest()

    @property
    def path(self):
        return self.v.path

    def _id(self, tok, shown):
        i = self.v.index.get(tok)
        if i is None:
            if self.v.unk_id < 0:
                raise TxlError("%s '%s' is not in the vocabulary of %s (which has no <unk>)" % (
                    "word" if self.mode == "word" else "character", shown, self.v.path))
            return self.v.unk_id
        return i

    # ---- encode ------------------------------------------------------------------------------
    def encode(self, text):
        """The token ids (list of int) txl-prep writes for text (a str; bytes in byte mode too)."""
        if self.v.lower:
            text = _lower(text)
        m = self.mode
        if m == "byte":
            b = text if isinstance(text, bytes) else text.encode("utf-8")
            return [self.v.index[bytes([c])] for c in b]
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as e:
                raise TxlError("the text is not valid UTF-8 (%s)" % e) from None
        if m == "char":
            return [self._id(c.encode("utf-8", "surrogatepass"), c) for c in text]
        if m == "word":
            ids = []
            for line in _lines(text):
                ids += [self._id(w.encode("utf-8"), w) for w in line.split()]
                if self.v.add_eos:
                    ids.append(self.v.eos_id)
            return ids
        if m == "spm":
            return self._spm_encode(text)
        if m == "bpe":
            from txl import bpe
            return list(bpe.encode(text, self.v.tokens, self.v.bpe_merges, self.v.bpe_special, self.v.bpe_prefix_space))
        raise TxlError("%s: corpus mode '%s' is not one this package knows" % (self.v.path, m))

    def _spm_processor(self):
        if self._spm is None:
            try:
                import sentencepiece
            except ImportError:
                raise TxlError("%s: encoding text in spm mode needs the Python package 'sentencepiece' "
                               "(pip install sentencepiece); decoding does not" % self.v.path) from None
            if not self.v.spm_model:
                raise TxlError("%s: spm mode without /spm_model" % self.v.path)
            sp = sentencepiece.SentencePieceProcessor()
            sp.LoadFromSerializedProto(self.v.spm_model)
            self._spm = sp
        return self._spm

    def _spm_encode(self, text):
        sp = self._spm_processor()
        ids = []
        for line in _lines(text):
            for piece in sp.EncodeAsPieces(line):
                i = self.v.index.get(piece.encode("utf-8"))
                if i is None:
                    raise TxlError("%s: piece '%s' of the stored model is not in /vocab" % (self.v.path, piece))
                ids.append(i)
            ids.append(self.v.eos_id)
        return ids

    # ---- decode ------------------------------------------------------------------------------
    def _check(self, ids):
        ids = [int(i) for i in ids]
        for i in ids:
            if i < 0 or i >= len(self.v):
                raise TxlError("id %d is outside the vocabulary of %s [0, %d)" % (i, self.v.path, len(self.v)))
        return ids

    def decode_bytes(self, ids):
        """The text of ids as bytes (see the module's notes)."""
        ids = self._check(ids)
        t, m = self.v.tokens, self.mode
        if m == "word":
            lines, cur = [], []
            for i in ids:
                if i == self.v.eos_id:
                    lines.append(b" ".join(cur) + b"\n")
                    cur = []
                else:
                    cur.append(t[i])
            return b"".join(lines) + b" ".join(cur)
        if m == "spm":
            out, cur = [], []
            for i in ids:
                if i == self.v.eos_id:
                    out.append(self._spm_line(cur) + b"\n")
                    cur = []
                elif i == self.v.unk_id:
                    cur.append(_SPM_UNK)
                elif t[i] not in (b"<s>", b"</s>"):  # control pieces decode to nothing
                    cur.append(t[i])
            return b"".join(out) + self._spm_line(cur)
        if m == "bpe":
            from txl import bpe
            return bytes(bpe.decode(ids, self.v.tokens))
        return b"".join(t[i] for i in ids)

    @staticmethod
    def _spm_line(pieces):
        s = b"".join(pieces).decode("utf-8", "replace").replace(_SPM_SPACE, " ")
        return (s[1:] if s.startswith(" ") else s).encode("utf-8")

    def decode(self, ids):
        """The text of ids (str)."""
        return self.decode_bytes(ids).decode("utf-8", "replace")

    # ---- the prompt of generation ------------------------------------------------------------
    def prompt_ids(self, prompt):
        """The ids txl-generate gives a --prompt (txl_gen_prompt_ids): word mode splits on space,
        tab and line ends with no <eos> added (a word outside the vocabulary is <unk>); char and
        byte mode take every character (an error when one is not in the vocabulary); spm and bpe
        encode each line, </s> between lines; an empty prompt is the start of a line ("\\n" in char
        and byte mode, <eos> in the others)."""
        m = self.mode
        ids = []
        if m == "word":
            ids = [self._id(w.encode("utf-8"), w) for w in re.split(r"[ \t\n]+", prompt) if w]
        elif m in ("char", "byte"):
            units = prompt.encode("utf-8") if m == "byte" else prompt
            for c in units:
                tok = bytes([c]) if m == "byte" else c.encode("utf-8")
                if tok not in self.v.index:
                    raise TxlError("prompt: character %r is not in the vocabulary of %s" % (tok, self.v.path))
                ids.append(self.v.index[tok])
        elif m == "spm":
            parts = prompt.split("\n") if prompt else []
            for k, line in enumerate(parts):
                ids += self._spm_encode(line)[:-1] if line else []
                if k < len(parts) - 1:
                    ids.append(self.v.eos_id)
        else:
            ids = self.encode(prompt)
        if not ids:
            i = self.v.index.get(b"\n", -1) if m in ("char", "byte") else self.v.eos_id
            ids = [i if i >= 0 else 0]
        return ids
