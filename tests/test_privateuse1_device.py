"""swdev, the out-of-tree PrivateUse1 test device (tests/privateuse1, docs/privateuse1_testdev.md).

The device renames PrivateUse1 for the whole process, so it never runs in the pytest process:
a worker subprocess (this file run as a script, ``--worker``) runs the ``check_*`` functions
below with fresh random data and reports each one. The checks: bitwise round trips over every
layout of stridewise.testing.layouts and several dtypes, storage bytes through
``untyped_storage()``, no CPU fallback, the indexing kernels equal to CPU with the bugs off,
each seeded bug found with it on, the SW_TESTDEV_BUGS switch, autograd through gather, a
second import. A second test proves torch's device autoload (``write_dist_info``): a fresh
interpreter and its forkserver child get swdev from a plain ``import torch``.

Without the library: skipped locally, FAILED under CI=true or STRIDEWISE_TEST_INSTALLED=1.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PKG_ROOT = HERE / "privateuse1"
MARK = "SWDEV-RESULTS "

# ---------------------------------------------------------------------------------------------
# Worker side: runs in a subprocess with sw_testdev imported (PYTHONPATH=tests/privateuse1).
# ---------------------------------------------------------------------------------------------

DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool",
          "complex64")
SHAPES = ((3, 4, 5), (6, 7), (9,))


def _ctx(seed, layouts_path):
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("_sw_layouts", layouts_path)
    layouts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layouts)
    gen = torch.Generator().manual_seed(seed)

    def make_fn(dtype):
        dt = getattr(torch, dtype)

        def make(shape):
            if dt == torch.bool:
                return torch.randint(0, 2, list(shape), generator=gen).bool()
            if dt.is_floating_point or dt.is_complex:
                return torch.randn(list(shape), generator=gen, dtype=dt)
            return torch.randint(-100 if dt != torch.uint8 else 0, 100, list(shape),
                                 generator=gen, dtype=dt)

        return make

    return torch, layouts, random.Random(seed), make_fn, gen


def _bits(t):
    """The values of ``t`` as bytes (bitwise comparison; NaN-safe)."""
    import torch

    c = t.detach().cpu().contiguous().reshape(-1)
    return c.view(torch.uint8) if c.dtype != torch.bool else c.to(torch.uint8)


def _storage_bytes(t):
    import torch

    n = t.untyped_storage().nbytes()
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage(), 0, (n,),
                                                                   (1,)).cpu()


def _to_dev_same_layout(t):
    """A swdev tensor with ``t``'s storage bytes, sizes, strides and storage offset."""
    import torch

    n = t.untyped_storage().nbytes()
    raw = torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage(), 0, (n,), (1,))
    dev = torch.empty(n, dtype=torch.uint8, device="swdev").copy_(raw)
    return dev.view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())


def _same(a, b, what):
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} != {tuple(b.shape)}"
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
    assert bool((_bits(a) == _bits(b)).all()), f"{what}: values differ"


def check_roundtrip_layouts(seed, layouts_path):
    torch, L, rng, make_fn, _ = _ctx(seed, layouts_path)
    kinds = list(L.LAYOUTS) + ["compound_writable", "deep_compound"]
    n = 0
    for dtype in DTYPES:
        for kind in kinds:
            for shape in SHAPES:
                v = L.make_layout_ex(kind, shape, make_fn(dtype), rng)
                what = f"{dtype} {kind} {L.describe(v)}"
                _same(v.to("swdev").cpu(), v, f"to/cpu {what}")
                d = _to_dev_same_layout(v)
                assert (d.shape, d.stride(), d.storage_offset()) == (
                    v.shape, v.stride(), v.storage_offset()), f"as_strided {what}"
                _same(d.cpu(), v, f"strided dev->cpu {what}")
                _same(d.clone(), v, f"clone {what}")
                _same(d.contiguous(), v, f"contiguous {what}")
                assert d.untyped_storage().nbytes() == v.untyped_storage().nbytes(), what
                assert torch.equal(_storage_bytes(d), _storage_bytes(v)), f"storage bytes {what}"
                if L.is_writable(v):  # cpu -> strided dev view, dev -> strided dev view
                    w = _to_dev_same_layout(v)
                    w.zero_()
                    w.copy_(v)
                    _same(w, v, f"cpu->dev strided copy {what}")
                    w.fill_(0)
                    w.copy_(d)
                    _same(w, v, f"dev->dev strided copy {what}")
                n += 1
    return f"{n} layout/dtype/shape cases"


