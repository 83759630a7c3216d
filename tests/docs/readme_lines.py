#!/usr/bin/env python3
"""The example command lines of a README (its indented code lines), as records for
test_readme.sh, one per line, tab-separated, each starting with the README line number:

  CONFIG  n  path          a configs/ path a command names
  SCRIPT  n  path          a scripts/ or slurm/ program a command runs
  TOOL    n  name          a txl tool a command runs (txl-train, ...)
  OPTION  n  tool  --opt   an option given to that tool
  KEY     n  section.key   a key a --set sets
  RUN     n  tool  args... a command that needs no corpus or run and is run for real: --check, --help
  BAD     n  text          a line that does not split into words

  readme_lines.py README.md
"""
import re
import shlex
import sys

TOOL = re.compile(r"^(?:build/bin/)?(txl-[a-z]+)$")
# $TXL: the clone, in the lines a user runs from a work folder of their own (README.md, "Using
# it"); such a line names the same files as one run from the clone
CLONE = re.compile(r"^(\S*?)\$\{?TXL\}?/")


def in_clone(word):
    """word as it reads from the clone: $TXL/configs/x.ini -> configs/x.ini, a=$TXL/y -> a=y."""
    return CLONE.sub(r"\1", word)


def command_lines(path):
    """(line number, text) of each indented code line, continuation lines joined."""
    out, pending, start = [], "", 0
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if not pending and not line.startswith("    "):
            continue
        if not pending:
            start = n
        text = line.strip()
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        out.append((start, pending + text))
        pending = ""
    return out


def records(n, words):
    """The records of one command's words."""
    recs, tool = [], None
    i = 0
    while i < len(words):
        w = words[i]
        m = TOOL.match(w)
        if tool is None and m:
            tool = m.group(1)
            recs.append(("TOOL", n, tool))
        elif tool is None and re.match(r"^(scripts|slurm)/", w):
            recs.append(("SCRIPT", n, w))
            tool = "txl-train" if w.startswith("slurm/") else "script"  # the sbatch scripts pass on txl-train's
        elif w.startswith("configs/"):
            recs.append(("CONFIG", n, w))
        elif tool and w == "--set" and i + 1 < len(words):
            recs.append(("KEY", n, words[i + 1].split("=", 1)[0]))
            i += 1
        elif tool and tool.startswith("txl-") and w.startswith("--"):
            recs.append(("OPTION", n, tool, w))
        i += 1
    if tool and tool.startswith("txl-") and words[0] != "mpirun" and ("--check" in words or "--help" in words):
        at = next(k for k, w in enumerate(words) if TOOL.match(w))
        recs.append(("RUN", n, tool, *words[at + 1:]))
    return recs


def main():
    for n, text in command_lines(sys.argv[1]):
        first = in_clone(text.split(" ", 1)[0])
        if not (TOOL.match(first) or first in ("mpirun", "sbatch") or re.match(r"^(scripts|slurm)/", first)):
            continue
        try:
            words = [in_clone(w) for w in shlex.split(text, comments=True)]
        except ValueError as e:
            print("BAD", n, f"{text} ({e})", sep="\t")
            continue
        for r in records(n, words):
            print(*r, sep="\t")


main()
