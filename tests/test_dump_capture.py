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

from conftest import PYDIR, ROOT  # noqa: E402  (the installed package or python/)

import stridewise.dump as swdump  # noqa: E402
from stridewise import schemas  # noqa: E402
from stridewise.dump import load_tensor  # noqa: E402
from stridewise.dump import read_index as _read_index  # noqa: E402


def read_index(rank_dir, kinds=("tensor",)):
    """read_index with every record (of any kind) checked against the shipped JSON Schema: what
    each test here records matches stridewise/schemas/dump_index_record.schema.json."""
    return _read_index(rank_dir, kinds, validate=True)

# Runs the dump CLI in a fresh interpreter whether or not the native library loads (the package
# __init__ loads it; a namespace stand-in is used when it cannot).
CLI = textwrap.dedent(f"""
    import sys, types
    sys.path.insert(0, {str(PYDIR)!r})
    try:
        import stridewise
    except ImportError:
        stub = types.ModuleType("stridewise"); stub.__path__ = [{str(PYDIR / 'stridewise')!r}]
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
        sys.path.insert(0, {str(PYDIR)!r})
        import torch
        import importlib.util
        spec = importlib.util.spec_from_file_location("swd", {str(PYDIR / 'stridewise/dump/__init__.py')!r},
            submodule_search_locations=[{str(PYDIR / 'stridewise/dump')!r}])
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
    assert read_index(rd, kinds=("meta",))[0]["end_record"] is True  # promised, never written:
    assert read_index(rd, kinds=("end",)) == []                     # a reader knows it was cut short
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
        spec = importlib.util.spec_from_file_location("swd", {str(PYDIR / 'stridewise/dump/__init__.py')!r},
            submodule_search_locations=[{str(PYDIR / 'stridewise/dump')!r}])
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


def test_command_line_options_before_the_script(tmp_path):
    """Without --: argparse reads the options and stops at the script (or at -m): an abbreviated
    flag (--overw) does not swallow the script, and the script's own options (--dir, -m, --) are
    its own. (The hand-rolled split this replaced took --overw for an option with a value.)"""
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        print("ARGV", sys.argv[1:])
        torch.gather(torch.ones(3), 0, torch.tensor([1]))
    """))
    for k, (opts, want) in enumerate(((["--overw"], ["--dir", "x", "-m", "y", "--", "z"]),
                                      (["--no-in", "--fsync=never"], ["-q"]),
                                      (["--overwrite", "--"], ["--step", "9"]))):
        p = subprocess.run([sys.executable, "-c", CLI, "--dir", str(tmp_path / f"d{k}"), "--ops", "gather", *opts,
                            str(script), *want], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (opts, p.stderr)
        assert f"ARGV {want!r}" in p.stdout, (opts, p.stdout, p.stderr)
        assert "1 ops" in p.stderr and "step0/rank0" in p.stderr, p.stderr
    # -m: the module and everything after it are the module's
    p = subprocess.run([sys.executable, "-c", CLI, "--dir", str(tmp_path / "m"), "-m", "json.tool", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "usage" in p.stdout, p.stderr
    p = subprocess.run([sys.executable, "-c", CLI, "--dir", str(tmp_path / "m2"), "-m"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "-m needs a module name" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-c", CLI, str(script), "--dir", str(tmp_path / "d")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--dir" in p.stderr and "required" in p.stderr, p.stderr


def _index_lines(rd):
    return (Path(rd) / "index.jsonl").read_text().splitlines()


def test_index_records_match_the_shipped_schema_and_bad_ones_are_named(tmp_path):
    """read_index(validate=True) checks each record against
    stridewise/schemas/dump_index_record.schema.json (jsonschema); a planted bad record is a
    SchemaError naming index.jsonl:LINE, the JSON path of the bad field and the rule. load_tensor
    checks the record it is given the same way."""
    x = torch.randn(4, 6, dtype=torch.complex64)
    with swdump.dump(tmp_path / "d", ops=["gather"]) as d:
        torch.gather(x, 1, torch.tensor([[0, 5]]).expand(4, 2))
        torch.gather(torch.randn(2, 2, device="meta"), 0, torch.zeros(1, 2, dtype=torch.long, device="meta"))
    rd = d.rank_dir
    recs = read_index(rd, kinds=None)  # validated
    assert [r["kind"] for r in recs][:2] == ["meta", "op"] and any(r.get("skipped") for r in recs)
    lines = _index_lines(rd)
    at = next(i for i, r in enumerate(recs) if r["kind"] == "tensor" and not r.get("skipped"))
    faults = [  # (the planted fault on a stored tensor record, the path named, words of the message)
        (lambda r: r.update(shape=[4, "2"]), "$.shape[1]", "'2' is not of type 'integer'"),
        (lambda r: r.pop("key"), "$", "'key' is a required property"),
        (lambda r: r.update(phase="fwd"), "$.phase", "'fwd' is not one of ['forward', 'backward']"),
        (lambda r: r.update(io="in"), "$.io", "'in' is not one of ['input', 'output']"),
        (lambda r: r.update(pos=-1), "$.pos", "-1 is less than the minimum of 0"),
        (lambda r: (r.pop("kind"), r.update(call=None)), "$.call", "None is not of type 'integer'"),
    ]
    faults += [
        (lambda r: r.update(read=False, file=None), "$.key", "is not of type 'null'"),  # unread, yet a key
        (lambda r: r.update(alias="wrote"), "$.alias", "'wrote' is not one of ['written', 'new', 'view']"),
        (lambda r: r.update(addr=[1]), "$.addr", "is too short"),
    ]
    for fault, path, words in faults:
        bad = dict(recs[at])
        fault(bad)
        (Path(rd) / "index.jsonl").write_text("\n".join(lines[:at] + [json.dumps(bad)] + lines[at + 1:]) + "\n")
        with pytest.raises(schemas.SchemaError) as e:
            read_index(rd)
        msg = str(e.value)
        assert msg.startswith(f"{rd}/index.jsonl:{at + 1}: {path}: ") and words in msg, (path, msg)
        assert "dump_index_record.schema.json" in msg, msg
        assert len(_read_index(rd, kinds=None)) == len(recs)  # validate=False: read as before
        with pytest.raises(schemas.SchemaError, match="load_tensor"):
            load_tensor(rd, bad)
    # a record that is not an object: an error with or without validate
    (Path(rd) / "index.jsonl").write_text("\n".join(lines + ["[1, 2]"]) + "\n")
    with pytest.raises(ValueError, match=f"index.jsonl:{len(lines) + 1}: .*not of type 'object'"):
        read_index(rd)
    with pytest.raises(ValueError, match=f"index.jsonl:{len(lines) + 1}: record is not a JSON object"):
        _read_index(rd)
    # the good records still load; an op record is not a tensor
    assert torch.equal(load_tensor(rd, recs[at]), x)
    with pytest.raises(ValueError, match="not a tensor record"):
        load_tensor(rd, recs[1])
    # the end record: counts are non-negative integers
    assert recs[-1] == {"kind": "end", "step": 0, "rank": 0, "ops": 2, "tensors": 6}
    (Path(rd) / "index.jsonl").write_text("\n".join(lines[:-1] + ['{"kind": "end", "step": 0, "rank": 0, '
                                                                  '"ops": -1, "tensors": 6}']) + "\n")
    with pytest.raises(schemas.SchemaError, match=r"index.jsonl:\d+: \$.ops: -1 is less than the minimum of 0"):
        read_index(rd)
    # a record of a future kind is allowed (readers skip it), as sw-compare does
    (Path(rd) / "index.jsonl").write_text("\n".join(lines + ['{"kind": "note", "text": 1}']) + "\n")
    assert len(read_index(rd, kinds=None)) == len(recs) + 1


def test_synthetic_dumps_match_the_schema(tmp_path):
    """The compare tests' synthetic dumps (dump._testing.SyntheticDump) write what read_index
    accepts, so the schema is the format both writers share."""
    import numpy as np
    from stridewise.dump._testing import SyntheticDump

    s = SyntheticDump(tmp_path, step=1, rank=2)
    s.op("aten::gather", inputs=[np.ones((2, 3), np.float32), np.zeros((2, 1), np.int64)],
         outputs=[np.ones((2, 1), np.float32)])
    s.op("aten::scatter_add", outputs=[(np.zeros(4, np.uint16), "BF16")], phase="backward")
    s.close()
    recs = read_index(tmp_path / "step1" / "rank2", kinds=None)
    assert [r["kind"] for r in recs].count("tensor") == 4


def _span(t):
    """Bytes a strided view spans, by the documented formula (0 for an empty tensor)."""
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))) * t.element_size()


def test_addr_storage_and_alias(tmp_path, seed):
    """Provenance fields: addr [lo, hi) = data_ptr and the bytes the view spans; storage = the
    storage's base; alias: an in-place op's self input and its output are "written" (same addr), a
    view op's output is "view", a functional op's output "new"; a plain input has no alias."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(4, 6, generator=g)
    y = torch.randn(4, 6, generator=g)
    cases = {"transposed": base.t(), "expanded": base[:1].expand(5, 6), "sliced": base[:, 1::2],
             "empty": torch.empty(0, 3), "offset": base.reshape(-1)[7:19].view(3, 4)}
    with swdump.dump(tmp_path) as d:
        for t in cases.values():
            torch.ops.aten.alias(t)
        x = base.clone()
        x.add_(y)
        torch.add(x, y)
        torch.ops.aten.t(x)
        x.view(24)
        torch.ops.aten.alias(torch.empty(2, 3, device="meta"))
    recs = read_index(d.rank_dir)
    alias_in = [r for r in recs if r["op"] == "aten::alias" and r["io"] == "input"]
    for (name, t), r in zip(cases.items(), alias_in):
        lo = t.data_ptr()
        assert r["addr"] == [lo, lo + _span(t)], name
        assert "alias" not in r, name  # alias(Tensor(a) self): a view, not written
        if t.numel():
            assert r["storage"] == t.untyped_storage().data_ptr(), name
    assert [r["addr"][1] - r["addr"][0] for r in alias_in[:5]] == [96, 24, 92, 0, 48]
    assert alias_in[2]["addr"][0] == base.data_ptr() + 4 and alias_in[2]["storage"] == base.data_ptr()
    meta = alias_in[-1]
    assert meta["device"] == "meta" and meta["addr"] == [0, 0] and "storage" not in meta
    assert all(r["alias"] == "view" for r in recs if r["op"] == "aten::alias" and r["io"] == "output")

    def one(op, io, arg=None):
        (r,) = [r for r in recs if r["op"] == op and r["io"] == io and (arg is None or r["arg"] == arg)]
        return r
    add_self, add_other, add_out = one("aten::add_", "input", "self"), one("aten::add_", "input", "other"), \
        one("aten::add_", "output")
    assert add_self["alias"] == add_out["alias"] == "written" and "alias" not in add_other
    assert add_self["addr"] == add_out["addr"] == [x.data_ptr(), x.data_ptr() + 96]
    assert add_self.get("read", True) is True and add_self["file"]  # add_ reads self
    assert one("aten::add", "output")["alias"] == "new" and "alias" not in one("aten::add", "input", "self")
    t_out, v_out = one("aten::t", "output"), one("aten::view", "output")
    assert t_out["alias"] == v_out["alias"] == "view"
    assert t_out["addr"] == v_out["addr"] == add_out["addr"] and t_out["storage"] == x.data_ptr()


def test_end_record_and_op_input_counts(tmp_path):
    """Each step directory closed cleanly ends with {"kind": "end", "ops", "tensors"} counting its
    op and tensor records (meta promises it: end_record true); an op record's "inputs" counts the
    tensor input records that directly follow it."""
    x = torch.randn(3, 4)
    with swdump.dump(tmp_path, step=1) as d:
        torch.cat([x, x])
        x.sum()
        d.next_step()
        torch.gather(x, 1, torch.zeros(3, 1, dtype=torch.long))
        d.set_step(5)
    for step in (1, 2, 5):
        rd = tmp_path / f"step{step}" / "rank0"
        recs = read_index(rd, kinds=None)
        assert recs[0]["kind"] == "meta" and recs[0]["end_record"] is True
        assert [r["kind"] for r in recs].count("end") == 1 and recs[-1]["kind"] == "end", step
        ops = [r for r in recs if r["kind"] == "op"]
        assert recs[-1] == {"kind": "end", "step": step, "rank": 0, "ops": len(ops),
                            "tensors": sum(r["kind"] == "tensor" for r in recs)}
        for k, r in enumerate(recs):
            if r["kind"] == "op":
                follow = recs[k + 1:k + 1 + r["inputs"] + 1]
                assert [f["io"] for f in follow[:-1]] == ["input"] * r["inputs"], (step, r)
                assert all(f["seq"] == r["seq"] for f in follow[:-1])
                assert follow[-1].get("io") != "input" or follow[-1]["seq"] != r["seq"]
    assert [r["inputs"] for r in read_index(tmp_path / "step1" / "rank0", kinds=("op",))] == [2, 1]
    assert read_index(tmp_path / "step5" / "rank0", kinds=None)[-1]["ops"] == 0
    with swdump.dump(tmp_path / "n", inputs=False) as d:
        x.neg()
    assert [r["inputs"] for r in read_index(d.rank_dir, kinds=("op",))] == [0]


def test_package_imports_without_torch():
    code = textwrap.dedent(f"""
        import sys, types
        sys.modules["torch"] = None       # any `import torch` now raises ImportError
        stub = types.ModuleType("stridewise"); stub.__path__ = [{str(PYDIR / 'stridewise')!r}]
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
