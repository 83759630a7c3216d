#!/usr/bin/env bash
# Every op of the CUDA backend runs on its one compute stream (kernels/cuda/stream.cu), never on
# the legacy default stream 0: a non-blocking stream is not ordered against stream 0, and a CUDA
# graph cannot be captured on it. A check of the sources (no build, no GPU) of kernels/cuda and
# dist (*.cu, *.c, *.h), comments and string literals removed; it fails on:
#   - a `<<<` launch outside kernels/cuda/cuda_util.h (TXL_LAUNCH passes txl_cuda_stream());
#   - a call of the synchronous copy / memset forms, which run on stream 0: cudaMemcpy,
#     cudaMemcpy2D, cudaMemset, cudaMemset2D (their Async forms take the stream). Allowed
#     exceptions: none at present (to add one, name the file and call in ALLOW below with why);
#   - a call that takes a stream (below, with the position of its stream argument; txl_nccl_create
#     and txl_nccl_join of dist/nccl.h too) given the legacy stream: a literal 0, NULL, nullptr,
#     cudaStreamLegacy, cudaStreamPerThread (with or without a cast), or no stream argument at all
#     (the runtime header's default is 0);
#   - kernels/cuda/stream.cu (txl_cuda_stream) without cudaStreamCreateWithFlags(...,
#     cudaStreamNonBlocking): the stream itself must be one of its own, not 0.
# Before the tree, the checker runs on a sample of bad lines (each must be reported) and good
# ones (none may be): a checker that reports nothing cannot pass.
# usage: test_one_stream.sh SOURCE_DIR
set -euo pipefail
SRC=$1
exec python3 - "$SRC" <<'PY'
import os, re, sys

SRC = sys.argv[1]
LAUNCH_OK = {"kernels/cuda/cuda_util.h"}     # the TXL_LAUNCH macro itself
ALLOW = set()                                # "path:call" of a synchronous copy / memset kept, with why
SYNC_FORMS = ("cudaMemcpy", "cudaMemcpy2D", "cudaMemset", "cudaMemset2D")
# call -> index of its stream argument (0-based)
STREAM_ARG = {
    "cudaMemcpyAsync": 4, "cudaMemcpy2DAsync": 7, "cudaMemsetAsync": 3, "cudaMemset2DAsync": 5,
    "cudaEventRecord": 1, "cudaEventRecordWithFlags": 1, "cudaStreamWaitEvent": 0,
    "cudaStreamSynchronize": 0, "cudaStreamQuery": 0, "cudaStreamBeginCapture": 0,
    "cudaLaunchKernel": 5, "cudaGraphLaunch": 1, "cublasSetStream": 1, "cublasLtMatmul": 15,
    "txl_nccl_create": 3, "txl_nccl_join": 1,
}
STREAM_FILE = "kernels/cuda/stream.cu"

LEGACY = {"0", "0x0", "NULL", "nullptr", "cudaStreamLegacy", "cudaStreamPerThread"}

