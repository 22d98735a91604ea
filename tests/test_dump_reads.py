"""stridewise.dump: inputs an op does not read (issue 25; the rule is stridewise/dump/_reads.py).

The table of overwrite-only in-place overloads (_reads.OVERWRITE_ONLY) is what makes recording
their written argument as ``"read": false`` (no bytes) safe, and it is checked here on the running
torch, not trusted: every entry is run twice on clones whose written argument holds different
values (random data, then NaN), under the same RNG seed, and every output and the written
argument must come out bitwise equal (resize_, resize_as_ and _resize_output_: shape and strides
only; their values are uninitialized by contract). The same check is shown to catch ops that do
read their argument (add_, a custom op named fill_), so a wrong table entry would fail here.

Also: out= arguments are not read (ATen's out= contract); in-place ops that read self, and a
custom op named like fill_, are recorded with their bytes; a small BERT (issue 25's repro) dumps
its init/dropout ops' overwritten inputs without bytes, and a routed run records the same ops.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

import stridewise.dump as swdump
from stridewise.dump import _reads
from stridewise.dump import load_tensor
from stridewise.dump import read_index as _read_index


def read_index(rank_dir, kinds=("tensor",)):
    return _read_index(rank_dir, kinds, validate=True)


def _r(g, *shape):
    return torch.randn(*shape, generator=g)


# qualified overload -> args(self, g): the call, given the written argument `self` (4x6 float32)
# and a generator for the other arguments (seeded alike in both runs).
RECIPES = {
    "aten::fill_.Scalar": lambda s, g: (s, 2.5),
    "aten::fill_.Tensor": lambda s, g: (s, torch.tensor(-1.5)),
    "aten::zero_.default": lambda s, g: (s,),
    "aten::normal_.default": lambda s, g: (s, 0.5, 2.0),
    "aten::uniform_.default": lambda s, g: (s, -1.0, 3.0),
    "aten::bernoulli_.float": lambda s, g: (s, 0.3),
    "aten::bernoulli_.Tensor": lambda s, g: (s, torch.rand(4, 6, generator=g)),
    "aten::random_.default": lambda s, g: (s,),
    "aten::random_.from": lambda s, g: (s, -3, 10),
    "aten::random_.to": lambda s, g: (s, 7),
    "aten::exponential_.default": lambda s, g: (s, 2.0),
    "aten::geometric_.default": lambda s, g: (s, 0.3),
    "aten::cauchy_.default": lambda s, g: (s, 0.0, 1.0),
    "aten::log_normal_.default": lambda s, g: (s, 1.0, 0.5),
    "aten::copy_.default": lambda s, g: (s, _r(g, 6)),  # broadcast src
    "aten::set_.default": lambda s, g: (s,),
    "aten::set_.source_Storage": lambda s, g: (s, _r(g, 24).untyped_storage()),
    "aten::set_.source_Storage_storage_offset": lambda s, g: (s, _r(g, 24).untyped_storage(), 2, [3, 4], [1, 3]),
    "aten::set_.source_Tensor": lambda s, g: (s, _r(g, 3, 5)),
    "aten::set_.source_Tensor_storage_offset": lambda s, g: (s, _r(g, 15), 1, [2, 5], [5, 1]),
    "aten::resize_.default": lambda s, g: (s, [5, 7]),
    "aten::resize_as_.default": lambda s, g: (s, _r(g, 2, 9)),
    "aten::_resize_output_.default": lambda s, g: (s, [5, 7], s.device),
    "aten::_foreach_zero_.default": lambda s, g: ([s, s.clone().reshape(3, 8)],),
    "aten::_foreach_copy_.default": lambda s, g: ([s, s.clone().reshape(3, 8)], [_r(g, 4, 6), _r(g, 3, 8)]),
}


# Overloads with no CPU kernel on this torch (_resize_output_ has only a Meta one, for tracing):
# run on meta tensors, where only shapes and strides exist (all it has to show, see above).
META_ONLY = {"aten::_resize_output_.default"}


def _overload(qualified):
    ns_name, overload = qualified.rsplit(".", 1)
    ns, name = ns_name.split("::")
    return getattr(getattr(getattr(torch.ops, ns), name), overload)


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


def _bits(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _run(func, recipe, layout, poison, device="cpu"):
    """Runs func on freshly built arguments; the written argument (self) holds random data, or NaN
    when poison. Returns (outputs, written tensors after the call)."""
    g = torch.Generator().manual_seed(7)
    s = _r(g, 4, 6) if layout == "contiguous" else _r(g, 6, 4).t()
    if poison:
        s.fill_(float("nan"))
    s = s.to(device)
    args = recipe(s, g)
    torch.manual_seed(1234)
    out = func(*args)
    return _tensors(out), _tensors(args[0])


def _differences(func, recipe, layout, values=True, device="cpu"):
    """What differs between a run on random self and one on NaN self ([] when nothing does)."""
    (out_a, w_a), (out_b, w_b) = (_run(func, recipe, layout, p, device) for p in (False, True))
    diffs = []
    for what, xs, ys in (("output", out_a, out_b), ("written argument", w_a, w_b)):
        assert len(xs) == len(ys)
        for k, (x, y) in enumerate(zip(xs, ys)):
            if (x.shape, x.stride(), x.storage_offset(), x.dtype) != (y.shape, y.stride(), y.storage_offset(), y.dtype):
                diffs.append(f"{what} {k}: layout {x.shape}/{x.stride()} vs {y.shape}/{y.stride()}")
            elif values and not torch.equal(_bits(x), _bits(y)):
                diffs.append(f"{what} {k}: values differ")
    return diffs


def test_every_table_entry_is_a_real_overload_that_writes_that_argument():
    assert set(RECIPES) == set(_reads.OVERWRITE_ONLY), "every table entry needs a recipe below"
    assert _reads.UNINITIALIZED_OUTPUT <= set(_reads.OVERWRITE_ONLY)
    for q, arg in _reads.OVERWRITE_ONLY.items():
        func = _overload(q)  # AttributeError: not an overload of this torch
        assert _reads.qualified_name(func) == q
        assert torch._C._dispatch_has_kernel(func.name()), f"{q}: no kernel"
        assert arg in _reads.written_arguments(func), f"{q}: {arg} is not marked written"
        assert _reads.unread_arguments(func) == {arg}, q


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("qualified", sorted(_reads.OVERWRITE_ONLY))
def test_table_entry_does_not_read_its_written_argument(qualified, layout):
    func = _overload(qualified)
    values = qualified not in _reads.UNINITIALIZED_OUTPUT
    device = "cpu"
    if qualified in META_ONLY:
        assert not values and not torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CPU")
        device = "meta"
    assert _differences(func, RECIPES[qualified], layout, values, device) == []


@pytest.fixture(scope="module")
def namealike():
    """sw_dumptest::fill_.Scalar: named like aten::fill_.Scalar, same schema, but it reads self."""
    lib = torch.library.Library("sw_dumptest", "DEF")
    lib.define("fill_.Scalar(Tensor(a!) self, Scalar v) -> Tensor(a!)")
    lib.impl("fill_.Scalar", lambda self, v: self.mul_(2).add_(v), "CPU")
    yield torch.ops.sw_dumptest.fill_.Scalar
    if hasattr(lib, "_destroy"):
        lib._destroy()


def test_the_check_catches_ops_that_read_their_written_argument(namealike):
    """The check above is not vacuous: it sees add_ and the name-alike reading self."""
    assert _differences(torch.ops.aten.add_.Tensor, lambda s, g: (s, _r(g, 4, 6)), "contiguous")
    assert _differences(namealike, lambda s, g: (s, 1.0), "contiguous")
    assert _reads.unread_arguments(namealike) == frozenset()
    assert _reads.written_arguments(namealike) == {"self"}


def shard_bytes(rd):
    """Sum of the tensor data sizes in the shard headers of a rank directory."""
    total = 0
    for p in Path(rd).glob("shard_*.safetensors"):
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        total += sum(e["data_offsets"][1] - e["data_offsets"][0] for k, e in header.items() if k != "__metadata__")
    return total


def check_unread(rd, recs):
    """Records with read: false have no data and no skip reason; the shards hold exactly the bytes
    of the records that name a file."""
    for r in recs:
        if r.get("read") is False:
            assert r["io"] == "input" and r["file"] is None and r["key"] is None, r
            assert "skipped" not in r and "nbytes" not in r, r
            with pytest.raises(ValueError, match="does not read this input"):
                load_tensor(rd, r)
    assert shard_bytes(rd) == sum(r["nbytes"] for r in recs if r["file"] is not None)


def test_out_arguments_are_not_read(tmp_path, seed):
    g = torch.Generator().manual_seed(seed)
    a, b = _r(g, 4, 6), _r(g, 4, 6)
    o, m, i = torch.empty(4, 6), torch.empty(4), torch.empty(4, dtype=torch.long)
    with swdump.dump(tmp_path) as d:
        torch.add(a, b, out=o)
        torch.max(a, 1, out=(m, i))
    rd = tmp_path / "step0" / "rank0"
    recs = read_index(rd)
    got = {(r["op"], r["overload"], r["io"], r["arg"]): r for r in recs}
    for op, args in (("aten::add.out", ("self", "other")), ("aten::max.dim_max", ("self",))):
        name, overload = op.split(".")
        for arg in args:
            r = got[(name, overload, "input", arg)]
            assert "read" not in r and r["file"] and "alias" not in r, r
    outs = {("aten::add", "out", "out"): o, ("aten::max", "dim_max", "max"): m,
            ("aten::max", "dim_max", "max_values"): i}
    for (op, overload, arg), t in outs.items():
        r = got[(op, overload, "input", arg)]
        assert r["read"] is False and r["alias"] == "written", r
        assert r["addr"] == [t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()], r
    assert _reads.unread_arguments(torch.ops.aten.add.out) == {"out"}
    assert _reads.unread_arguments(torch.ops.aten.max.dim_max) == {"max", "max_values"}
    add_out = got[("aten::add", "out", "output", "out0")]  # the return aliases out, written
    assert add_out["alias"] == "written" and add_out["addr"] == got[("aten::add", "out", "input", "out")]["addr"]
    assert d.stats["unread"] == 3
    check_unread(rd, recs)


def test_in_place_ops_that_read_self_are_recorded_with_their_bytes(tmp_path, seed):
    g = torch.Generator().manual_seed(seed)
    x = _r(g, 4, 6)
    idx = torch.tensor([0, 2])
    calls = [
        ("aten::add_", lambda: x.add_(_y)),
        ("aten::mul_", lambda: x.mul_(2)),
        ("aten::index_put_", lambda: x.index_put_((idx,), torch.ones(6))),
        ("aten::masked_fill_", lambda: x.masked_fill_(x > 0, 0.5)),
        ("aten::scatter_", lambda: x.scatter_(1, torch.zeros(4, 1, dtype=torch.long), 3.0)),
    ]
    _y = _r(g, 4, 6)
    before = {}
    with swdump.dump(tmp_path) as d:
        for op, call in calls:
            before[op] = x.clone()
            call()
    recs = read_index(d.rank_dir)
    for op, _ in calls:
        r = next(r for r in recs if r["op"] == op and r["io"] == "input" and r["arg"] == "self")
        assert "read" not in r and r["alias"] == "written" and r["file"], r
        assert torch.equal(load_tensor(d.rank_dir, r), before[op]), op
    assert d.stats["unread"] == 0


def test_a_custom_op_named_like_fill_is_recorded_with_its_bytes(tmp_path, namealike):
    """Exact qualified names, never patterns: sw_dumptest::fill_.Scalar reads self, so it is read."""
    x = torch.arange(6.0)
    with swdump.dump(tmp_path) as d:
        namealike(x, 1.0)
        x.fill_(4.0)  # the real one, for contrast
    recs = read_index(d.rank_dir)
    mine = [r for r in recs if r["op"] == "sw_dumptest::fill_"]
    assert [(r["io"], r["overload"], r["alias"]) for r in mine] == [("input", "Scalar", "written"),
                                                                    ("output", "Scalar", "written")]
    assert "read" not in mine[0] and torch.equal(load_tensor(d.rank_dir, mine[0]), torch.arange(6.0))
    assert torch.equal(load_tensor(d.rank_dir, mine[1]), torch.arange(6.0) * 2 + 1)
    aten = [r for r in recs if r["op"] == "aten::fill_" and r["io"] == "input"]
    assert aten[0]["read"] is False and aten[0]["arg"] == "self"
    check_unread(d.rank_dir, recs)


OVERWRITE_FAMILY = ("aten::zero_", "aten::fill_", "aten::normal_", "aten::uniform_", "aten::bernoulli_")


def bert_step(routed=None):
    """Issue 25's repro (/tmp/i25/bert.py): a 2-layer BertModel (hidden 64, random weights,
    dropout active) built, run forward and backward. Building it runs the init ops (normal_,
    uniform_, zero_, fill_) on fresh empty() memory; dropout runs bernoulli_."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=32)
    m = transformers.BertModel(cfg).train()
    tok = torch.randint(0, 100, (2, 12))
    torch.manual_seed(1)
    ctx = routed.use() if routed is not None else None
    if ctx is not None:
        ctx.__enter__()
    try:
        o = m(tok).last_hidden_state
        g = torch.gather(o, 2, torch.randint(0, 64, (2, 12, 5)))
        (o.pow(2).mean() + g.sum()).backward()
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)


