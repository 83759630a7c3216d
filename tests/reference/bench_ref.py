#!/usr/bin/env python3
"""Training throughput of the reference Transformer-XL in PyTorch, to compare with txl's own
benchmark: full steps (forward, backward, gradient clipping, Adam), memory carried from step to
step, random tokens (Zipf-distributed ids, as txl's --bench draws them).

    python3 tests/reference/bench_ref.py --config small --threads 2 --steps 20 --warmup 3
    python3 tests/reference/bench_ref.py --config small --procs 2 --threads 1   (data parallel)

--procs N runs N processes (gloo), each on its batch_size / N columns with --threads threads,
the gradients all-reduced (one flat buffer) before clipping, as txl's ranks do.

--device cuda runs on the GPU (one process; --tf32 allows TF32 matmuls, --amp bf16 autocasts to
bf16), with --config ref_base: the recipe "base" of the best-known PyTorch re-implementation
(16 layers, d_model 512, 8 heads of 64, d_inner 2048, tgt_len = mem_len = 192, 32 columns, the
WikiText-103 vocabulary with its adaptive softmax), the comparison configs/bench/ref_base.ini
makes for txl. Timing on a GPU synchronises the device before reading the clock.

It uses the original code's formulation (einsum + _rel_shift, scores [L, K, B, H]); --attn gather
computes batch-major scores [B, H, L, K] and gathers the relative terms, which suits the CPU better. By default it uses
torch's own dropout (--fast-dropout); --philox-dropout uses txl's Philox masks instead, which are
computed in NumPy and are slow.
"""
import argparse
import resource
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import txl_ref  # noqa: E402

CONFIGS = {
    "tiny": dict(n_layer=4, d_model=32, n_head=3, d_head=17, d_inner=71, tgt_len=33, mem_len=41,
                 batch=8, n_token=10000),
    "small": dict(n_layer=4, d_model=256, n_head=8, d_head=32, d_inner=1024, tgt_len=128,
                  mem_len=128, batch=16, n_token=10000),
    "medium": dict(n_layer=8, d_model=512, n_head=8, d_head=64, d_inner=2048, tgt_len=128,
                   mem_len=128, batch=8, n_token=33278),
    "ref_base": dict(n_layer=16, d_model=512, n_head=8, d_head=64, d_inner=2048, tgt_len=192,
                     mem_len=192, batch=32, n_token=267735, cutoffs=[19997, 39997, 199997]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--attn", choices=("shift", "gather"), default="shift",
                    help="scores as the original code ([L,K,B,H], einsum + _rel_shift, default) or "
                         "batch-major [B,H,L,K] with a gather")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--fast-dropout", dest="fast_dropout", action="store_true", default=True,
                   help="torch's own dropout (default)")
    g.add_argument("--philox-dropout", dest="fast_dropout", action="store_false",
                   help="txl's Philox dropout masks (slow, NumPy)")
    ap.add_argument("--procs", type=int, default=1, help="data-parallel processes (gloo)")
    ap.add_argument("--batch", type=int, default=0, help="columns (default: the config's)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tf32", action="store_true", help="with --device cuda: TF32 matmuls")
    ap.add_argument("--amp", choices=("off", "bf16"), default="off",
                    help="with --device cuda: autocast the forward pass to bf16")
    a = ap.parse_args()
    if a.device == "cuda" and a.procs != 1:
        sys.exit("bench_ref: --device cuda runs one process")
    if a.device == "cuda" and not torch.cuda.is_available():
        print("SKIPPED: no CUDA device (torch %s)" % torch.__version__)
        return 0
    if a.procs == 1:
        return run(0, a, None)
    port = 29500 + os.getpid() % 20000
    mp.spawn(run, args=(a, port), nprocs=a.procs, join=True)
    return 0


