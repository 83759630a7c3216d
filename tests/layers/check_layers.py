#!/usr/bin/env python3
"""The layers of docs/architecture.md against the sources: every #include "..." of the non-test
sources (src/, kernels/, dist/, data/) names a file of the tree in its own layer or in one its row
of the table lets it include, the rows let a layer include only layers below it (so the arrows
point down), no two files include each other in a cycle, and no CMakeLists.txt outside tests/
names a file under tests/ (${..._DIR}/tests/... or ../tests/: no product target is built from test
sources).

  check_layers.py SOURCE_DIR

The table is the one of docs/architecture.md's section "## Layers", bottom row first:
  | `folder` | `lower`, `folders` (or -) | what it holds |
A file belongs to the row of the longest folder that holds it. A cycle is one among units: a
unit is a file's stem in its folder (layers.c and layers.h are one; X_internal.h is X's), so
that a.c including b.h while b.c includes a.h is one, as is a.c including b.h while b.h
includes a.h. Each failure is one line naming file:line; exit 1 when there is any."""
import os
import re
import sys

SOURCE_ROOTS = ("src", "kernels", "dist", "data")
SOURCE_EXT = (".c", ".h", ".cu", ".cc", ".cpp", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|([^|]*)\|")
DOC = "docs/architecture.md"


def read_table(src):
    """[(folder, [may include])] bottom first, from DOC's "## Layers" section."""
    rows, inside = [], False
    with open(os.path.join(src, DOC), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("## "):
                inside = line.strip() == "## Layers"
                continue
            m = ROW.match(line) if inside else None
            if m:
                rows.append((m.group(1).rstrip("/"), re.findall(r"`([^`]+)`", m.group(2)), n))
    return rows


def layer_of(path, folders):
    best = None
    for d in folders:
        if (path.startswith(d + "/")) and (best is None or len(d) > len(best)):
            best = d
    return best


def sources(src):
    out = []
    for root in SOURCE_ROOTS:
        for dp, dns, fns in os.walk(os.path.join(src, root)):
            dns.sort()
            for fn in sorted(fns):
                if fn.endswith(SOURCE_EXT):
                    out.append(os.path.relpath(os.path.join(dp, fn), src))
    return out


def unit(path):
    """A file's unit: its stem in its folder; X_internal.h (the private half of X's interface) is X's."""
    d, f = os.path.split(path)
    stem = f.rsplit(".", 1)[0]
    if stem.endswith("_internal"):
        stem = stem[: -len("_internal")]
    return os.path.join(d, stem)


def find_cycles(edges):
    """The strongly connected components of more than one unit (Tarjan), each as a sorted list."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(edges) | {b for bs in edges.values() for b in bs})

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    src = sys.argv[1]
    fails = []
    rows = read_table(src)
    if len(rows) < 2:
        sys.exit(f"{DOC}: no table of layers in its section '## Layers'")
    folders = [r[0] for r in rows]
    allowed = {}
    for i, (folder, may, n) in enumerate(rows):
        if folders.index(folder) != i:
            fails.append(f"{DOC}:{n}: {folder} has two rows")
        for m in may:
            if m not in folders[:i]:
                where = "a layer above it" if m in folders else "no layer of the table"
                fails.append(f"{DOC}:{n}: {folder} may include {m}, {where} (a row names only rows before it)")
        allowed[folder] = set(may) | {folder}
    edges, why = {}, {}
    files = sources(src)
    for path in files:
        mine = layer_of(path, folders)
        if mine is None:
            fails.append(f"{path}: in no layer of {DOC}")
            continue
        with open(os.path.join(src, path), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if not os.path.isfile(os.path.join(src, target)):
                    fails.append(f"{path}:{n}: includes {target}, which is no file of the tree "
                                 "(includes name paths from the top of the tree)")
                    continue
                theirs = layer_of(target, folders)
                if theirs is None:
                    fails.append(f"{path}:{n}: includes {target}, in no layer of {DOC} (tests/ is no layer)")
                elif theirs not in allowed[mine]:
                    up = folders.index(theirs) > folders.index(mine)
                    fails.append(f"{path}:{n}: includes {target}: {mine} may not include {theirs} "
                                 f"({'a layer above it' if up else 'not in its row'} of {DOC})")
                a, b = unit(path), unit(target)
                if a != b:
                    edges.setdefault(a, set()).add(b)
                    why.setdefault((a, b), f"{path}:{n}")
    for comp in find_cycles(edges):
        inside = set(comp)
        links = sorted(why[(a, b)] + f" -> {b}" for a in comp for b in edges.get(a, ()) if b in inside)
        fails.append(f"include cycle among {', '.join(comp)}: " + "; ".join(links))
    lists = ["CMakeLists.txt"]
    for root in SOURCE_ROOTS:
        for dp, dns, fns in os.walk(os.path.join(src, root)):
            dns.sort()
            if "CMakeLists.txt" in fns:
                lists.append(os.path.relpath(os.path.join(dp, "CMakeLists.txt"), src))
    for p in lists:
        with open(os.path.join(src, p), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                code = line.split("#", 1)[0]
                if re.search(r"(_DIR\}|\.\.)/tests/", code):
                    fails.append(f"{p}:{n}: a product target from a file under tests/: {line.strip()}")
    for line in fails:
        print("FAIL", line)
    print(f"{len(files)} sources, {sum(len(v) for v in edges.values())} include arrows between units, "
          f"{len(rows)} layers: {len(fails)} failure{'s' if len(fails) != 1 else ''}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
