"""End to end: dump a small model's forward and backward twice and compare with sw-compare.
Native vs native passes (indexing ops bitwise); a perturbed op is named as the first divergent
op, forward or backward; stridewise-routed vs native is bitwise on every indexing op. Each runs
on CPU and on CUDA (the model, its inputs and its gradients on the GPU; the dump copies them to
the host). On CUDA the runs use torch's deterministic algorithms: index_select's backward
(index_add_) otherwise accumulates with atomics in a varying order, and two native runs would
differ in rounding."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import DEVICES, deterministic_device

from conftest import PYDIR, ROOT  # noqa: E402  (the installed package or python/)

import stridewise.dump as swdump  # noqa: E402
from stridewise.dump import compare  # noqa: E402

INDEXING = {"aten::embedding", "aten::index_select", "aten::gather", "aten::index", "aten::scatter_add",
            "aten::index_put", "aten::_index_put_impl_"}


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, tok, sel, gidx, rows):
        e = self.emb(tok)                       # embedding
        s = torch.index_select(e, 0, sel)       # index_select
        h = torch.tanh(self.lin(s))             # float ops
        g = torch.gather(h, 1, gidx)            # gather
        r = h[rows]                             # advanced indexing: aten::index
        return g.sum() + r.pow(2).mean()


class Perturb(TorchDispatchMode):
    """Adds eps to one element of the first output of `op` (in `phase`)."""

    def __init__(self, op, phase="forward", eps=1e-2):
        super().__init__()
        self.op, self.phase, self.eps, self.hits = op, phase, eps, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        phase = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        if func._schema.name == self.op and phase == self.phase and self.hits == 0:
            self.hits += 1
            out.view(-1)[out.numel() // 2] += self.eps
        return out


device = pytest.fixture(params=DEVICES, name="device")(deterministic_device)


def run_model(root, seed, device, perturb=None, routed=None):
    torch.manual_seed(seed)
    model = Tiny().to(device)
    tok = torch.randint(0, 50, (12,)).to(device)
    sel = torch.randint(0, 12, (8,)).to(device)
    gidx = torch.randint(0, 16, (8, 4)).to(device)
    rows = torch.tensor([1, 3, 3, 7], device=device)
    outer = Perturb(*perturb) if perturb else None
    if outer:
        outer.__enter__()  # entered first: the dump (inner) records what the perturbed op returned
    try:
        with swdump.dump(root):
            if routed is not None:
                with routed.use(include=["gather"]):
                    model(tok, sel, gidx, rows).backward()
            else:
                model(tok, sel, gidx, rows).backward()
    finally:
        if outer:
            outer.__exit__(None, None, None)
    if outer:
        assert outer.hits == 1, f"{perturb} never ran"


def check_indexing_bitwise(result):
    seen = set()
    for e in result.entries:
        if e["op"] in INDEXING and e["status"] != "ONLY_A" and e["status"] != "ONLY_B":
            seen.add(e["op"])
            if e["op"] in ("aten::embedding", "aten::index_select", "aten::gather", "aten::index"):
                assert e["standard"]["name"] == "bitwise", e
            assert e["status"] == "PASS" and e["metrics"]["bit_mismatch"] == 0, e
    assert {"aten::embedding", "aten::index_select", "aten::gather", "aten::index"} <= seen, seen


def test_native_vs_native_passes_bitwise(tmp_path, exe, seed, device):
    run_model(tmp_path / "a", seed, device)
    run_model(tmp_path / "b", seed, device)
    r = compare(tmp_path / "a", tmp_path / "b")
    assert r.passed, r.failing()[:3]
    check_indexing_bitwise(r)
    phases = {e["phase"] for e in r.entries}
    assert phases == {"forward", "backward"}


@pytest.mark.parametrize("op,phase", [("aten::index_select", "forward"), ("aten::gather", "forward"),
                                      ("aten::tanh", "forward"), ("aten::embedding_dense_backward", "backward"),
                                      ("aten::tanh_backward", "backward")])
def test_perturbed_op_is_named_first(tmp_path, exe, seed, op, phase, device):
    run_model(tmp_path / "a", seed, device)
    run_model(tmp_path / "b", seed, device, perturb=(op, phase))
    r = compare(tmp_path / "a", tmp_path / "b")
    assert r.returncode == 1
    first = r.first_divergent
    assert (first["op"], first["phase"], first["call"]) == (op, phase, 0), first
    assert first["inputs_diverged"] is False
    before = [e for e in r.entries if e["seq"] is not None and e["seq"] < first["seq"]]
    assert before and all(e["status"] in ("PASS", "IGNORED") for e in before)


def test_stridewise_routed_vs_native_bitwise(tmp_path, exe, seed, device):
    try:
        import stridewise
        stridewise.use  # noqa: B018 - the real package, not the test stand-in
        torch.ops.stridewise.gather  # noqa: B018
    except (ImportError, AttributeError) as e:
        pytest.skip(f"stridewise native library not loadable: {e}")
    stridewise.reset_stats()
    run_model(tmp_path / "native", seed, device)
    run_model(tmp_path / "sw", seed, device, routed=stridewise)
    st = stridewise.stats()["gather"]
    assert st["calls"] > 0 and st[device] > 0, st  # the routed run really used stridewise there
    r = compare(tmp_path / "native", tmp_path / "sw")
    assert r.passed, r.failing()[:3]
    check_indexing_bitwise(r)
    run_model(tmp_path / "sw_bad", seed, device, routed=stridewise, perturb=("aten::gather", "forward"))
    r = compare(tmp_path / "native", tmp_path / "sw_bad")
    assert r.returncode == 1 and r.first_divergent["op"] == "aten::gather"
