"""stridewise.dump: what is recorded (forward and backward, every op or a filtered set), that it
is a snapshot taken at capture time, the directory layout, crash tolerance, bounded memory, the
command line, and that the package imports without torch."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))

import stridewise.dump as swdump  # noqa: E402
from stridewise.dump import load_tensor, read_index  # noqa: E402

# Runs the dump CLI in a fresh interpreter whether or not the native library loads (the package
# __init__ loads it; a namespace stand-in is used when it cannot).
CLI = textwrap.dedent(f"""
    import sys, types
    sys.path.insert(0, {str(ROOT / 'python')!r})
    try:
        import stridewise
    except ImportError:
        stub = types.ModuleType("stridewise"); stub.__path__ = [{str(ROOT / 'python' / 'stridewise')!r}]
        sys.modules["stridewise"] = stub
    from stridewise.dump.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def tensors(rank_dir, **match):
    return [r for r in read_index(rank_dir) if all(r.get(k) == v for k, v in match.items())]


def test_forward_and_backward_ops_are_recorded_and_marked(tmp_path, seed):
    torch.manual_seed(seed)
    emb = torch.nn.Embedding(10, 4)
    idx = torch.randint(0, 10, (6,))
    gidx = torch.randint(0, 4, (6, 2))
    with swdump.dump(tmp_path) as d:
        y = torch.gather(emb(idx), 1, gidx)
        y.pow(2).sum().backward()
    rd = d.rank_dir
    assert rd == str(tmp_path / "step0" / "rank0")
    phases = {(r["op"], r["phase"]) for r in read_index(rd)}
    for fwd in ("aten::embedding", "aten::gather", "aten::pow", "aten::sum"):
        assert (fwd, "forward") in phases
    for bwd in ("aten::scatter_add", "aten::embedding_dense_backward"):
        assert (bwd, "backward") in phases
    assert not any(op == "aten::embedding_dense_backward" and ph == "forward" for op, ph in phases)
    g_in = tensors(rd, op="aten::gather", io="input")
    assert [r["arg"] for r in g_in] == ["self", "index"]
    assert torch.equal(load_tensor(rd, g_in[1]), gidx)
    g_out = tensors(rd, op="aten::gather", io="output")[0]
    assert torch.equal(load_tensor(rd, g_out), y.detach())
    assert g_out["shape"] == [6, 2] and g_out["strides"] == [2, 1] and g_out["device"] == "cpu"
    grad = tensors(rd, op="aten::embedding_dense_backward", io="output")[0]
    assert torch.equal(load_tensor(rd, grad), emb.weight.grad)
    meta = read_index(rd, kinds=("meta",))[0]
    assert meta["torch"] == torch.__version__ and meta["rank_source"] in ("default", "env RANK")
    ops = read_index(rd, kinds=("op",))
    assert any(o["op"] == "aten::gather" and o["args"] == {"dim": "1"} for o in ops)
    assert d.stats["tensors"] == len(read_index(rd)) and d.stats["skipped"] == 0


def test_snapshot_is_taken_at_capture_time(tmp_path, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 4, generator=g)
    x0 = x.clone()
    idx = torch.tensor([0, 2, 5])
    with swdump.dump(tmp_path) as d:
        y = torch.index_select(x, 0, idx)
        y0 = x0[idx]
        y.add_(1)       # changes the output of index_select after it was captured
        x.mul_(3)       # changes the input of index_select
    rd = d.rank_dir
    sel_in, sel_out = tensors(rd, op="aten::index_select", io="input")[0], tensors(rd, op="aten::index_select", io="output")[0]
    assert torch.equal(load_tensor(rd, sel_in), x0)
    assert torch.equal(load_tensor(rd, sel_out), y0)
    add_in, add_out = tensors(rd, op="aten::add_", io="input")[0], tensors(rd, op="aten::add_", io="output")[0]
    assert torch.equal(load_tensor(rd, add_in), y0)
    assert torch.equal(load_tensor(rd, add_out), y0 + 1)
    assert torch.equal(load_tensor(rd, tensors(rd, op="aten::mul_", io="output")[0]), x0 * 3)