def check_views_and_factories(seed, layouts_path):
    torch, L, rng, make_fn, gen = _ctx(seed, layouts_path)
    x = torch.randn(4, 5, 6, generator=gen)
    d = x.to("swdev")
    assert d.device == torch.device("swdev", 0) and d.is_swdev, d.device
    views = {
        "transpose": lambda t: t.transpose(0, 2), "permute": lambda t: t.permute(2, 0, 1),
        "expand": lambda t: t[:, :1].expand(4, 3, 6), "select": lambda t: t.select(1, 3),
        "slice": lambda t: t[:, 1::2, 2:], "unsqueeze": lambda t: t.unsqueeze(1),
        "view_dtype": lambda t: t.view(torch.int32), "reshape": lambda t: t.reshape(20, 6),
        "view": lambda t: t.view(-1), "new_zeros": lambda t: t.new_zeros(3, 2),
        "zeros_like": torch.zeros_like, "ones_like": torch.ones_like,
        "add": lambda t: t + t[0], "add_alpha": lambda t: torch.add(t, t, alpha=3),
        "mul": lambda t: t * t, "mul_scalar": lambda t: t * 2,
        "add_": lambda t: t.clone().add_(t), "mul_": lambda t: t.clone().mul_(t),
        "fill_": lambda t: t.clone().fill_(2.5), "zero_": lambda t: t.clone().zero_(),
    }
    for name, f in views.items():
        _same(f(d), f(x), name)
    assert d[1, 2, 3].item() == x[1, 2, 3].item()
    r = torch.empty(3, device="swdev")
    r.resize_(4, 10)
    assert r.shape == (4, 10) and r.untyped_storage().nbytes() >= 160
    s = d.clone().untyped_storage()
    s.resize_(10000)
    assert s.nbytes() == 10000
    u = torch.empty(0, dtype=torch.uint8, device="swdev").set_(d.untyped_storage(), 0,
                                                                (d.numel() * 4,), (1,))
    assert torch.equal(u.cpu(), x.reshape(-1).view(torch.uint8))
    assert torch.swdev.get_device_name() == "stridewise test device (host memory)"
    assert torch.swdev.device_count() == 1 and torch.swdev.current_device() == 0
    torch.manual_seed(seed)  # reaches the device module's manual_seed_all
    try:
        torch.empty(2, device="swdev:1")
        raise AssertionError("swdev:1 accepted")
    except RuntimeError as e:
        assert "one device" in str(e), e
    return "views, factories, resize_, set_, item"


def check_no_cpu_fallback(seed, layouts_path):
    import torch

    d = torch.zeros(4, 3, device="swdev")
    for name, call in (
            ("index_add", lambda: d.index_add_(0, torch.tensor([1]).to("swdev"),
                                               torch.ones(1, 3).to("swdev"))),
            ("cumsum", lambda: d.cumsum(0)),
            ("scatter_reduce", lambda: d.scatter_reduce(0, torch.zeros(1, 3, dtype=torch.long)
                                                        .to("swdev"), d[:1], "amax"))):
        try:
            call()
        except NotImplementedError as e:
            msg = str(e)
            assert f"aten::{name}" in msg and "'swdev' backend" in msg, msg[:300]
        else:
            raise AssertionError(f"{name} ran on swdev: a CPU fallback?")
    return "index_add, cumsum, scatter_reduce raise NotImplementedError"


