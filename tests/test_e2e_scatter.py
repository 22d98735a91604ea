"""End to end: the scatter family inside real models, forward + backward, routed to stridewise
(stridewise.use()) vs native ATen.

(a) PyTorch Geometric (torch_geometric, pinned in requirements.txt; pure Python). Without the
    optional torch_scatter package, torch_geometric.utils.scatter -- which every
    MessagePassing aggregation calls -- broadcasts the 1-D edge index with
    ``index.view(-1, 1, ..).expand_as(src)`` and calls (seen with a TorchDispatchMode trace,
    torch_geometric 2.8.0.post1, torch 2.13):
      sum   -> aten::scatter_add_           (index expanded to src's shape)
      mean  -> aten::scatter_add_ twice      (1-D contiguous index for the counts, expanded
               index for the features), then a division
      max / min -> aten::scatter_reduce_.two (reduce='amax'/'amin', include_self=False)
      mul   -> aten::scatter_reduce_.two     (reduce='prod', include_self=True)
      any   -> aten::scatter_.src
    Backward: scatter_add_ -> aten::gather (grad.gather(dim, expanded index)); amax/amin ->
    gather, aten::scatter_add (functional) and aten::scatter.value (ATen's
    scatter_reduce_backward). Message construction x_j = x.index_select(0, edge_index[0]) has
    aten::index_add_ as its backward; on the CPU ATen's index_add_ itself calls
    aten::scatter_add_ with an expanded index (so it is routed too: more scatter_add calls on
    CPU than on CUDA, where index_add has its own kernel). GATConv's softmax
    (torch_geometric.utils.softmax) does scatter(max) on the detached logits, index_select,
    exp, scatter(sum). Nothing in these paths calls index_reduce or segment ops (those need a
    CSR `ptr`, i.e. SparseTensor inputs, which these tests do not use).
(b) MoE combine: top-k (k=2) routing, tokens dispatched in expert order, expert outputs
    weighted by the gate and combined with
    ``out.scatter_add_(0, tok.view(-1, 1).expand(-1, H), weighted)``.

Tolerances. On the CPU (every sum in index order, ATen's and ours) float32 results are
compared to native with
    max|ours - native| <= 1e-4 * max|native| (+ 1e-6)
i.e. a relative error of 1e-4 of each tensor's scale: a reordered float32 sum of n terms
differs by at most ~n * 2**-24 * sum|terms|; with the degrees here (mean 10, max < 60) that is
< 4e-6 relative on the aggregates, and the layers above (linear layers, softmax, a second
aggregation in backward) amplify it by small factors only; 1e-4 leaves a 25x margin while
still catching any lost, doubled or misplaced term (which changes a value by O(1) of its
scale). Per-element relative checks would flag cancellations near zero, so the bound is on
the scale of the tensor.
On CUDA (accuracy.unordered) ATen and we both add in an unspecified order, so native is not the
truth: the GNNs and utils.scatter's sum/mean/mul are judged against the same computation run
natively in float64 (same inputs and weights, cast up): ours no further from it than
4 * native's distance + 8 eps (stridewise.testing.accuracy says why those numbers). The GNNs
use smooth activations for that reason (SiLU between layers; GATConv with negative_slope=1, so
its attention logits take no leaky ReLU): a ReLU unit whose input lies within rounding noise of
0 flips between two valid float32 runs and moves every gradient by ~1e-3 of its scale (seen on
the H200, issue 20; reproduced on the CPU by reordering the edges), which no rule on rounding
can tell from a lost term. The scatter ops, softmax (scatter max on detached logits, then sum)
and both backward passes are the same as with ReLUs.
With k=2 the MoE combine is order independent (0 + a + b == 0 + b + a exactly in IEEE
arithmetic, float32 and bfloat16 alike, which both round each add), and so is its backward
(index_select's backward adds each token's k=2 rows into zeros): its forward output is compared
BITWISE to an independent sum of the two gate-weighted rows of every token (no scatter), and to
native, and its gradients to native's on every device. (A float64 reference would be wrong there:
top-k routing is a discrete decision, and float64 router logits break near-ties differently.)
Determinism: under torch.use_deterministic_algorithms(True) two stridewise runs are bitwise
equal (outputs and every gradient), on CPU and CUDA.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import BASE_SEED, DEVICES, fail_msg
from stridewise.testing import accuracy
from stridewise.audit.specs import gather_layouts as specs

# Deterministic cuBLAS for the use_deterministic_algorithms(True) runs on CUDA.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

OPS = ("scatter", "scatter_add", "scatter_reduce", "gather")
REL_TOL = 1e-4


def _stats():
    sw = sys.modules.get("stridewise")
    if sw is None or not hasattr(sw, "stats"):
        return None
    st = sw.stats()
    return {op: dict(st.get(op, {})) for op in OPS}


def _delta(a, b):
    if a is None or b is None:
        return None
    return {op: {k: v - a[op].get(k, 0) for k, v in b[op].items() if isinstance(v, int)}
            for op in b}


def _native():
    """Routing off (it is off between tests already), through specs.native(): the one place
    that knows which native CUDA kernels compute-sanitizer flags (stridewise.testing.sanitizer)."""
    return specs.native()


def _ours(sw):
    return lambda: sw.use()


@contextlib.contextmanager
def _deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    before_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=before_warn)


def _sync(device):
    if device != "cpu":
        torch.cuda.synchronize()


def compare_tol(native_res, ours_res, rel=REL_TOL):
    problems = []
    for k, (a, b) in enumerate(zip(ours_res["outputs"], native_res["outputs"])):
        if a.shape != b.shape or a.dtype != b.dtype:
            problems.append(f"outputs[{k}]: {a.dtype}{tuple(a.shape)} vs native {b.dtype}{tuple(b.shape)}")
            continue
        if not torch.isfinite(b).all():
            problems.append(f"outputs[{k}]: native result is not finite (test data problem)")
        r = accuracy.scaled_error(a, b)
        if not r <= rel:
            problems.append(f"outputs[{k}]: max|diff|/max|native| = {r:.3e} > {rel:g}")
    for name, gn in native_res["grads"].items():
        go = ours_res["grads"].get(name)
        if go is None:
            problems.append(f"grads[{name}] missing")
            continue
        r = accuracy.scaled_error(go, gn)
        if not r <= rel:
            problems.append(f"grads[{name}]: max|diff|/max|native| = {r:.3e} > {rel:g}")
    missing = set(ours_res["grads"]) - set(native_res["grads"])
    if missing:
        problems.append(f"grads only in the routed run: {sorted(missing)}")
    return problems


def compare_bitwise(r1, r2):
    problems = []
    for k, (a, b) in enumerate(zip(r1["outputs"], r2["outputs"])):
        if not torch.equal(a, b):
            problems.append(f"outputs[{k}] differ between runs: max|diff| {(a.double() - b.double()).abs().max().item():.3e}")
    for name, g in r1["grads"].items():
        if not torch.equal(g, r2["grads"][name]):
            problems.append(f"grads[{name}] differ between runs: "
                            f"max|diff| {(g.double() - r2['grads'][name].double()).abs().max().item():.3e}")
    return problems


# --- (a) PyTorch Geometric ---------------------------------------------------------------------

GNN_SIZES = {"cpu": dict(nodes=2000, edges=20000, feat=32, hidden=32),
             "cuda": dict(nodes=100_000, edges=1_000_000, feat=64, hidden=64)}


def random_graph(device, seed, nodes, edges, feat, **_):
    """A random directed multigraph (duplicate edges and self loops allowed: both are
    duplicate scatter targets) with a skewed in-degree, so some nodes receive many messages
    and some none (empty segments)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, nodes, (edges,), generator=g)
    # destination: a quarter of the edges go to 1% of the nodes (hubs)
    dst = torch.randint(0, nodes, (edges,), generator=g)
    hub = torch.rand(edges, generator=g) < 0.25
    dst[hub] = torch.randint(0, max(1, nodes // 100), (int(hub.sum()),), generator=g)
    # the last 5% of the nodes receive nothing
    dst = torch.where(dst >= nodes - nodes // 20, dst % max(1, nodes - nodes // 20), dst)
    x = torch.randn(nodes, feat, generator=g)
    gy = torch.randn(nodes, generator=g)
    return x.to(device), torch.stack([src, dst]).to(device), gy.to(device)


class GNN(nn.Module):
    def __init__(self, kind, feat, hidden):
        super().__init__()
        from torch_geometric.nn import GATConv, SAGEConv
        # No kinks (see Tolerances): SiLU between layers, linear attention logits in GAT.
        if kind == "sage":
            self.c1 = SAGEConv(feat, hidden, aggr="mean")
            self.c2 = SAGEConv(hidden, hidden, aggr="mean")
        elif kind == "sage_max":
            self.c1 = SAGEConv(feat, hidden, aggr="max")
            self.c2 = SAGEConv(hidden, hidden, aggr="max")
        elif kind == "gat":
            self.c1 = GATConv(feat, hidden // 4, heads=4, negative_slope=1.0)
            self.c2 = GATConv(hidden, hidden, heads=1, negative_slope=1.0)
        else:
            raise ValueError(kind)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, ei):
        h = F.silu(self.c1(x, ei))
        h = F.silu(self.c2(h, ei))
        return self.head(h).squeeze(-1)


def run_gnn(kind, device, seed, ctx_factory, size=None, dtype=torch.float32):
    """Forward + backward of the GNN under ``ctx_factory()``. ``dtype=torch.float64``: the same
    graph, inputs and weights (drawn in float32, then cast up), for the float64 reference."""
    size = size or GNN_SIZES[device]
    x, ei, gy = random_graph(device, seed, **size)
    x, gy = x.to(dtype), gy.to(dtype)
    x.requires_grad_(True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        model = GNN(kind, size["feat"], size["hidden"]).to(device=device, dtype=dtype)
    _sync(device)
    st0 = _stats()
    with ctx_factory(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "can be accelerated via torch-scatter" on CUDA max
        y = model(x, ei)
        loss = (y * gy).sum()
        loss.backward()
    _sync(device)
    st1 = _stats()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    grads["x"] = x.grad.detach().clone()
    return {"outputs": [y.detach()], "grads": grads, "stats": _delta(st0, st1)}


def _check_gnn_stats(kind, st, device):
    problems = []
    need = {"sage": ["scatter_add", "gather"], "gat": ["scatter_add", "scatter_reduce", "gather"],
            "sage_max": ["scatter_reduce", "scatter_add", "scatter", "gather"]}[kind]
    for op in need:
        s = st[op]
        if s["calls"] < 1:
            problems.append(f"{op} never ran inside the {kind} model: {s}")
            continue
        if s["expanded_index"] < 1:
            problems.append(f"{op}: no call with an expanded index: {s}")
        if s[device] != s["calls"]:
            problems.append(f"{op}: {s[device]} of {s['calls']} calls on {device}")
        if s["fallback"] or s["copies"] or s["errors"]:
            problems.append(f"{op}: fallback/copies/errors: {s}")
    return problems


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["sage", "gat", "sage_max"])
def test_pyg_forward_backward(sw, kind, device, seed):
    pytest.importorskip("torch_geometric")
    if device == "cuda" and kind == "sage_max":
        size = dict(GNN_SIZES["cuda"], edges=200_000, nodes=20_000)  # max backward is slow natively
    else:
        size = GNN_SIZES[device]
    native = run_gnn(kind, device, seed, _native, size)
    ours = run_gnn(kind, device, seed, _ours(sw), size)
    assert all(v["calls"] == 0 for v in native["stats"].values()), native["stats"]
    st = ours["stats"]
    problems = _check_gnn_stats(kind, st, device)
    if accuracy.unordered(device):  # judged against float64, not native (module docstring)
        ref = run_gnn(kind, device, seed, _native, size, dtype=torch.float64)
        problems += accuracy.compare_to_float64(native, ours, ref)
        how = "vs the float64 run"
    else:
        problems += compare_tol(native, ours)
        how = "vs native"
    assert not problems, fail_msg([f"{kind} on {device} {size} ({how}): stats {st}"] + problems)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["sage", "gat"])
def test_pyg_deterministic_repeat(sw, kind, device, seed):
    """use_deterministic_algorithms(True): two routed runs are bitwise equal, and every
    routed scatter call saw the deterministic flag."""
    pytest.importorskip("torch_geometric")
    with _deterministic():
        r1 = run_gnn(kind, device, seed, _ours(sw))
        r2 = run_gnn(kind, device, seed, _ours(sw))
    problems = compare_bitwise(r1, r2)
    for op in ("scatter_add", "scatter_reduce") if kind == "gat" else ("scatter_add",):
        s = r1["stats"][op]
        if not (s["calls"] >= 1 and s["deterministic"] == s["calls"]):
            problems.append(f"{op}: deterministic {s['deterministic']} of {s['calls']} calls")
    assert not problems, fail_msg([f"{kind} on {device}, deterministic mode"] + problems)


@pytest.mark.filterwarnings("ignore:The usage of `scatter")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "mul", "any"])
def test_pyg_utils_scatter_every_reduce(sw, reduce, device, seed):
    """torch_geometric.utils.scatter for each reduce PyG knows, on a 3-D src (edges, heads,
    channels) as in GATConv, forward and backward ('any' is aten::scatter_, whose winner among
    duplicate targets is unspecified natively: it gets distinct targets and no backward)."""
    pytest.importorskip("torch_geometric")
    from torch_geometric.utils import scatter
    g = torch.Generator().manual_seed(seed)
    n, e = 300, 3000
    if reduce == "any":
        index = torch.randperm(n, generator=g)[: n // 2]   # distinct targets
    else:
        index = torch.randint(0, n - 10, (e,), generator=g)  # duplicates; 10 empty rows
    src0 = torch.randn(index.numel(), 3, 5, generator=g)
    if reduce == "mul":
        src0 = 1 + 0.1 * src0  # keep products in range
    gy = torch.randn(n, 3, 5, generator=g)
    unordered = accuracy.unordered(device) and reduce in ("sum", "mean", "mul")
    res = []
    runs = [(_native, torch.float32), (_ours(sw), torch.float32)]
    if unordered:  # the float64 reference (module docstring)
        runs.append((_native, torch.float64))
    for ctx, dt in runs:
        src = src0.to(device=device, dtype=dt, copy=True).requires_grad_(reduce != "any")
        st0 = _stats()
        with ctx():
            out = scatter(src, index.to(device), 0, dim_size=n, reduce=reduce)
            if reduce != "any":
                (out * gy.to(device=device, dtype=dt)).sum().backward()
        _sync(device)
        res.append((out.detach(), None if src.grad is None else src.grad.clone(), _delta(st0, _stats())))
    (on, gn, _), (oo, go, st) = res[:2]
    op = {"sum": "scatter_add", "mean": "scatter_add", "any": "scatter"}.get(reduce, "scatter_reduce")
    assert st[op]["calls"] >= 1 and st[op]["expanded_index"] >= 1, st[op]
    assert all(s["fallback"] == 0 and s["copies"] == 0 for s in st.values()), st
    problems = []
    if reduce in ("max", "min", "any"):  # no arithmetic: exact
        if not torch.equal(oo, on):
            problems.append(f"forward differs: max|diff| {(oo - on).abs().max().item():.3e}")
        if gn is not None and not torch.equal(go, gn):
            problems.append(f"src.grad differs: max|diff| {(go - gn).abs().max().item():.3e}")
    elif unordered:
        o64, g64, _ = res[2]
        problems += [p for p in (accuracy.float64_problem("forward", oo, on, o64),
                                 accuracy.float64_problem("src.grad", go, gn, g64)) if p]
    else:
        if not accuracy.scaled_error(oo, on) <= REL_TOL:
            problems.append(f"forward: scaled diff {accuracy.scaled_error(oo, on):.3e}")
        if not accuracy.scaled_error(go, gn) <= REL_TOL:
            problems.append(f"src.grad: scaled diff {accuracy.scaled_error(go, gn):.3e}")
    assert not problems, fail_msg([f"utils.scatter reduce={reduce} on {device}"] + problems)


# The aten ops torch_geometric.utils.scatter reaches, forward + backward (a TorchDispatchMode
# trace; nested calls inside an ATen kernel, like CPU index_add_ -> scatter_add_, are not seen
# by it). If PyG changes its paths, this test says where, before the stats checks go quiet.
PYG_ATEN_OPS = {
    "sum": {"aten.scatter_add_.default", "aten.gather.default"},
    "mean": {"aten.scatter_add_.default", "aten.gather.default"},
    "max": {"aten.scatter_reduce_.two", "aten.gather.default", "aten.scatter_add.default",
            "aten.scatter.value"},
    "min": {"aten.scatter_reduce_.two", "aten.gather.default", "aten.scatter_add.default",
            "aten.scatter.value"},
    "mul": {"aten.scatter_reduce_.two", "aten.scatter_reduce.two", "aten.scatter_add.default",
            "aten.gather.default"},
    "any": {"aten.scatter_.src"},
}


@pytest.mark.parametrize("reduce", sorted(PYG_ATEN_OPS))
def test_pyg_scatter_aten_ops(reduce, seed):
    pytest.importorskip("torch_geometric")
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch_geometric.utils import scatter

    seen, expanded = set(), []

    class Trace(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func)
            if any(k in name for k in ("scatter", "gather", "index_add", "index_reduce", "segment",
                                       "index_put")):
                seen.add(name)
                if name in ("aten.scatter_add_.default", "aten.scatter_reduce_.two", "aten.scatter_.src"):
                    expanded.append(args[2].stride())
            return func(*args, **(kwargs or {}))

    g = torch.Generator().manual_seed(seed)
    src = torch.randn(200, 4, 3, generator=g).requires_grad_(reduce != "any")
    index = (torch.randperm(20, generator=g) if reduce == "any"
             else torch.randint(0, 20, (200,), generator=g))
    src = src[: index.numel()].detach().requires_grad_(reduce != "any")
    with Trace():
        out = scatter(src, index, 0, dim_size=20, reduce=reduce)
        if reduce != "any":
            out.sum().backward()
    assert seen == PYG_ATEN_OPS[reduce], f"reduce={reduce}: PyG reached {sorted(seen)}"
    # the in-place forward call carries the broadcast index: strides (1, 0, 0)
    assert (1, 0, 0) in expanded, f"reduce={reduce}: no expanded index in {expanded}"


# --- (b) MoE combine ------------------------------------------------------------------------

MOE_SIZES = {"cpu": dict(tokens=4096, hidden=256, experts=8, k=2),
             "cuda": dict(tokens=65536, hidden=1024, experts=16, k=2)}


class MoECombine(nn.Module):
    """Router -> top-k -> tokens sorted by expert -> per-expert linear -> gate-weighted ->
    scatter_add_ back to token order with a row-expanded index."""

    def __init__(self, hidden, experts, k):
        super().__init__()
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w = nn.Parameter(torch.randn(experts, hidden, hidden) / hidden ** 0.5)
        self.k = k

    def forward(self, x):
        T, H = x.shape
        E = self.w.shape[0]
        probs = self.router(x).float().softmax(-1)
        gate, eidx = probs.topk(self.k, dim=-1)                       # (T, k)
        gate = (gate / gate.sum(-1, keepdim=True)).to(x.dtype)
        flat_e = eidx.reshape(-1)
        order = torch.argsort(flat_e, stable=True)                    # slots in expert order
        tok = order // self.k                                         # token of each slot
        xs = x.index_select(0, tok)
        counts = torch.bincount(flat_e, minlength=E).tolist()
        ys = torch.cat([xe @ self.w[e] for e, xe in enumerate(xs.split(counts)) if xe.shape[0]])
        weighted = ys * gate.reshape(-1)[order].unsqueeze(-1)          # (T*k, H)
        idx = tok.view(-1, 1).expand(-1, H)                            # row-expanded index
        out = x.new_zeros(T, H).scatter_add_(0, idx, weighted)
        # independent reference (no scatter): each token's k rows, summed left to right
        inv = torch.empty_like(order)
        inv[order] = torch.arange(order.numel(), device=order.device)
        per_tok = weighted.detach()[inv].view(T, self.k, H)
        ref = torch.zeros_like(out)
        for j in range(self.k):
            ref = ref + per_tok[:, j]
        return out, ref


def run_moe(device, dtype, seed, ctx_factory, size=None):
    size = size or MOE_SIZES[device]
    T, H = size["tokens"], size["hidden"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g).to(device=device, dtype=dtype).requires_grad_(True)
    gy = torch.randn(T, H, generator=g).to(device=device, dtype=dtype)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        model = MoECombine(H, size["experts"], size["k"]).to(device=device, dtype=dtype)
    _sync(device)
    st0 = _stats()
    with ctx_factory():
        out, ref = model(x)
        loss = (out.float() * gy.float()).sum()
        loss.backward()
    _sync(device)
    st1 = _stats()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    grads["x"] = x.grad.detach().clone()
    return {"outputs": [out.detach()], "ref": ref, "grads": grads, "stats": _delta(st0, st1)}


# bfloat16: the gradients go through bf16 matmuls whose inputs differ only where the forward
# differs (it does not, see above), so a loose bound suffices; float32 as in the GNNs.
MOE_TOL = {torch.float32: REL_TOL, torch.bfloat16: 2 ** -7}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_moe_combine_forward_backward(sw, dtype, device, seed):
    native = run_moe(device, dtype, seed, _native)
    ours = run_moe(device, dtype, seed, _ours(sw))
    st = ours["stats"]
    problems = []
    sa, ga = st["scatter_add"], st["gather"]
    if not (sa["calls"] >= 1 and sa["expanded_index"] >= 1 and sa["noncontig_index"] >= 1):
        problems.append(f"scatter_add stats: {sa}")
    if not (ga["calls"] >= 1 and ga["expanded_index"] >= 1):  # scatter_add_'s backward
        problems.append(f"gather stats (backward of scatter_add_): {ga}")
    if sa["fallback"] or sa["copies"] or sa["errors"]:
        problems.append(f"scatter_add fallback/copies/errors: {sa}")
    # exact: order-independent k=2 sum vs an independent computation, and vs native
    if not torch.equal(ours["outputs"][0], ours["ref"]):
        d = (ours["outputs"][0].double() - ours["ref"].double()).abs().max().item()
        problems.append(f"combine != sum of the token's {MOE_SIZES[device]['k']} weighted rows: max|diff| {d:.3e}")
    if not torch.equal(native["outputs"][0], native["ref"]):
        problems.append("native combine != reference (reference is wrong?)")
    same_src = torch.equal(ours["ref"], native["ref"])
    if same_src and not torch.equal(ours["outputs"][0], native["outputs"][0]):
        problems.append("forward differs from native on identical inputs")
    problems += compare_tol(native, ours, rel=MOE_TOL[dtype])
    assert not problems, fail_msg([f"MoE combine {dtype} on {device}: stats {st}"] + problems)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_moe_combine_deterministic_repeat(sw, dtype, device, seed):
    with _deterministic():
        r1 = run_moe(device, dtype, seed, _ours(sw))
        r2 = run_moe(device, dtype, seed, _ours(sw))
    problems = compare_bitwise(r1, r2)
    s = r1["stats"]["scatter_add"]
    if not (s["calls"] >= 1 and s["deterministic"] == s["calls"]):
        problems.append(f"scatter_add: deterministic {s['deterministic']} of {s['calls']} calls")
    assert not problems, fail_msg([f"MoE combine {dtype} on {device}, deterministic mode"] + problems)


def test_torch_geometric_version_is_pinned():
    """requirements.txt pins the torch_geometric these tests were written against."""
    pyg = pytest.importorskip("torch_geometric")
    req = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "requirements.txt")
    pins = {}
    for line in open(req):
        line = line.split("#")[0].strip()
        if "==" in line:
            k, v = line.split("==", 1)
            pins[k.strip().lower().replace("-", "_")] = v.strip()
    assert "torch_geometric" in pins, "torch_geometric is not pinned in requirements.txt"
    if pins["torch_geometric"] != pyg.__version__:
        pytest.skip(f"installed torch_geometric {pyg.__version__} != pinned {pins['torch_geometric']}")


# --- the checks above are seen failing on a planted fault -------------------------------------

def _planted_scatter_add_(fault, seen):
    """A broken aten::scatter_add_ in Python on advanced indexing (index_put_, never scatter):
    drop_last  the last position along dim is never added
    no_accum   duplicate targets overwrite instead of adding (scatter instead of scatter_add)
    ``seen`` gets one (index shape, dim) per call: a miss then says whether the fault ran."""
    def kernel(self, dim, index, src):
        dim = dim % max(index.dim(), 1)
        seen.append((tuple(index.shape), dim))
        if index.numel() == 0:
            return self
        coords = list(torch.meshgrid(*[torch.arange(s, device=index.device) for s in index.shape],
                                     indexing="ij"))
        vals = src[tuple(slice(0, s) for s in index.shape)]
        coords[dim] = index
        if fault == "drop_last":
            keep = [slice(None)] * index.dim()
            keep[dim] = slice(0, index.shape[dim] - 1)
            coords = [c[tuple(keep)] for c in coords]
            vals = vals[tuple(keep)]
        coords = [c.contiguous() for c in coords]
        self.index_put_(tuple(coords), vals.contiguous(), accumulate=(fault != "no_accum"))
        return self
    return kernel


@contextlib.contextmanager
def planted_aten_scatter_add(fault):
    """Registers a broken aten::scatter_add_ CPU kernel (stridewise routing off)."""
    lib = torch.library.Library("aten", "IMPL")
    seen: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.impl("scatter_add_", _planted_scatter_add_(fault, seen), "CPU")
    try:
        yield seen
    finally:
        lib._destroy()


@pytest.mark.parametrize("fault", ["drop_last", "no_accum"])
@pytest.mark.parametrize("model", ["sage", "gat", "moe"])
def test_e2e_checks_catch_planted_scatter_add(model, fault, seed):
    """compare_tol (GNNs, MoE), the float64 rule (GNNs: accuracy.compare_to_float64, as on
    CUDA) and the independent MoE reference report a broken aten::scatter_add_; the planted
    kernel is removed afterwards."""
    pytest.importorskip("torch_geometric")
    calls: list = []

    @contextlib.contextmanager
    def planted():
        with planted_aten_scatter_add(fault) as seen:
            yield
        calls.extend(seen)

    ran = lambda: f"STRIDEWISE_SEED={BASE_SEED}; the planted kernel ran {len(calls)} times: {calls[:8]}"  # noqa: E731
    if model == "moe":
        size = dict(tokens=512, hidden=32, experts=4, k=2)
        native = run_moe("cpu", torch.float32, seed, _native, size)
        bad = run_moe("cpu", torch.float32, seed, planted, size)
        assert not torch.equal(bad["outputs"][0], bad["ref"]), f"independent reference missed the fault; {ran()}"
    else:
        size = dict(nodes=200, edges=2000, feat=8, hidden=8)
        native = run_gnn(model, "cpu", seed, _native, size)
        bad = run_gnn(model, "cpu", seed, planted, size)
        ref = run_gnn(model, "cpu", seed, _native, size, dtype=torch.float64)
        assert not accuracy.compare_to_float64(native, native, ref), "the rule fails native itself"
        assert accuracy.compare_to_float64(native, bad, ref), f"the float64 rule missed the planted {fault}; {ran()}"
    assert calls, ran()  # a miss below is then a weak check, not a fault that never ran
    assert compare_tol(native, bad), f"compare_tol missed the planted {fault} scatter_add_; {ran()}"
    x, i, s = torch.zeros(3, 2), torch.zeros(4, 2, dtype=torch.long), torch.ones(4, 2)
    assert torch.equal(x.scatter_add_(0, i, s)[0], torch.full((2,), 4.0)), "planted kernel not removed"
