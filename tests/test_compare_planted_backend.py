"""The planted kernel bug of tests/compare_planted_backend.py does what it says: under
``planted_bug(op, phase, call)`` exactly one element of that op's output differs from a clean
run's, only on the chosen call in the chosen phase; every op call before it is unchanged (so the
op is the first divergent one); forward and backward ops; natively and routed through
stridewise; both registration keys; and the dump records the changed value, which sw-compare
names as the first divergent op."""
from __future__ import annotations

import contextlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from compare_planted_backend import PlantedBugMissed, planted_bug
from conftest import DEVICES, deterministic_device


class Record(TorchDispatchMode):
    """Every aten op call's tensor inputs and outputs (cloned), numbered per (op, phase) like
    the dump's ``call``; ``order`` is the execution order."""

    def __init__(self):
        super().__init__()
        self.calls, self.count, self.order = {}, {}, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        phase = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        name = func._schema.name
        if not name.startswith("aten::"):  # stridewise.use()'s control ops
            return func(*args, **kwargs)
        n = self.count.get((name, phase), 0)
        self.count[(name, phase)] = n + 1
        ins = [t.detach().clone() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        out = func(*args, **kwargs)
        outs = [t.detach().clone() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.calls[(name, phase, n)] = (ins, outs)
        self.order.append((name, phase, n))
        return out


class Net(torch.nn.Module):
    """embedding (ATen's runs index_select inside it: a nested call the planted bug must not
    count), index_select x2, gather on float and on int64; a loss linear in every output, so
    the backward ops' inputs do not depend on forward values."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)

    def forward(self, tok, sel, sel2, gidx, ints, w0, w1, wg):
        e = self.emb(tok)                       # embedding              fwd; embedding_dense_backward bwd
        s0 = torch.index_select(e, 0, sel)      # index_select call 0;   index_add bwd
        s1 = torch.index_select(e, 1, sel2)     # index_select call 1
        g = torch.gather(s0, 1, gidx)           # gather call 0;         scatter_add bwd
        gi = torch.gather(ints, 1, gidx)        # gather call 1 (int64)
        return (s0 * w0).sum() + (s1 * w1).sum() + (g * wg).sum(), gi


def run(seed, device, ctx=contextlib.nullcontext):
    """One forward + backward of Net under ``ctx()`` (entered inside the recorder)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = Net().to(device)
    tok = torch.randint(0, 20, (10,), generator=g)
    sel = torch.randint(0, 10, (6,), generator=g)
    sel2 = torch.randint(0, 8, (5,), generator=g)
    gidx = torch.randint(0, 8, (6, 3), generator=g)
    ints = torch.randint(-1000, 1000, (6, 8), generator=g)
    w0, w1, wg = torch.randn(6, 8, generator=g), torch.randn(10, 5, generator=g), torch.randn(6, 3, generator=g)
    args = [t.to(device) for t in (tok, sel, sel2, gidx, ints, w0, w1, wg)]
    rec = Record()
    with rec, ctx():
        loss, gi = net(*args)
        loss.backward()
    return rec


def diff_positions(a: torch.Tensor, b: torch.Tensor):
    """Linear (C-order) positions where a and b differ bitwise."""
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype.is_floating_point:
        a, b = a.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]), \
            b.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[b.element_size()])
    return (a.reshape(-1) != b.reshape(-1)).nonzero().reshape(-1).tolist()


def check_planted(clean: Record, bad: Record, op, phase, call, bug):
    """Only (op, phase, call)'s output differs, in exactly its middle element; every call
    before it in execution order is unchanged; the other calls of op are unchanged."""
    target = (op, phase, call)
    assert target in clean.calls, f"{target} never ran (ran: {sorted(k for k in clean.calls if k[0] == op)})"
    assert clean.order == bad.order, "the planted run ran other ops"
    assert bug.hits == 1 and len(bug.changed) == 1, bug
    ins_c, outs_c = clean.calls[target]
    ins_b, outs_b = bad.calls[target]
    assert all(diff_positions(x.cpu(), y.cpu()) == [] for x, y in zip(ins_c, ins_b)), "inputs differ"
    pos = diff_positions(outs_c[0].cpu(), outs_b[0].cpu())
    mid = outs_c[0].numel() // 2
    assert pos == [mid], f"{target}: output differs at {pos}, expected exactly [{mid}]"
    assert bug.changed[0][:3] == (phase, call, mid), bug.changed
    assert all(diff_positions(x.cpu(), y.cpu()) == [] for x, y in zip(outs_c[1:], outs_b[1:]))
    first = clean.order.index(target)
    for key in clean.order[:first]:
        for x, y in zip(clean.calls[key][1], bad.calls[key][1]):
            assert diff_positions(x.cpu(), y.cpu()) == [], f"{key} (before the planted call) differs"
    for key in clean.calls:
        if key[0] == op and key != target:
            for x, y in zip(clean.calls[key][1], bad.calls[key][1]):
                assert diff_positions(x.cpu(), y.cpu()) == [], f"{key} (another call of {op}) differs"


