#!/usr/bin/env python3
"""End-to-end timing of the scatter family inside models: stridewise (stridewise.use()) vs
native ATen, in the same process on the same inputs.

Cases:
  sage      one training step (forward, backward, SGD step) of a 2-layer GraphSAGE
            (torch_geometric SAGEConv, aggr='mean') on a random graph
  gat       the same with a 2-layer GAT (GATConv, 4 heads then 1)
  moe_comb  the MoE combine alone: out.scatter_add_(0, tok.view(-1,1).expand(-1,H), weighted)
            with top-2 routing (tokens in expert order)
  moe_step  forward + backward of router -> top-2 -> experts -> combine

Timing: CUDA events (CPU: perf_counter) around each repetition, after warm-up; the median is
reported. Native and stridewise alternate per repetition so drift hits both alike.

  PYTHONPATH=python python3 bench/e2e_scatter.py                 # CUDA if present, else CPU
  PYTHONPATH=python python3 bench/e2e_scatter.py --device cpu    # small sizes
  options: --edges N --nodes N --tokens N --hidden N --reps N --warmup N --deterministic
           --cases sage,gat,moe_comb,moe_step --markdown FILE (also write the table there)
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import stridewise  # noqa: E402


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, reps, warmup):
    for _ in range(warmup):
        fn()
    sync(device)
    out = []
    for _ in range(reps):
        if device == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e3)
    return out


def alternate(step, device, reps, warmup):
    """(native ms, stridewise ms) per repetition: warm-up both, then one step each way in turn,
    so drift hits both alike; stridewise.stats() counts the timed steps only."""
    for _ in range(warmup):
        step()
        with stridewise.use():
            step()
    sync(device)
    stridewise.reset_stats()
    nat, ours = [], []
    for _ in range(reps):
        nat += timed(step, device, 1, 0)
        with stridewise.use():
            ours += timed(step, device, 1, 0)
    return nat, ours


# --- models ---------------------------------------------------------------------------------

class GNN(nn.Module):
    def __init__(self, kind, feat, hidden):
        super().__init__()
        from torch_geometric.nn import GATConv, SAGEConv
        if kind == "sage":
            self.c1, self.c2 = SAGEConv(feat, hidden, aggr="mean"), SAGEConv(hidden, hidden, aggr="mean")
        else:
            self.c1, self.c2 = GATConv(feat, hidden // 4, heads=4), GATConv(hidden, hidden, heads=1)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, ei):
        return self.head(self.c2(self.c1(x, ei).relu(), ei).relu()).squeeze(-1)


def gnn_step(kind, device, a):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(a.nodes, a.feat, generator=g).to(device)
    ei = torch.randint(0, a.nodes, (2, a.edges), generator=g).to(device)
    y = torch.randn(a.nodes, generator=g).to(device)
    model = GNN(kind, a.feat, a.hidden).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = (model(x, ei) - y).square().mean()
        loss.backward()
        opt.step()
    return step


def moe_inputs(device, a, dtype):
    g = torch.Generator().manual_seed(1)
    T, H, E, k = a.tokens, a.hidden_moe, a.experts, 2
    x = torch.randn(T, H, generator=g).to(device=device, dtype=dtype)
    router = nn.Linear(H, E, bias=False).to(device=device, dtype=dtype)
    w = nn.Parameter((torch.randn(E, H, H, generator=g) / H ** 0.5).to(device=device, dtype=dtype))
    return x, router, w, k


def moe_forward(x, router, w, k):
    T, H = x.shape
    E = w.shape[0]
    probs = router(x).float().softmax(-1)
    gate, eidx = probs.topk(k, dim=-1)
    gate = (gate / gate.sum(-1, keepdim=True)).to(x.dtype)
    order = torch.argsort(eidx.reshape(-1), stable=True)
    tok = order // k
    counts = torch.bincount(eidx.reshape(-1), minlength=E).tolist()
    xs = x.index_select(0, tok)
    ys = torch.cat([xe @ w[e] for e, xe in enumerate(xs.split(counts)) if xe.shape[0]])
    weighted = ys * gate.reshape(-1)[order].unsqueeze(-1)
    return x.new_zeros(T, H).scatter_add_(0, tok.view(-1, 1).expand(-1, H), weighted), tok, weighted


def moe_step(device, a, dtype):
    x, router, w, k = moe_inputs(device, a, dtype)
    x.requires_grad_(True)

    def step():
        x.grad = None
        w.grad = None
        out, _, _ = moe_forward(x, router, w, k)
        out.float().square().mean().backward()
    return step


def moe_comb(device, a, dtype):
    x, router, w, k = moe_inputs(device, a, dtype)
    with torch.no_grad():
        _, tok, weighted = moe_forward(x, router, w, k)
    T, H = x.shape
    idx = tok.view(-1, 1).expand(-1, H)
    out = x.new_zeros(T, H)

    def step():
        out.zero_()
        out.scatter_add_(0, idx, weighted)
    return step


# --- main -----------------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--nodes", type=int)
    p.add_argument("--edges", type=int)
    p.add_argument("--feat", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--tokens", type=int)
    p.add_argument("--hidden-moe", type=int)
    p.add_argument("--experts", type=int)
    p.add_argument("--reps", type=int)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--deterministic", action="store_true",
                   help="torch.use_deterministic_algorithms(True) for both sides")
    p.add_argument("--cases", default="sage,gat,moe_comb,moe_step")
    p.add_argument("--markdown", help="also write the table to this file")
    a = p.parse_args(argv)
    cuda = a.device == "cuda"
    defaults = dict(nodes=100_000 if cuda else 2_000, edges=1_000_000 if cuda else 20_000,
                    feat=64 if cuda else 32, hidden=64 if cuda else 32,
                    tokens=65_536 if cuda else 4_096, hidden_moe=1024 if cuda else 256,
                    experts=16 if cuda else 8, reps=20 if cuda else 5)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.deterministic:
        torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore", message=".*torch-scatter.*")

    builders = {
        "sage": [("sage train step", lambda: gnn_step("sage", a.device, a), f"{a.nodes} nodes, {a.edges} edges, F={a.feat}")],
        "gat": [("gat train step", lambda: gnn_step("gat", a.device, a), f"{a.nodes} nodes, {a.edges} edges, F={a.feat}")],
        "moe_comb": [(f"moe combine {n}", (lambda dt=dt: moe_comb(a.device, a, dt)), f"T={a.tokens} H={a.hidden_moe} k=2")
                     for n, dt in (("f32", torch.float32), ("bf16", torch.bfloat16))],
        "moe_step": [(f"moe fwd+bwd {n}", (lambda dt=dt: moe_step(a.device, a, dt)), f"T={a.tokens} H={a.hidden_moe} E={a.experts} k=2")
                     for n, dt in (("f32", torch.float32), ("bf16", torch.bfloat16))],
    }
    dev_name = torch.cuda.get_device_name(0) if cuda else f"CPU ({torch.get_num_threads()} threads)"
    try:
        import torch_geometric
        pyg = torch_geometric.__version__
    except ImportError:
        pyg = "not installed"
    lines = [f"# e2e scatter benchmark, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
             f"device: {dev_name}; torch {torch.__version__}; torch_geometric {pyg}; "
             f"stridewise {stridewise.__version__}; deterministic={a.deterministic}; "
             f"median of {a.reps} after {a.warmup} warm-up",
             "",
             "| case | size | native ms | stridewise ms | stridewise/native | scatter calls/step |",
             "|---|---|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    for case in a.cases.split(","):
        for label, build, size in builders[case]:
            if case in ("sage", "gat") and pyg == "not installed":
                print(f"| {label} | {size} | skipped: torch_geometric not installed | | | |")
                continue
            step = build()
            nat, ours = alternate(step, a.device, a.reps, a.warmup)
            st = stridewise.stats()
            calls = sum(st[o]["calls"] for o in ("scatter", "scatter_add", "scatter_reduce")) // a.reps
            falls = sum(st[o]["fallback"] for o in ("scatter", "scatter_add", "scatter_reduce"))
            mn, mo = statistics.median(nat), statistics.median(ours)
            row = (f"| {label} | {size} | {mn:.3f} | {mo:.3f} | {mo / mn:.2f} | {calls}"
                   f"{f' ({falls} fallbacks)' if falls else ''} |")
            lines.append(row)
            print(row, flush=True)
            del step
            if cuda:
                torch.cuda.empty_cache()
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