def test_op_filter_exclude_and_overloads(tmp_path):
    x = torch.randn(5, 3)
    i = torch.tensor([[0, 1, 2]] * 5)
    def work():
        torch.gather(x, 1, i)
        torch.index_select(x, 0, torch.tensor([1]))
        torch.scatter(x, 1, i, 1.0)
        (x * 2).sum()
    with swdump.dump(tmp_path / "f", ops=["gather", "aten::index_*", torch.ops.aten.scatter.value]) as d:
        work()
    assert {r["op"] for r in read_index(d.rank_dir)} == {"aten::gather", "aten::index_select", "aten::scatter"}
    with swdump.dump(tmp_path / "o", ops="aten::scatter.value,mul") as d:
        work()
    assert {(r["op"], r["overload"]) for r in read_index(d.rank_dir)} == {("aten::scatter", "value"), ("aten::mul", "Tensor")}
    with swdump.dump(tmp_path / "e", exclude=["gather", "aten::sum*"]) as d:
        work()
    ops = {r["op"] for r in read_index(d.rank_dir)}
    assert "aten::gather" not in ops and "aten::sum" not in ops and "aten::index_select" in ops
    with swdump.dump(tmp_path / "n", ops=["gather"], inputs=False) as d:
        work()
    assert [r["io"] for r in read_index(d.rank_dir)] == ["output"]


def test_dtypes_layouts_and_special_shapes_round_trip(tmp_path, seed):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(4, 6, generator=g)
    cases = {
        "bf16": base.to(torch.bfloat16), "f16": base.half(), "f64": base.double(), "bool": base > 0,
        "i8": (base * 10).to(torch.int8), "c64": torch.complex(base, -base), "scalar": torch.tensor(3.5),
        "empty": torch.empty(0, 3), "transposed": base.t(), "expanded": base[:1].expand(5, 6),
        "sliced": base[:, 1::2], "offset": base.reshape(-1)[7:19].view(3, 4),
    }
    with swdump.dump(tmp_path) as d:
        for t in cases.values():
            torch.ops.aten.alias(t)
    recs = tensors(d.rank_dir, op="aten::alias", io="input")
    assert len(recs) == len(cases)
    for (name, t), r in zip(cases.items(), recs):
        got = load_tensor(d.rank_dir, r)
        assert got.dtype == t.dtype and got.shape == t.shape and torch.equal(got, t), name
        assert r["strides"] == list(t.stride()) and r["storage_offset"] == t.storage_offset(), name
    assert recs[list(cases).index("c64")]["stored_as"] == "view_as_real"


def test_layout_steps_ranks_and_existing_directories(tmp_path, monkeypatch):
    x = torch.randn(3)
    monkeypatch.setenv("RANK", "3")
    with swdump.dump(tmp_path, ops=["neg"], step=7) as d:
        x.neg()
        d.next_step()
        x.neg()
        d.set_step(10)
        x.neg()
    for s in (7, 8, 10):
        rd = tmp_path / f"step{s}" / "rank3"
        assert [r["call"] for r in read_index(rd)] == [0, 0]  # counters restart each step
        assert read_index(rd, kinds=("meta",))[0]["rank_source"] == "env RANK"
    with pytest.raises(FileExistsError, match="step7/rank3: a dump for step 7 rank 3 already exists"):
        with swdump.dump(tmp_path, step=7):
            pass
    with swdump.dump(tmp_path, ops=["abs"], step=7, overwrite=True) as d:
        x.abs()
    assert {r["op"] for r in read_index(d.rank_dir)} == {"aten::abs"}
    import torch.distributed as dist
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 5)
    assert swdump.resolve_rank() == (5, "torch.distributed")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.delenv("RANK")
    assert swdump.resolve_rank() == (0, "default")


