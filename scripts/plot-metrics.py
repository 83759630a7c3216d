#!/usr/bin/env python3
"""Turns a run folder's metrics.jsonl (written by txl-train) into PNG plots:

    scripts/plot-metrics.py RUN_DIR [--out DIR]
    scripts/plot-metrics.py RUN_DIR RUN_DIR... --out DIR

writes DIR/loss.png (training loss per logged step, validation and test losses, the validation
split's unigram entropy as the bar to beat), DIR/lr.png (learning rate) and DIR/throughput.png
(training tokens/s); DIR defaults to RUN_DIR. With several run folders (an ablation: the same
config with one key changed) it writes DIR/compare.png instead: each run's training loss and
validation losses on one set of axes, labelled by the folder's name. A figure written as null (a
NaN or an infinity in the run) is a gap in its curve. Needs matplotlib (Debian:
python3-matplotlib)."""
import argparse
import json
import os
import sys


def die(msg):
    print("plot-metrics: error: " + msg, file=sys.stderr)
    sys.exit(1)


def load(path):
    rows = []
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line.strip())
                except ValueError as e:
                    die("%s: line %d is not JSON (%s)" % (path, n, e))
                if not isinstance(r, dict) or "kind" not in r:
                    die("%s: line %d has no \"kind\"" % (path, n))
                rows.append(r)
    except OSError as e:
        die("%s: %s" % (path, e.strerror))
    return one_history(rows)


def one_history(rows):
    """The rows of one history, in step order: txl-train keeps one per logged step, but a file
    written before it did holds, after each resume, the resumed run's rows again for the steps the
    stopped run had logged past its checkpoint; the later row of a kind and step (the resumed
    run's) replaces the earlier, so that no curve jumps back."""
    last = {}
    for i, r in enumerate(rows):
        last[(r["kind"], r.get("split"), r.get("step"))] = i
    kept = [r for i, r in enumerate(rows) if last[(r["kind"], r.get("split"), r.get("step"))] == i]
    return sorted(kept, key=lambda r: r["step"] if isinstance(r.get("step"), int) else -1)


def num(v):
    """A figure of metrics.jsonl as a float: null (a NaN or an infinity in the run) is a gap."""
    return float("nan") if v is None else v


def load_run(run_dir):
    """A run folder's metrics.jsonl: all its rows, and its train rows (at least one)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    rows = load(path)
    train = [r for r in rows if r["kind"] == "train"]
    if not train:
        die("%s: no training steps logged yet" % path)
    return rows, train


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
    return plt


def compare(run_dirs, out):
    """out/compare.png: the training and validation losses of several runs on one set of axes."""
    runs = [(os.path.basename(os.path.abspath(d)), load_run(d)) for d in run_dirs]
    plt = pyplot()
    os.makedirs(out, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (name, (rows, train)) in enumerate(runs):
        color = "C%d" % (i % 10)
        ax.plot([r["step"] for r in train], [num(r["loss"]) for r in train], lw=1, c=color, label=name + " train")
        pts = [r for r in rows if r["kind"] == "valid"]
        if pts:
            ax.plot([r["step"] for r in pts], [num(r["loss"]) for r in pts], "o--", ms=4, c=color,
                    label="%s valid (last %.4g)" % (name, num(pts[-1]["loss"])))
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title("loss: " + ", ".join(name for name, _ in runs))
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = os.path.join(out, "compare.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("plot-metrics: wrote %s" % path)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", nargs="+", help="folder holding metrics.jsonl (several: a comparison)")
    ap.add_argument("--out", help="folder for the PNG files (default: the run folder; needed with several)")
    a = ap.parse_args()
    if len(a.run_dir) > 1:
        if not a.out:
            die("several run folders are compared in one plot: give --out DIR for compare.png")
        return compare(a.run_dir, a.out)
    a.run_dir = a.run_dir[0]
    rows, train = load_run(a.run_dir)
    plt = pyplot()
    out = a.out or a.run_dir
    os.makedirs(out, exist_ok=True)
    quality = "bpc" if "bpc" in train[0] else "ppl"
    name = os.path.basename(os.path.abspath(a.run_dir))

    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot([r["step"] for r in train], [num(r["loss"]) for r in train], lw=1, label="train")
    for kind, style in (("valid", "o-"), ("test", "s")):
        pts = [r for r in rows if r["kind"] == kind]
        if pts:
            last = pts[-1]
            ax.plot([r["step"] for r in pts], [num(r["loss"]) for r in pts], style, ms=4,
                    label="%s (last: %s %.4g)" % (kind, quality, num(last[quality])))
    uni = [r for r in rows if r["kind"] == "unigram"]
    if uni and uni[-1]["loss"] is not None:
        ax.axhline(uni[-1]["loss"], ls="--", c="gray", lw=1, label="unigram entropy (%s)" % uni[-1]["split"])
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title("%s: loss" % name)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=110)
    plt.close(fig)

    for fname, key, label in (("lr.png", "lr", "learning rate"), ("throughput.png", "tokens_per_s", "tokens/s")):
        fig, ax = plt.subplots(figsize=(7, 3.2))
        ax.plot([r["step"] for r in train], [num(r[key]) for r in train], lw=1)
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.set_title("%s: %s" % (name, label))
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname), dpi=110)
        plt.close(fig)
    print("plot-metrics: wrote %s" % ", ".join(os.path.join(out, f) for f in ("loss.png", "lr.png", "throughput.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