def strip(text):
    """Comments and string / character literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)

def args_of(text, open_paren):
    """The top-level arguments of the call whose '(' is at open_paren."""
    depth, start, args = 0, open_paren + 1, []
    for k in range(open_paren, len(text)):
        c = text[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                last = text[start:k].strip()
                if last or args: args.append(last)
                return args
        elif c == "," and depth == 1:
            args.append(text[start:k].strip()); start = k + 1
    return args

def legacy(arg):
    a = arg.strip()
    while True:  # casts and parentheses around the value
        m = re.fullmatch(r"\(\s*(?:cudaStream_t|CUstream|void\s*\*)\s*\)\s*(.+)", a) or \
            re.fullmatch(r"(?:static_cast|reinterpret_cast)\s*<[^>]*>\s*\((.+)\)", a) or \
            re.fullmatch(r"\((.+)\)", a)
        if not m: break
        a = m.group(1).strip()
    return a in LEGACY

def check(path, text):
    bad = []
    s = strip(text)
    line = lambda pos: s.count("\n", 0, pos) + 1
    if path not in LAUNCH_OK:
        for m in re.finditer(r"<<<", s):
            bad.append(f"{path}:{line(m.start())}: a <<< launch (use TXL_LAUNCH: it passes txl_cuda_stream())")
    for m in re.finditer(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", s):
        name, paren = m.group(1), m.end() - 1
        if name in SYNC_FORMS and f"{path}:{name}" not in ALLOW:
            bad.append(f"{path}:{line(m.start())}: {name} runs on the legacy stream 0 (use {name}Async on txl_cuda_stream())")
        elif name in STREAM_ARG:
            a, k = args_of(s, paren), STREAM_ARG[name]
            if len(a) <= k:
                bad.append(f"{path}:{line(m.start())}: {name} without its stream argument (the default is the legacy stream 0)")
            elif legacy(a[k]):
                bad.append(f"{path}:{line(m.start())}: {name} on the legacy stream ({a[k]})")
    if path == STREAM_FILE:
        made = [args_of(s, m.end() - 1) for m in re.finditer(r"\bcudaStreamCreateWithFlags\s*\(", s)]
        if not any(len(a) == 2 and a[1] == "cudaStreamNonBlocking" for a in made):
            bad.append(f"{path}: no cudaStreamCreateWithFlags(..., cudaStreamNonBlocking): txl_cuda_stream is no stream of its own")
    return bad

# ---- the checker on a sample: every bad line reported, no good one ----
BAD = [
    "k<<<1, 2>>>(x);", "CUDA_CHECK(cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost));", "cudaMemset(p, 0, n);",
    "cudaMemset2D(p, pitch, 0, w, h);", "cudaMemcpyAsync(d, s, n, k, 0);", "cudaMemcpyAsync(d, s, n, k);",
    "cudaMemsetAsync(p, 0, n);", "cudaMemsetAsync(p, 0, n, (cudaStream_t)0);", "cudaEventRecord(e, 0);",
    "cudaEventRecord(e);", "cudaStreamWaitEvent(NULL, e, 0);", "cudaStreamSynchronize(0);",
    "cublasSetStream(h, nullptr);", "cudaEventRecord(e, cudaStreamLegacy);",
    "cublasLtMatmul(lt, d, &a, A, la, B, lb, &b, C, lc, C, lc, &algo, w, wb,\n 0);",
    "static void transport_finish(void *ctx) { txl_nccl_join(ctx, NULL); }",
]
GOOD = [
    "TXL_LAUNCH(k, 1, 2, 0)(x);", "cudaMemcpyAsync(d, s, n, k, txl_cuda_stream());",
    "cudaMemsetAsync(p, 0, n, txl_cuda_stream());", "cudaEventRecord(e, c->compute);",
    "cudaStreamWaitEvent(c->stream, e, 0);", "cudaStreamSynchronize(txl_cuda_stream());",
    "cublasSetStream(h, txl_cuda_stream());", "/* cudaMemcpy(a, b, n, k); k<<<1, 1>>>() */ x = 0;",
    "printf(\"cudaMemset(p, 0, n)\");", "cudaMemsetAsync(p, 0, f(a, 0), s);",
    "cublasLtMatmul(lt, d, &a, A, la, B, lb, &b, C, lc, C, lc, &algo, w, wb, txl_cuda_stream() /* 0 */);",
]
errors = [f"the checker missed: {b!r}" for b in BAD if len(check("sample.cu", b)) != 1]
errors += [f"the checker reported a good line: {g!r}: {check('sample.cu', g)}" for g in GOOD if check("sample.cu", g)]
STREAM_BAD = "cudaStream_t txl_cuda_stream(void) { return 0; }"
STREAM_GOOD = "if (!g) CUDA_CHECK(cudaStreamCreateWithFlags(&g, cudaStreamNonBlocking));"
if len(check(STREAM_FILE, STREAM_BAD)) != 1: errors.append(f"the checker missed, in {STREAM_FILE}: {STREAM_BAD!r}")
if check(STREAM_FILE, STREAM_GOOD): errors.append(f"the checker reported, in {STREAM_FILE}: {STREAM_GOOD!r}")
if errors:
    print("FAIL (self-check):\n  " + "\n  ".join(errors)); sys.exit(1)
print(f"ok: the checker reports each of {len(BAD) + 1} bad lines and none of {len(GOOD) + 1} good ones")

# ---- the tree ----
bad, files = [], 0
for folder in ("kernels/cuda", "dist"):
    root = os.path.join(SRC, folder)
    if not os.path.isdir(root):
        print(f"FAIL: {root}: no such folder"); sys.exit(1)
    for name in sorted(os.listdir(root)):
        if os.path.splitext(name)[1] in (".cu", ".c", ".h", ".cuh"):
            rel = f"{folder}/{name}"
            with open(os.path.join(SRC, rel), encoding="utf-8") as f:
                bad += check(rel, f.read())
            files += 1
if files == 0:
    print("FAIL: no source files found"); sys.exit(1)
if bad:
    print(f"FAIL: {len(bad)} uses of the legacy default stream in kernels/cuda and dist:\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"PASS: {files} files of kernels/cuda and dist, every launch, copy, memset and event on a stream of their own")
PY
