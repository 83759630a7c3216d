#!/usr/bin/env python3
"""Makes the byte-level BPE fixture of tests/data/prep_bpe.sh, once (its output is committed):
a tokenizer trained with Hugging Face `tokenizers` on the bundled Tiny Shakespeare training text
plus sample.txt (non-ASCII letters and numbers, digits, contractions, runs of whitespace), saved
both as tokenizer.json and as vocab.json + merges.txt, and the ids `tokenizers` gives for
fixture.txt (read as Python's text mode reads it) in each form:
    expected_tokenizer.ids   Tokenizer.from_file("tokenizer.json").encode(text).ids
    expected_files.ids       ByteLevelBPETokenizer("vocab.json", "merges.txt").encode(text).ids
Run from the repository root: /usr/bin/python3 tests/data/bpe/make_fixture.py
"""
import os

from tokenizers import ByteLevelBPETokenizer, Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
VOCAB_SIZE = 600  # 256 bytes + <|endoftext|> + 343 merges


def main():
    tok = ByteLevelBPETokenizer()  # add_prefix_space off, as GPT-2
    tok.train([os.path.join(ROOT, "data/demo/tinyshakespeare/train.txt"), os.path.join(HERE, "sample.txt")],
              vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
    tok.save(os.path.join(HERE, "tokenizer.json"), pretty=True)
    tok.save_model(HERE)  # vocab.json, merges.txt
    with open(os.path.join(HERE, "fixture.txt"), encoding="utf-8") as f:
        text = f.read()
    full = Tokenizer.from_file(os.path.join(HERE, "tokenizer.json"))
    files = ByteLevelBPETokenizer(os.path.join(HERE, "vocab.json"), os.path.join(HERE, "merges.txt"))
    for name, t in (("expected_tokenizer.ids", full), ("expected_files.ids", files)):
        with open(os.path.join(HERE, name), "w") as f:
            f.write("".join(f"{i}\n" for i in t.encode(text).ids))


if __name__ == "__main__":
    main()