# Indexing cases: (name, fn(self, index, src), written) where fn runs the op and returns the
# tensor to compare; `written` names the argument written in place (compared with its storage).
def _indexing_cases(torch):
    def out_of(op, args, like="self"):
        def run(s, i, src):
            shape = i.shape if like == "index" else s.shape
            out = torch.empty(shape, dtype=s.dtype, device=s.device)
            return op(*args(s, i, src), out=out)
        return run

    return [
        ("gather", lambda s, i, src: torch.gather(s, 1, i), None),
        ("gather.out", out_of(torch.gather, lambda s, i, src: (s, 1, i), like="index"), None),
        ("scatter_add", lambda s, i, src: torch.scatter_add(s, 1, i, src), None),
        ("scatter_add_", lambda s, i, src: s.scatter_add_(1, i, src), "self"),
        ("scatter_add.out", out_of(torch.scatter_add, lambda s, i, src: (s, 1, i, src)), None),
        ("scatter.src", lambda s, i, src: torch.scatter(s, 1, i, src), None),
        ("scatter_.src", lambda s, i, src: s.scatter_(1, i, src), "self"),
        ("scatter.value", lambda s, i, src: torch.scatter(s, 1, i, 7.5), None),
        ("scatter_.value", lambda s, i, src: s.scatter_(1, i, -2.0), "self"),
        ("scatter.src_out", out_of(torch.scatter, lambda s, i, src: (s, 1, i, src)), None),
        ("index_select", lambda s, i, src: torch.index_select(s, 1, i[0]), None),
        ("index_select.out", lambda s, i, src: torch.index_select(
            s, 1, i[0], out=torch.empty(0, dtype=s.dtype, device=s.device)), None),
    ]


def _indexing_inputs(torch, L, rng, gen, self_kind, index_kind, dtype):
    shape_self, shape_idx = (5, 8), (5, 6)
    make_self = lambda s: torch.randn(list(s), generator=gen).to(dtype)  # noqa: E731
    make_idx = lambda s: torch.randint(0, 8, list(s), generator=gen)  # noqa: E731
    s = L.make_layout_ex(self_kind, shape_self, make_self, rng)
    i = L.make_layout_ex(index_kind, shape_idx, make_idx, rng)
    src = L.make_layout_ex("transpose", shape_idx, make_self, rng)
    return s, i, src


def _run_case(torch, fn, written, s, i, src):
    """(result, storage bytes of the tensor written in place, or None)."""
    res = fn(s, i, src)
    return res, (_storage_bytes(s) if written == "self" else None)


def _compare_indexing(torch, L, rng, gen, self_kinds, index_kinds, dtypes):
    n = 0
    for dtype in dtypes:
        for sk in self_kinds:
            for ik in index_kinds:
                for name, fn, written in _indexing_cases(torch):
                    s, i, src = _indexing_inputs(torch, L, rng, gen, sk, ik, dtype)
                    if written and not L.is_writable(s):
                        continue
                    what = f"{name} {dtype} self={sk} {L.describe(s)} index={ik} {L.describe(i)}"
                    ds, di, dsrc = (_to_dev_same_layout(t) for t in (s, i, src))
                    ref, ref_store = _run_case(torch, fn, written, s, i, src)
                    got, got_store = _run_case(torch, fn, written, ds, di, dsrc)
                    _same(got, ref, what)
                    if written:
                        assert torch.equal(got_store, ref_store), f"storage after {what}"
                    n += 1
    return n


def check_indexing_equals_cpu_bugs_off(seed, layouts_path):
    torch, L, rng, make_fn, gen = _ctx(seed, layouts_path)
    os.environ["SW_TESTDEV_BUGS"] = "none"
    n = _compare_indexing(torch, L, rng, gen,
                          ["contiguous", "offset", "transpose", "step_slice", "compound_writable",
                           "expand"],
                          ["contiguous", "expand@0", "expand_all", "transpose", "step_slice",
                           "offset", "compound"],
                          [torch.float32, torch.float16])
    return f"{n} cases bitwise equal to CPU"