device = pytest.fixture(params=DEVICES, name="device")(deterministic_device)


CASES = [("aten::index_select", "forward", 0), ("aten::index_select", "forward", 1),
         ("aten::gather", "forward", 0), ("aten::gather", "forward", 1),  # call 1: int64, +1
         ("aten::embedding", "forward", 0), ("aten::embedding_dense_backward", "backward", 0),
         ("aten::scatter_add", "backward", 0), ("aten::index_add", "backward", 1),
         ("aten::mul", "forward", 1), ("aten::mul", "backward", 0)]  # mul runs in both phases


@pytest.mark.parametrize("key", ["BackendSelect", "backend"])
@pytest.mark.parametrize("op,phase,call", CASES)
def test_one_element_of_one_call_changes(op, phase, call, key, seed, device):
    clean = run(seed, device)
    with planted_bug(op, phase, call, key=key) as bug:
        bad = run(seed, device)
    check_planted(clean, bad, op, phase, call, bug)
    if op == "aten::index_select":
        assert bug.nested >= 1, "ATen's embedding ran index_select inside it: not counted"
    again = run(seed, device)  # the registrations are gone
    for k in clean.order:
        for x, y in zip(clean.calls[k][1], again.calls[k][1]):
            assert diff_positions(x.cpu(), y.cpu()) == [], f"{k} differs after planted_bug exited"


ROUTED = [("aten::index_select", "forward", 1), ("aten::gather", "forward", 0), ("aten::gather", "forward", 1),
          ("aten::embedding", "forward", 0), ("aten::embedding_dense_backward", "backward", 0),
          ("aten::scatter_add", "backward", 0), ("aten::index_add", "backward", 0)]


@pytest.mark.parametrize("order", ["use outside", "use inside"])
@pytest.mark.parametrize("key", ["BackendSelect", "backend"])
@pytest.mark.parametrize("op,phase,call", ROUTED)
def test_routed_through_stridewise(op, phase, call, key, order, sw, seed, device):
    """stridewise.use() routes every op it supports; the planted bug sits on top of the routed
    kernel. key='backend' needs use() outside planted_bug (a use() inside shadows it)."""
    clean = run(seed, device, sw.use)
    sw.reset_stats()
    if order == "use outside":
        with sw.use(), planted_bug(op, phase, call, key=key) as bug:
            bad = run(seed, device)
    elif key == "BackendSelect":
        with planted_bug(op, phase, call, key=key) as bug:
            bad = run(seed, device, sw.use)
    else:
        with pytest.raises(PlantedBugMissed, match="registers its kernels over the planted one"):
            with planted_bug(op, phase, call, key=key) as bug:
                bad = run(seed, device, sw.use)
        assert bug.hits == 0
        return
    short = op.split("::")[1]
    assert sw.stats()[short]["calls"] > 0, sw.stats()[short]  # stridewise ran the op
    check_planted(clean, bad, op, phase, call, bug)


def test_errors(seed):
    with pytest.raises(PlantedBugMissed, match="only 0 backward call"):
        with planted_bug("aten::gather", "backward"):
            run(seed, "cpu")  # gather runs forward only
    with pytest.raises(PlantedBugMissed, match="only 2 forward call"):
        with planted_bug("aten::index_select", "forward", call=2):
            run(seed, "cpu")
    with planted_bug("aten::gather", "backward", require_hit=False) as bug:
        run(seed, "cpu")
    assert bug.hits == 0 and bug.seen == 0
    with pytest.raises(ValueError, match="phase"):
        with planted_bug("aten::gather", "sideways"):
            pass
    with pytest.raises(ValueError, match="factory function"):
        with planted_bug("aten::empty"):
            pass
    with pytest.raises(ValueError, match="CompositeImplicitAutograd"):
        with planted_bug("aten::embedding_backward"):
            pass
    clean = run(seed, "cpu")
    with pytest.raises(KeyError):  # the registration is removed when the body raises
        with planted_bug("aten::gather", "forward"):
            raise KeyError("x")
    after = run(seed, "cpu")
    assert all(diff_positions(x, y) == [] for k in clean.order for x, y in zip(clean.calls[k][1], after.calls[k][1]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
                                   torch.int8, torch.uint8, torch.bool, torch.complex64])