def test_killed_process_loses_nothing_already_recorded(tmp_path, exe_or_none=None):
    script = tmp_path / "killme.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT / 'python')!r})
        import torch
        import importlib.util
        spec = importlib.util.spec_from_file_location("swd", {str(ROOT / 'python/stridewise/dump/__init__.py')!r},
            submodule_search_locations=[{str(ROOT / 'python/stridewise/dump')!r}])
        m = importlib.util.module_from_spec(spec); sys.modules["swd"] = m; spec.loader.exec_module(m)
        x = torch.arange(1000, dtype=torch.float32)
        d = m.dump({str(tmp_path / 'd')!r}, ops=["index_select"], shard_bytes=20000)
        d.__enter__()
        for i in range(25):
            torch.index_select(x, 0, torch.arange(i, i + 100))
        os.kill(os.getpid(), signal.SIGKILL)
    """))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    rd = tmp_path / "d" / "step0" / "rank0"
    recs = read_index(rd)
    assert len(recs) == 25 * 3
    shards = sorted(rd.glob("shard_*.safetensors"))
    assert len(shards) > 3  # bounded shards were rolled over while running
    for r in recs:
        if r["io"] == "output":
            i = r["call"]
            assert torch.equal(load_tensor(rd, r), torch.arange(i, i + 100, dtype=torch.float32))


def test_memory_stays_bounded_and_shards_roll_over(tmp_path):
    """Peak RSS of a loop that dumps 256 MiB is within 24 MiB of the same loop without the dump
    (the growth both show comes from the allocator, not from the dump)."""
    script = tmp_path / "big.py"
    script.write_text(textwrap.dedent(f"""
        import resource, sys, importlib.util, torch
        from torch.utils._python_dispatch import TorchDispatchMode
        spec = importlib.util.spec_from_file_location("swd", {str(ROOT / 'python/stridewise/dump/__init__.py')!r},
            submodule_search_locations=[{str(ROOT / 'python/stridewise/dump')!r}])
        m = importlib.util.module_from_spec(spec); sys.modules["swd"] = m; spec.loader.exec_module(m)
        class Plain(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {{}}))
        x = torch.randn(2 << 20)              # 8 MiB
        idx = torch.randperm(2 << 20)         # 16 MiB
        ctx = m.dump({str(tmp_path / 'd')!r}, ops=["index_select"], shard_bytes=32 << 20) if sys.argv[1] == "dump" else Plain()
        with ctx:
            for i in range(8):
                y = torch.index_select(x, 0, idx)
                del y
        print(ctx.stats["bytes"] if sys.argv[1] == "dump" else 0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """))
    peak = {}
    for mode in ("plain", "dump"):
        p = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        nbytes, peak[mode] = map(int, p.stdout.split())
    assert nbytes == 8 * (8 + 16 + 8) << 20  # 256 MiB written
    extra_mib = (peak["dump"] - peak["plain"]) / 1024
    assert extra_mib < 24, f"dumping {nbytes >> 20} MiB raised peak RSS by {extra_mib:.0f} MiB"
    shards = list((tmp_path / "d" / "step0" / "rank0").glob("shard_*.safetensors"))
    assert len(shards) >= 8


def test_command_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        assert sys.argv[1:] == ["--lr", "0.1"], sys.argv
        x = torch.randn(4, 3)
        torch.gather(x, 1, torch.zeros(4, 1, dtype=torch.long)).sum()
        sys.exit(3)
    """))
    p = subprocess.run([sys.executable, "-c", CLI, "dump", "--dir", str(tmp_path / "d"), "--ops", "gather",
                        "--step", "2", "--", str(script), "--lr", "0.1"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    assert "1 ops, 3 tensors" in p.stderr and "step2/rank0" in p.stderr
    recs = read_index(tmp_path / "d" / "step2" / "rank0")
    assert [r["op"] for r in recs] == ["aten::gather"] * 3
    p = subprocess.run([sys.executable, "-c", CLI, "--dir", str(tmp_path / "d"), "--step", "2", "--", str(script)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "already exists" in p.stderr
    p = subprocess.run([sys.executable, "-c", CLI, "--dir", str(tmp_path / "d")], capture_output=True, text=True)
    assert p.returncode == 2 and "no script given" in p.stderr
    p = subprocess.run([sys.executable, "-c", CLI, "--dir", str(tmp_path / "m"), "--", "-m", "json.tool", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "usage" in p.stdout


def test_package_imports_without_torch():
    code = textwrap.dedent(f"""
        import sys, types
        sys.modules["torch"] = None       # any `import torch` now raises ImportError
        stub = types.ModuleType("stridewise"); stub.__path__ = [{str(ROOT / 'python' / 'stridewise')!r}]
        sys.modules["stridewise"] = stub
        import stridewise.dump as d
        assert callable(d) and callable(d.compare) and d.dump.compare is d.compare
        try:
            with d("/tmp/never"):
                pass
        except ImportError:
            print("ok")
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