def check_indexing_errors_are_atens(seed, layouts_path):
    import torch

    os.environ["SW_TESTDEV_BUGS"] = "none"
    x = torch.randn(3, 4)
    bad = torch.tensor([[0, 9]])
    for name, f in (("gather", lambda s, i: torch.gather(s, 1, i)),
                    ("scatter_add", lambda s, i: s.clone().scatter_add_(1, i, s[:1, :2].clone())),
                    ("index_select", lambda s, i: torch.index_select(s, 1, i[0]))):
        msgs = []
        for dev in ("cpu", "swdev"):
            try:
                f(x.to(dev), bad.to(dev))
                msgs.append(None)
            except (RuntimeError, IndexError) as e:
                msgs.append(f"{type(e).__name__}: {e}")
        assert msgs[0] is not None and msgs[0] == msgs[1], f"{name}: cpu {msgs[0]!r} swdev {msgs[1]!r}"
    try:
        torch.gather(x.to("swdev"), 1, bad.clamp(max=3))
        raise AssertionError("gather with a CPU index on swdev accepted")
    except RuntimeError as e:
        assert "same device" in str(e), e
    return "out-of-range index: ATen's own message; mixed devices refused"


def check_bug_gather_expanded_index(seed, layouts_path):
    torch, L, rng, make_fn, gen = _ctx(seed, layouts_path)
    x = torch.randn(4, 16, 24, generator=gen)
    idx = torch.randint(0, 16, (4, 1, 1), generator=gen).expand(4, 1, 24)  # the seed's repro
    dx, di = x.to("swdev"), _to_dev_same_layout(idx)
    ref = torch.gather(x, 1, idx)
    os.environ["SW_TESTDEV_BUGS"] = "gather_index_contiguous"
    outcome = None
    for name, call in (("gather", lambda: torch.gather(dx, 1, di)),
                       ("gather.out", lambda: torch.gather(
                           dx, 1, di, out=torch.empty(di.shape, device="swdev")))):
        try:
            got = call()
            assert not torch.equal(got.cpu(), ref), f"{name}: expanded index gave right values"
            outcome = "wrong values"
        except RuntimeError as e:
            assert "out of bounds" in str(e), e
            outcome = f"error: {e}"
    # control: a contiguous index is right with the bug on
    ic = idx.contiguous()
    _same(torch.gather(dx, 1, ic.to("swdev")), torch.gather(x, 1, ic), "contiguous index, bug on")
    os.environ["SW_TESTDEV_BUGS"] = "none"
    _same(torch.gather(dx, 1, di), ref, "expanded index, bug off")
    return outcome


def check_bug_gather_transposed_index(seed, layouts_path):
    torch, L, rng, make_fn, gen = _ctx(seed, layouts_path)
    x = torch.randn(7, 9, generator=gen)
    idx = torch.randint(0, 9, (7, 7), generator=gen).t()
    dx, di = x.to("swdev"), _to_dev_same_layout(idx)
    ref = torch.gather(x, 1, idx)
    os.environ["SW_TESTDEV_BUGS"] = "all"
    got = torch.gather(dx, 1, di).cpu()
    assert not torch.equal(got, ref), "transposed index gave right values with the bug on"
    # exactly what reading the index as contiguous memory gives:
    assert torch.equal(got, torch.gather(x, 1, idx.t().contiguous().view(7, 7)))
    os.environ["SW_TESTDEV_BUGS"] = "scatter_add_offset"  # the other bug only
    _same(torch.gather(dx, 1, di), ref, "transposed index, gather bug off")
    return "wrong values, as if the index were contiguous"


def check_bug_scatter_add_offset(seed, layouts_path):
    torch, L, rng, make_fn, gen = _ctx(seed, layouts_path)
    base = torch.randn(40, generator=gen)
    view = base[8:32].view(4, 6)  # storage offset 8
    idx = torch.randint(0, 6, (4, 5), generator=gen)
    src = torch.randn(4, 5, generator=gen)
    ref = view.clone().scatter_add_(1, idx, src)
    dbase = base.to("swdev")
    dview, di, dsrc = dbase[8:32].view(4, 6), idx.to("swdev"), src.to("swdev")
    os.environ["SW_TESTDEV_BUGS"] = "scatter_add_offset"
    dview.scatter_add_(1, di, dsrc)
    after = dbase.cpu()
    assert not torch.equal(after[:8], base[:8]), "nothing written before the view"
    assert not torch.equal(after[8:32].view(4, 6), ref), "the view got the right values"
    # scatter_add.out into an offset view: the same
    dbase = base.to("swdev")
    out = dbase[8:32].view(4, 6)
    torch.scatter_add(view.to("swdev"), 1, di, dsrc, out=out)
    assert not torch.equal(dbase.cpu()[:8], base[:8]), "scatter_add.out: nothing written outside"
    # the functional scatter_add and an offset-0 target stay right with the bug on
    _same(torch.scatter_add(dview.new_zeros(4, 6).add_(view.to("swdev")), 1, di, dsrc), ref,
          "functional scatter_add, bug on")
    _same(view.to("swdev").scatter_add_(1, di, dsrc), ref, "offset-0 scatter_add_, bug on")
    os.environ["SW_TESTDEV_BUGS"] = "gather_index_contiguous"  # the other bug only
    dbase = base.to("swdev")
    dbase[8:32].view(4, 6).scatter_add_(1, di, dsrc)
    expect = base.clone()
    expect[8:32].view(4, 6).copy_(ref)
    _same(dbase, expect, "offset view, scatter_add bug off")
    return "writes outside the view"


