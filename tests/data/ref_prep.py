#!/usr/bin/env python3
"""Independent reference for txl-prep's word and char modes (tests/data only).

Word mode is the original Transformer-XL corpus handling (utils/vocabulary.py): each line of a
file opened as UTF-8 text (universal newlines) is stripped and split on whitespace, '<eos>' is
appended, the vocabulary is '<eos>' followed by collections.Counter.most_common() order. The
<unk>, min_freq and max_size rules are txl's (data/FORMAT.md). Char mode: every character of the
file read with newline='' (no newline translation); vocabulary sorted by code point.

usage: ref_prep.py word|char [--lower] [--min-freq N] [--max-size N] [--vocab-from train|all]
                   TRAIN VALID TEST OUTDIR
Writes OUTDIR/info.txt (as `corpus_tool info`), OUTDIR/vocab.txt (as `corpus_tool vocab`) and
OUTDIR/{train,valid,test}.ids (as `corpus_tool ids`). Exit status 3 when txl-prep must refuse
(max_size leaves no room for <unk>).
"""
import collections
import string
import sys

ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def escape(tok):
    out = []
    for ch in tok:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\x%02X" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def read_tokens(path, mode, lower):
    if mode == "word":
        toks = []
        with open(path, "r", encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if lower:
                    line = line.translate(ASCII_LOWER)
                toks.extend(line.split() + ["<eos>"])
        return toks
    with open(path, "r", encoding="utf-8", newline="") as f:
        text = f.read()
    if lower:
        text = text.translate(ASCII_LOWER)
    return list(text)


def main(argv):
    mode = argv[0]
    lower, min_freq, max_size, vocab_from = False, 0, 0, "all"
    rest = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--lower":
            lower = True
        elif a == "--min-freq":
            i += 1
            min_freq = int(argv[i])
        elif a == "--max-size":
            i += 1
            max_size = int(argv[i])
        elif a == "--vocab-from":
            i += 1
            vocab_from = argv[i]
        else:
            rest.append(a)
        i += 1
    paths, outdir = rest[:3], rest[3]
    splits = [read_tokens(p, mode, lower) for p in paths]

    counter = collections.Counter()
    for k, toks in enumerate(splits):
        if vocab_from == "all" or k == 0:
            counter.update(toks)
    fixed = ["<eos>"] if mode == "word" else []
    cand = [w for w, c in counter.most_common() if w not in fixed and c >= min_freq]
    limit = max_size if max_size > 0 else float("inf")
    take = cand[: int(min(len(cand), limit - len(fixed)))]
    have = set(fixed) | set(take)
    need_unk = any(t not in have for toks in splits for t in toks)
    add_unk = need_unk and "<unk>" not in have
    if add_unk:
        if limit < len(fixed) + 1:
            return 3
        cand = [w for w in cand if w != "<unk>"]
        take = cand[: int(min(len(cand), limit - len(fixed) - 1))]
    if mode == "char":
        take.sort()  # code point order
        vocab = take + (["<unk>"] if add_unk else [])
    else:
        vocab = fixed + (["<unk>"] if add_unk else []) + take
    ids = {w: i for i, w in enumerate(vocab)}
    unk_id = ids.get("<unk>", -1)
    eos_id = ids.get("<eos>", -1)

    with open(outdir + "/info.txt", "w") as f:
        f.write("mode %s\nvocab_size %d\neos_id %d\nunk_id %d\n" % (mode, len(vocab), eos_id, unk_id))
        for name, toks in zip(["train", "valid", "test"], splits):
            f.write("%s %d\n" % (name, len(toks)))
    with open(outdir + "/vocab.txt", "w", encoding="utf-8", newline="") as f:
        for w in vocab:
            f.write(escape(w) + "\n")
    for name, toks in zip(["train", "valid", "test"], splits):
        with open(outdir + "/" + name + ".ids", "w") as f:
            f.write("".join("%d\n" % ids.get(t, unk_id) for t in toks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