def test_bert_overwritten_inputs_are_recorded_without_bytes(tmp_path):
    with swdump.dump(tmp_path) as d:
        bert_step()
    rd = tmp_path / "step0" / "rank0"
    recs = read_index(rd)
    family = [r for r in recs if r["op"] in OVERWRITE_FAMILY and r["io"] == "input" and r["arg"] == "self"]
    assert {r["op"] for r in family} == set(OVERWRITE_FAMILY)
    assert all(r["read"] is False and r["alias"] == "written" for r in family)
    assert d.stats["unread"] == sum(1 for r in recs if r.get("read") is False) >= len(family)
    check_unread(rd, recs)


def test_a_routed_run_records_the_same_ops(tmp_path, sw):
    """stridewise.use() inside the dump runs stridewise's control ops (stridewise::_enable, ...):
    they are neither recorded nor counted in seq, so routed and native records line up."""
    ops = {}
    for mode in ("native", "sw"):
        with swdump.dump(tmp_path / mode):
            bert_step(sw if mode == "sw" else None)
        ops[mode] = read_index(tmp_path / mode / "step0" / "rank0", kinds=("op",))
    assert not any(o["op"].startswith("stridewise::") for o in ops["sw"])
    assert [o["seq"] for o in ops["sw"]] == list(range(len(ops["sw"])))
    assert ops["sw"] == ops["native"]