def check_bug_switch(seed, layouts_path):
    import torch

    x = torch.randn(3, 4).to("swdev")
    i = torch.zeros(1, 1, dtype=torch.long).to("swdev").expand(3, 4)
    for value in ("", "none", "all", "scatter_add_offset,gather_index_contiguous"):
        os.environ["SW_TESTDEV_BUGS"] = value
        torch.gather(x, 1, i[:, :1].contiguous())
    os.environ["SW_TESTDEV_BUGS"] = "gather_index_contigous"  # a typo must not turn bugs off
    try:
        torch.gather(x, 1, i)
        raise AssertionError("unknown bug name accepted")
    except RuntimeError as e:
        assert "unknown bug" in str(e), e
    del os.environ["SW_TESTDEV_BUGS"]  # unset: both on
    try:
        bad = not torch.equal(torch.gather(x, 1, i).cpu(), torch.gather(x.cpu(), 1, i.cpu()))
    except RuntimeError:
        bad = True
    assert bad, "SW_TESTDEV_BUGS unset: the gather bug is off"
    return "unset/all/none/list; unknown names refused"


def check_autograd_gather(seed, layouts_path):
    torch, L, rng, make_fn, gen = _ctx(seed, layouts_path)
    os.environ["SW_TESTDEV_BUGS"] = "none"
    x = torch.randn(5, 7, generator=gen)
    idx = torch.randint(0, 7, (5, 1), generator=gen).expand(5, 4)
    g = torch.randn(5, 4, generator=gen)
    xc = x.clone().requires_grad_()
    torch.gather(xc, 1, idx).backward(g)
    xd = x.to("swdev").requires_grad_()
    y = torch.gather(xd, 1, _to_dev_same_layout(idx))
    (y * 1.0).backward(g.to("swdev"))
    _same(xd.grad, xc.grad, "gather backward")
    return "gather backward equals CPU"


def check_import_twice(seed, layouts_path):
    import importlib
    import importlib.util

    import sw_testdev
    import torch

    importlib.reload(sw_testdev)
    spec = importlib.util.spec_from_file_location("sw_testdev_again",
                                                  Path(sw_testdev.__file__))
    again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(again)
    assert torch.zeros(2, device="swdev").device.type == "swdev"
    return "reload and a second copy: no error"


AUTOLOAD_CHILD = r"""
import multiprocessing as mp, sys
import torch
assert "sw_testdev" in sys.modules, "torch's autoload did not import sw_testdev"
t = torch.arange(5, dtype=torch.float16).to("swdev")
assert t.device.type == "swdev" and t.cpu().tolist() == [0, 1, 2, 3, 4]
probe = ("(__import__('torch')._C._get_privateuse1_backend_name(), "
         "__import__('torch').ones(3, device='swdev').cpu().tolist(), "
         "'sw_testdev' in __import__('sys').modules)")
with mp.get_context("forkserver").Pool(1) as pool:
    got = pool.apply(eval, (probe,))
assert got == ("swdev", [1.0, 1.0, 1.0], True), got
print("AUTOLOAD-OK", torch.swdev.get_device_name())
"""


CHECKS = {name[len("check_"):]: fn for name, fn in dict(globals()).items()
          if name.startswith("check_")}