def test_changed_element_by_dtype(dtype):
    """Middle element in C order (also of a transposed output), changed by more than every
    built-in tolerance (5e-3 relative: bfloat16's) for floats, by 1 for integers."""
    from compare_planted_backend import changed_element

    x = torch.arange(12).reshape(3, 4).to(dtype)
    t = x.clone().t()  # strides (1, 4): middle element in C order of the (4, 3) view
    ref = t.contiguous().reshape(-1).clone()
    where, old, new = changed_element(t, 1e-2)
    flat = t.contiguous().reshape(-1)
    assert where == 6 and (flat != ref).nonzero().reshape(-1).tolist() == [6]
    if dtype.is_floating_point:
        a, b = float(old), float(new)
        assert abs(b - a) > 5e-3 * max(1.0, abs(a))
    elif dtype == torch.bool:
        assert new == (not old)
    elif not dtype.is_complex:
        assert int(new) == int(old) + 1


@pytest.mark.parametrize("key", ["BackendSelect", "backend"])
@pytest.mark.parametrize("number,dtype", [(3, torch.float32), (0.5, torch.float16), (2, torch.int32),
                                          (0.5, torch.int64), (True, torch.bool), (2j, torch.float32)])
def test_a_wrapped_number_reaches_the_op(key, number, dtype):
    """C++'s ``tensor * 3`` hands mul.Tensor a wrapped number, which reaches a Python kernel as
    a Python number (on the H200 ATen's deterministic index_add does that on CUDA, and every
    planted aten::mul failed). Python's ``*`` does the same on the CPU: the planted call must
    return native's result, dtype included, with the one element changed."""
    from compare_planted_backend import planted_bug

    x = (torch.arange(12).reshape(3, 4) % 5).to(dtype)
    want = x * number
    with planted_bug("aten::mul", "forward", 0, key=key) as bug:
        got = x * number
    assert bug.hits == 1 and got.dtype == want.dtype, (bug.changed, got.dtype, want.dtype)
    differ = (got != want).reshape(-1).nonzero().reshape(-1).tolist()
    assert differ == [6], differ


@pytest.mark.parametrize("op,phase", [("aten::index_select", "forward"), ("aten::embedding_dense_backward", "backward"),
                                      ("aten::gather", "forward")])
def test_dump_records_it_and_sw_compare_names_it(op, phase, tmp_path, seed, exe, sw):
    """The dump (a TorchDispatchMode above the planted kernel) records the changed output, and
    sw-compare names the planted op as the first divergent one, its inputs equal."""
    import stridewise.dump as swdump
    from stridewise.dump import compare

    routed = op == "aten::gather"

    def dumped(root):
        with (sw.use() if routed else contextlib.nullcontext()):
            with swdump.dump(root):
                g = torch.Generator().manual_seed(seed)
                torch.manual_seed(seed)
                net = Net()
                args = [torch.randint(0, 20, (10,), generator=g), torch.randint(0, 10, (6,), generator=g),
                        torch.randint(0, 8, (5,), generator=g), torch.randint(0, 8, (6, 3), generator=g),
                        torch.randint(-1000, 1000, (6, 8), generator=g), torch.randn(6, 8, generator=g),
                        torch.randn(10, 5, generator=g), torch.randn(6, 3, generator=g)]
                net(*args)[0].backward()

    dumped(tmp_path / "a")
    with planted_bug(op, phase, 0) as bug:
        dumped(tmp_path / "b")
    assert bug.hits == 1
    r = compare(tmp_path / "a", tmp_path / "b")
    assert r.returncode == 1, r.failing()[:3]
    first = r.first_divergent
    assert (first["op"], first["phase"], first["call"]) == (op, phase, 0), first
    assert first["inputs_diverged"] is False