def run(rank, a, port):
    if port is not None:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=a.procs)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    shape = dict(CONFIGS[a.config])
    if a.batch > 0:
        shape["batch"] = a.batch
    cfg = txl_ref.make_config(**shape, dropout=0.1, dropatt=0.0, pre_lnorm=0,
                              tie_weight=1, untie_r=0, same_length=0, clamp_len=0, lr=2.5e-4,
                              warmup_step=0, max_step=1000, eta_min=0.0, scheduler="cosine")
    params = txl_ref.init_params(cfg, torch.Generator().manual_seed(0))  # drawn on the CPU
    gpu = a.device == "cuda"
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
        params = {n: t.cuda() for n, t in params.items()}
        torch.set_default_device("cuda")  # the model's own tensors (positions, masks) too
    params = {n: t.requires_grad_(True) for n, t in params.items()}
    opt = txl_ref.make_optimizer(params, cfg, foreach=None)  # torch's default Adam
    L, B, V = cfg["tgt_len"], cfg["batch"], cfg["n_token"]
    if B % a.procs:
        sys.exit("bench_ref: batch %d does not divide by %d processes" % (B, a.procs))
    n_steps = a.warmup + a.steps
    # Zipf-distributed ids (weight 1 / (id + 1) over the frequency-sorted vocabulary), as txl's
    # --bench draws them (src/base/zipf.h): the adaptive softmax's clusters get a corpus's shares
    g = torch.Generator().manual_seed(0x5eed)
    cdf = torch.cumsum(1.0 / torch.arange(1, V + 1, dtype=torch.float64, device="cpu"), 0)
    u = torch.rand((n_steps * L + 1, B), generator=g, dtype=torch.float64, device="cpu") * cdf[-1]
    data = torch.searchsorted(cdf, u, right=True).clamp_(max=V - 1)[:, rank * B // a.procs:(rank + 1) * B // a.procs]
    data = data.to("cuda" if gpu else "cpu")
    drop_mode = "torch" if a.fast_dropout else "philox"

    mems = None
    t0 = None
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if gpu and a.amp == "bf16" else None
    for s in range(n_steps):
        if s == a.warmup:
            if gpu:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        x = data[s * L:s * L + L]
        y = data[s * L + 1:s * L + L + 1]
        if port is None and amp is not None:
            with amp:
                loss, _, _, mems = txl_ref.train_step(params, opt, cfg, x, y, mems, s, drop_mode=drop_mode,
                                                      attn_impl=a.attn)
        elif port is None:
            loss, _, _, mems = txl_ref.train_step(params, opt, cfg, x, y, mems, s, drop_mode=drop_mode,
                                                  attn_impl=a.attn)
        else:
            loss, mems = parallel_step(params, opt, cfg, x, y, mems, s, drop_mode, a.attn, a.procs)
    if port is not None:
        dist.barrier()
    if gpu:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    ms = 1000.0 * dt / a.steps
    tok = L * B * a.steps / dt
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if rank == 0:
        where = "procs %d threads %d" % (a.procs, torch.get_num_threads())
        if gpu:
            where = "%s tf32 %s amp %s" % (torch.cuda.get_device_name(), a.tf32, a.amp)
            peak_mib = torch.cuda.max_memory_allocated() / 1048576.0
        print("torch %s %s config %s dropout %s attn %s: %.0f tokens/s, %.2f ms/step "
              "(loss %.3f), peak memory %.0f MiB" %
              (torch.__version__, where, a.config, drop_mode, a.attn, tok, ms, loss, peak_mib))
    if port is not None:
        dist.destroy_process_group()
    return 0


def parallel_step(params, opt, cfg, x, y, mems, s, drop_mode, attn, procs):
    """txl_ref.train_step with the gradients averaged over the processes before clipping."""
    for p in params.values():
        p.grad = None
    _, loss, new_mems = txl_ref.forward(params, cfg, x, mems, y, step=s, drop_mode=drop_mode,
                                        attn_impl=attn)
    loss.backward()
    grads = [p.grad for p in params.values()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= procs
    off = 0
    for g in grads:
        g.copy_(flat[off:off + g.numel()].view_as(g))
        off += g.numel()
    torch.nn.utils.clip_grad_norm_(list(params.values()), float(cfg["clip"]))
    for g in opt.param_groups:
        g["lr"] = txl_ref.lr_at(s, cfg)
    opt.step()
    return float(loss.item()), new_mems


if __name__ == "__main__":
    sys.exit(main())