def _worker(seed: int, layouts_path: str, names: list[str]) -> None:
    import time
    import traceback

    import sw_testdev  # noqa: F401  (registers swdev)

    results = {}
    for name in names:
        t0 = time.perf_counter()
        os.environ.pop("SW_TESTDEV_BUGS", None)
        try:
            results[name] = {"ok": True, "detail": str(CHECKS[name](seed, layouts_path))}
        except BaseException as e:  # noqa: BLE001
            results[name] = {"ok": False, "detail": "".join(traceback.format_exception(e))[-3000:]}
        results[name]["seconds"] = round(time.perf_counter() - t0, 2)
    print(MARK + json.dumps(results), flush=True)


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--worker":
    _worker(int(sys.argv[2]), sys.argv[3], sys.argv[4].split(","))
    sys.exit(0)

# ---------------------------------------------------------------------------------------------
# pytest side. One worker process for the checks above, one autoload child (which starts a
# forkserver child): under pytest-xdist the two tests can run on both cores.
# ---------------------------------------------------------------------------------------------

from conftest import BASE_SEED, PYDIR, SWDEV_LIB, require_swdev  # noqa: E402
from stridewise.audit.specs import gather_layouts as specs  # noqa: E402


def run_checks(names) -> None:
    """Runs the named checks in a fresh worker process; fails with every failed check."""
    require_swdev()
    seed = specs.case_seed(BASE_SEED, "test_privateuse1_device")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PKG_ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["SW_TESTDEV_LIB"] = str(SWDEV_LIB)
    env.pop("SW_TESTDEV_BUGS", None)
    layouts = PYDIR / "stridewise" / "testing" / "layouts.py"
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(seed),
                        str(layouts), ",".join(names)], env=env, capture_output=True, text=True,
                       timeout=300, cwd=str(PKG_ROOT))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(MARK)]
    assert p.returncode == 0 and lines, (
        f"swdev worker failed (exit {p.returncode}, STRIDEWISE_SEED={BASE_SEED}):\n"
        f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    results = json.loads(lines[-1][len(MARK):])
    failed = {k: r["detail"] for k, r in results.items() if not r["ok"]}
    report = "\n".join(f"--- check {k} FAILED:\n{d}" for k, d in failed.items())
    assert not failed, (f"swdev checks failed: {sorted(failed)} (STRIDEWISE_SEED={BASE_SEED})"
                        f"\n{report}")
    assert sorted(results) == sorted(names), results


def test_swdev_device_checks():
    """Round trips, storage bytes, no CPU fallback, indexing vs CPU (bugs off), each seeded bug
    (bug on), the SW_TESTDEV_BUGS switch, gather backward, importing twice."""
    run_checks(list(CHECKS))


def test_swdev_autoload_plain_import_torch(tmp_path):
    """write_dist_info, from this process through the torch-free sw_testdev_autoload (the way
    the auditor's tests use it): a fresh interpreter and its forkserver child get swdev from
    ``import torch`` alone; this process stays untouched."""
    import importlib.util

    require_swdev()
    spec = importlib.util.spec_from_file_location("_sw_testdev_autoload",
                                                  PKG_ROOT / "sw_testdev_autoload.py")
    autoload = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(autoload)
    env = autoload.autoload_env(tmp_path / "dist", {**os.environ, "SW_TESTDEV_LIB": str(SWDEV_LIB)})
    assert (tmp_path / "dist" / "sw_testdev-0.1.dist-info" / "entry_points.txt").is_file()
    p = subprocess.run([sys.executable, "-c", AUTOLOAD_CHILD], env=env, capture_output=True,
                       text=True, timeout=120, cwd=str(tmp_path))
    assert p.returncode == 0 and "AUTOLOAD-OK" in p.stdout, (p.returncode, p.stdout,
                                                             p.stderr[-3000:])
    assert "sw_testdev" not in sys.modules


def test_pytest_process_untouched():
    """The device lives in subprocesses only: this process keeps PrivateUse1 unnamed."""
    import torch

    assert "sw_testdev" not in sys.modules
    assert torch._C._get_privateuse1_backend_name() == "privateuseone"
