#!/usr/bin/env python3
"""The txl package's checks, one subcommand per test of tests/python (which trains the runs and
runs txl-eval / txl-generate); each check prints "ok   ..." or "FAIL ...".

    check.py eval RUN CORPUS TXL_VALID_LOSS TXL_TEST_LOSS RTOL [memory-matters]
    check.py load RUN CORPUS OTHER_CORPUS SCRATCH
    check.py vocab CORPUS TEXT_DIR
    check.py generate RUN PROMPT [OUT_FILE TEMPERATURE TOP_K TOP_P SEED] ...
    check.py train RUN CORPUS RTOL
"""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import txl  # noqa: E402
from txl.errors import TxlError  # noqa: E402

FAILED = []


def check(name, ok, detail=""):
    print("%-4s %s%s" % ("ok" if ok else "FAIL", name, ("  (" + detail + ")") if detail else ""))
    if not ok:
        FAILED.append(name)


def split_ids(corpus, split):
    with h5py.File(corpus, "r") as f:
        return np.asarray(f[split][()]).astype(np.int64)


def raises(fn):
    """The TxlError fn raises (its message), or None."""
    try:
        fn()
    except TxlError as e:
        return str(e)
    return None


# ---- eval: the loss of the package's log-probabilities against txl-eval's --------------------------
def cmd_eval(run, corpus, txl_valid, txl_test, rtol, memory_matters=""):
    rtol = float(rtol)
    m = txl.load(run)
    name = os.path.basename(run)
    with h5py.File(m.path, "r") as f:
        names = sorted(f["params"].keys())
    check("%s: state_dict keys are the checkpoint's /params names (%d)" % (name, len(names)),
          sorted(m.state_dict().keys()) == names)
    for split, want in (("valid", float(txl_valid)), ("test", float(txl_test))):
        r = m.evaluate(split_ids(corpus, split))
        diff = abs(r.loss - want)
        check("%s: %s loss %.9f = txl-eval's %.6f within %g relative (%d segments, %d tokens)"
              % (name, split, r.loss, want, rtol, r.segments, r.tokens), diff <= rtol * abs(want),
              "relative %.3g" % (diff / abs(want)))
    # the comparison sees the memory: without it (and so without same_length, which needs it)
    # the loss moves by more than the tolerance
    msg = raises(lambda: txl.load(run, mem_len=0).evaluate(split_ids(corpus, "valid")))
    check("%s: same_length without memory is a TxlError" % name, msg is not None and "same_length" in msg, str(msg))
    r0 = txl.load(run, mem_len=0, same_length=False).evaluate(split_ids(corpus, "valid"))
    rel = abs(r0.loss - float(txl_valid)) / abs(float(txl_valid))
    if memory_matters != "memory-matters":
        print("info %s: without the memory (mem_len=0) the valid loss is %.6f (relative %.3g)" % (name, r0.loss, rel))
        return
    check("%s: without the memory (mem_len=0) the valid loss %.6f is off by more than the tolerance" % (name, r0.loss),
          rel > rtol, "relative %.3g" % rel)


# ---- train mode: txl's dropout masks, the loss txl-train logged ---------------------------------------
def cmd_train(run, corpus, rtol):
    """Steps 2 and 3 of a run that wrote a checkpoint after every step: the checkpoint of step s
    holds the parameters and the memory that step s + 1 starts from; in train mode with
    dropout_step = s (0-based) and the training's attention settings, the loss of that step's
    segment is the one txl-train logged."""
    import json
    logged = {r["step"]: r["loss"] for r in map(json.loads, open(os.path.join(run, "metrics.jsonl")))
              if r["kind"] == "train"}
    for s in (1, 2):
        ck = os.path.join(run, "ckpt-%08d.h5" % s)
        m = txl.load(ck)
        c = m.cfg
        m = txl.load(ck, mem_len=c["mem_len"], clamp_len=c["clamp_len"], same_length=c["same_length"])
        with h5py.File(ck, "r") as f:
            rows = int(f.attrs["mem_rows"])
            mems = [torch.from_numpy(np.asarray(f["mems"][l, :rows])) for l in range(c["n_layer"])]
        B, L = c["batch"], c["tgt_len"]
        ids = split_ids(corpus, "train")
        cols = torch.from_numpy(ids[:B * (len(ids) // B)].reshape(B, -1).T.copy())
        x, y = cols[s * L:(s + 1) * L], cols[s * L + 1:(s + 1) * L + 1]
        m.train()
        m.dropout_step = s
        with torch.no_grad():
            lt = float(m.loss(x, y, mems)[0])
            m.eval()
            le = float(m.loss(x, y, mems)[0])
        want = logged[s + 1]
        check("train mode, step %d (dropout %g, memory of %d rows): loss %.7f = txl-train's %.6f within %g relative"
              % (s + 1, c["dropout"], rows, lt, want, float(rtol)), abs(lt - want) <= float(rtol) * want,
              "relative %.3g" % (abs(lt - want) / want))
        check("step %d: eval mode (no dropout) is off by more than that (%.6f)" % (s + 1, le),
              abs(le - want) > float(rtol) * want)


# ---- load: what path names, a damaged file, a wrong corpus, no corpus --------------------------------
def cmd_load(run, corpus, other, scratch):
    def named(p):
        with open(p) as f:
            return os.path.join(run, f.readline().strip())
    latest, best = named(os.path.join(run, "latest")), named(os.path.join(run, "best"))
    for what, kw, want in (("the run folder", dict(path=run), latest),
                           ("its latest pointer", dict(path=os.path.join(run, "latest")), latest),
                           ("best=True", dict(path=run, best=True), best),
                           ("its best pointer", dict(path=os.path.join(run, "best")), best),
                           ("a checkpoint file", dict(path=best), best)):
        m = txl.load(**kw)
        step = int(os.path.basename(want)[5:-3])
        check("%s loads %s (step %d)" % (what, os.path.basename(m.path), m.step),
              os.path.samefile(m.path, want) and m.step == step and m.vocab is not None and not m.training)
    check("best (%s) and latest (%s) name different checkpoints" % (os.path.basename(best), os.path.basename(latest)),
          best != latest)
    m10 = txl.load(os.path.join(run, "ckpt-00000010.h5"))
    check("a named checkpoint loads as itself", m10.step == 10)

    bad = os.path.join(scratch, "damaged.h5")
    shutil.copyfile(latest, bad)
    with open(bad, "r+b") as f:
        f.seek(os.path.getsize(bad) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x10]))
    msg = raises(lambda: txl.load(bad))
    check("a flipped byte: TxlError naming the file", msg is not None and bad in msg and "damaged" in msg, str(msg))
    msg = raises(lambda: txl.load(os.path.join(scratch, "nothing.h5")))
    check("no such file: TxlError", msg is not None and "nothing.h5" in msg, str(msg))

    msg = raises(lambda: txl.load(run, corpus=other))
    check("another corpus: TxlError naming both files and the digests",
          msg is not None and other in msg and "vocab_digest" in msg and os.path.basename(latest) in msg, str(msg))
    m = txl.load(run, corpus=corpus)
    check("corpus= the run's own: loads", m.vocab is not None and m.vocab.path == corpus)

    # data.corpus relative: as written (from the current folder), else next to the checkpoint
    moved = os.path.join(scratch, "moved")
    os.makedirs(moved)
    shutil.copyfile(latest, os.path.join(moved, "ck.h5"))
    os.chdir(scratch)
    m = txl.load(os.path.join(moved, "ck.h5"))
    check("without its corpus: vocab None", m.vocab is None)
    msg = raises(lambda: m.encode("To be"))
    check("without its corpus: encode is a TxlError saying what to do", msg is not None and "corpus=" in msg, str(msg))
    x = torch.zeros(3, 1, dtype=torch.long)
    lp, _ = m.logprobs(x)
    check("without its corpus: the model still computes", torch.isfinite(lp).all().item())
    written = m.config["data.corpus"]
    shutil.copyfile(corpus, os.path.join(moved, written))
    m = txl.load(os.path.join(moved, "ck.h5"))
    check("data.corpus = '%s' found next to the checkpoint" % written,
          m.vocab is not None and os.path.samefile(m.vocab.path, os.path.join(moved, written)))


# ---- vocab: encode and decode against the ids txl-prep wrote ------------------------------------------
def normalised_words(text, known):
    """The words of each line one space apart, a line end after each; unknown words as <unk>."""
    from txl.vocab import _lines
    return "".join(" ".join(w if w.encode() in known else "<unk>" for w in line.split()) + "\n"
                   for line in _lines(text))


def cmd_vocab(corpus, text_dir):
    v = txl.Vocab.from_corpus(corpus)
    mode = v.mode
    with h5py.File(corpus, "r") as f:
        lower = int(f.attrs["lower"])
    for split in ("valid", "test"):
        ids = split_ids(corpus, split).tolist()
        with open(os.path.join(text_dir, split + ".txt"), "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
        shown = "%s, %s" % (mode, split)
        if mode == "spm":
            import importlib.util
            has_spm = importlib.util.find_spec("sentencepiece") is not None
            if has_spm:
                check("%s: encode(text) = txl-prep's %d ids" % (shown, len(ids)), v.encode(text) == ids)
            else:
                msg = raises(lambda: v.encode(text))
                check("%s: encode without the sentencepiece package is a TxlError naming it" % shown,
                      msg is not None and "sentencepiece" in msg, str(msg))
            dec = v.decode(ids)
            check("%s: decode(ids) = the text, line by line" % shown, dec == text.replace("\r\n", "\n"),
                  "first difference at %d" % next((i for i, (a, b) in enumerate(zip(dec, text)) if a != b), -1))
            continue
        enc = v.encode(raw if mode == "byte" else text)
        check("%s: txl.encode(corpus file, text) = Vocab.encode" % shown,
              txl.encode(corpus, raw if mode == "byte" else text) == enc)
        first = next((i for i, (a, b) in enumerate(zip(enc, ids)) if a != b), min(len(enc), len(ids)))
        check("%s: encode(text) = txl-prep's %d ids" % (shown, len(ids)), enc == ids,
              "%d ids, first difference at %d" % (len(enc), first))
        dec = v.decode(ids)
        if mode == "word":
            n_unk = ids.count(v.v.unk_id)
            check("%s: encode(decode(ids)) = ids (%d <unk>)" % (shown, n_unk), v.encode(dec) == ids and n_unk > 0)
            from txl.vocab import _lower
            check("%s: decode(ids) = the words of each line, one space apart, <unk> for the unknown" % shown,
                  dec == normalised_words(_lower(text) if lower else text, v.v.index))
        elif mode == "byte":
            check("%s: decode(ids) = the text" % shown, v.decode_bytes(ids) == raw)
        else:
            from txl.vocab import _lower
            want = "".join(c if c.encode() in v.v.index else "<unk>" for c in (_lower(text) if lower else text))
            n_unk = ids.count(v.v.unk_id)
            check("%s: decode(ids) = the text, <unk> for the %d unknown" % (shown, n_unk), dec == want)


# ---- generate: seeded, txl-generate's draws, memory = recomputation ---------------------------------
def cmd_generate(run, prompt, *settings):
    m = txl.load(run)
    V = m.cfg["n_token"]
    g1 = m.generate(prompt, 40, seed=3)
    g2 = m.generate(prompt, 40, seed=3)
    g3 = m.generate(prompt, 40, seed=4)
    check("same seed, same tokens; another seed, others", g1 == g2 and g1 != g3)
    check("40 ids, each in [0, %d)" % V, len(g1) == 40 and all(0 <= i < V for i in g1))
    print("     seed 3: %r" % (prompt + m.decode(g1)))
    check("generating leaves the model as it was", m.mem_len == 24 and m.same_length == 1 and not m.training)
    for k in range(0, len(settings), 5):
        out, T, top_k, top_p, seed = settings[k:k + 5]
        with open(out, encoding="utf-8") as f:
            lines = f.read().split("\n")
        want = "\n".join(lines[:-2]) if lines[-1] == "" else "\n".join(lines[:-1])  # all but the speed line
        g = m.generate(prompt, 200, temperature=float(T), top_k=int(top_k), top_p=float(top_p), seed=int(seed))
        got = prompt + m.decode(g)
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        check("txl-generate's 200 tokens (temperature %s, top-k %s, top-p %s, seed %s)" % (T, top_k, top_p, seed),
              got == want, "" if got == want else "first difference at character %d: %r / %r"
              % (at, got[at:at + 20], want[at:at + 20]))
    # the memory: greedy tokens with 64 rows of memory and no clamp = each token recomputed from
    # the whole context without memory (prompt + 40 tokens < 64: nothing falls out of the memory)
    mm = txl.load(run, mem_len=64, clamp_len=0)
    g = mm.generate(prompt, 40, top_k=1)
    ctx = mm.vocab.prompt_ids(prompt)
    n_prompt = len(ctx)
    with torch.no_grad():
        for _ in range(40):
            lp, _ = mm.logprobs(torch.tensor(ctx).view(-1, 1))
            ctx.append(int(lp[-1, 0].argmax()))
    check("greedy, 40 tokens past segments of %d rows: memory = recomputing the context" % mm.tgt_len,
          ctx[n_prompt:] == g and 40 > mm.tgt_len)
    msg = raises(lambda: m.generate([V], 5))
    check("an id outside the vocabulary: TxlError", msg is not None, str(msg))


def main():
    cmds = {"eval": cmd_eval, "load": cmd_load, "vocab": cmd_vocab, "generate": cmd_generate, "train": cmd_train}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__)
        return 2
    torch.set_num_threads(1)
    cmds[sys.argv[1]](*sys.argv[2:])
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
