"""Coverage (python/stridewise/audit/coverage.py): which ops and variants the backend under audit
really runs. An op the backend does not register runs natively (ATen): its passing cases get the
status "native", never the backend's "pass"; the report says who ran each variant.

- the planted backend restricted to gather: gather is the backend's, scatter_add native
  (JSON, counts, text report); take_along_dim (CompositeImplicitAutograd) is the backend's
  through gather, and its failures stay failures
- --backend stridewise (when the native library is built): the scatter family, gather and
  index_fill are its; an op its enable() excludes (index_fill) is native
- without --backend nothing changes; the dispatcher snapshot and diff on their own

Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest
import torch

from conftest import PYDIR, ROOT  # noqa: E402  (the installed package or python/)
PLANTED = ROOT / "tests" / "planted_backend"
# conftest.py stands a namespace package in for stridewise when its native library does not
# load: the auditor needs only torch

from stridewise import schemas  # noqa: E402
from stridewise.audit import cli, coverage  # noqa: E402

SEED = int(os.environ.get("STRIDEWISE_SEED") or random.SystemRandom().randrange(1, 10**6)) % 10**6
FAILING = ("wrong", "crash", "bad-error", "error")


def audit(tmp_path, capsys, *args):
    """Run the CLI in-process (text report on stdout); returns (exit status, JSON, text)."""
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    capsys.readouterr()
    rc = cli.main([*map(str, args), "--json", str(out / "r.json"), "--no-repros", "--no-progress",
                   "--seed", str(SEED), "--jobs", "2"])
    text = capsys.readouterr().out
    assert (out / "r.json").exists(), (f"STRIDEWISE_SEED={SEED}: exit status {rc}, no report", text)
    rep = json.loads((out / "r.json").read_text())
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out / "r.json"))  # the shipped JSON Schema
    return rc, rep, text


def ctx(rep) -> str:
    return (f"STRIDEWISE_SEED={SEED} summary={rep['summary']} coverage={rep.get('coverage')} "
            f"failures={[(f['id'], f['status'], f['reason']) for f in rep['failures']][:6]}")


def header(text: str) -> list:
    """The counts table's header (its column names)."""
    return next(x for x in text.splitlines() if x.startswith("op ") and " cases " in x).split()


def section(text: str, title: str) -> list:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


def test_a_backend_of_gather_alone_does_not_pass_scatter_add(tmp_path, capsys):
    rc, rep, text = audit(tmp_path, capsys, "--ops", "gather,scatter_add", "--matrix", "quick",
                          "--ranks", "1,3", "--backend", f"{PLANTED}:enable(none, gather)")
    assert rc == 0 and rep["summary"]["failed"] == 0, ctx(rep)
    cov = rep["coverage"]
    assert cov["gather"] == {"func": {"ran_by": "backend", "overloads": ["aten::gather"]},
                             "out": {"ran_by": "backend", "overloads": ["aten::gather.out"]}}, ctx(rep)
    assert {v: e["ran_by"] for v, e in cov["scatter_add"].items()} == \
        {"func": "native", "inplace": "native", "out": "native"}, ctx(rep)
    assert cov["scatter_add"]["inplace"]["overloads"] == ["aten::scatter_add_"], ctx(rep)
    g, s = rep["ops"]["gather"]["counts"], rep["ops"]["scatter_add"]["counts"]
    assert g["native"] == 0 and g["pass"] > 100, ctx(rep)
    assert s["pass"] == 0 and s["native"] > 100 and s["native"] + s["skip"] == s["cases"], ctx(rep)
    assert rep["summary"]["native"] == s["native"], ctx(rep)
    st = dict(map(tuple, rep["cases"]))
    assert {x for c, x in st.items() if c.startswith("scatter_add/")} <= {"native", "skip"}, ctx(rep)
    assert "native" not in {x for c, x in st.items() if c.startswith("gather/")}, ctx(rep)
    assert not rep["failures"], ctx(rep)  # "native" is not a failure, nor listed as one
    # the text report: a "native" column, the Coverage section right after the counts table
    lines = text.splitlines()
    assert header(text)[:4] == ["op", "cases", "pass", "native"], text
    sec = section(text, "Coverage")
    assert lines.index(sec[0]) < lines.index(next(x for x in lines if x.startswith("op x layout"))), text
    row = {x.split()[0]: x for x in sec[1:-1]}
    assert "func: backend (aten::gather)" in row["gather"] and "out: backend (aten::gather.out)" \
        in row["gather"], sec
    assert "func: native (aten::scatter_add)" in row["scatter_add"] and \
        "inplace: native (aten::scatter_add_)" in row["scatter_add"], sec
    # by default the native variants' cases are not run at all (reason not-run)
    assert sec[-1].strip() == (f"the backend runs 2 of 5 op variants; {s['native']} case(s) of the "
                               "others were not run (native ATen would run them; --run-native runs "
                               "them)"), sec
    nr = [f for f in rep["cases"] if f[0].startswith("scatter_add/")]
    assert nr and all(st == "native" for _, st in nr), ctx(rep)
    t = rep["timing"]["case_worker"]
    assert not any(c.startswith("scatter_add/") for c in t), ctx(rep)  # never handed to a worker
    assert f"; {s['native']} case(s) of variants the backend does not register not run" in lines[-1], \
        lines[-1]
    # --run-native runs them: they pass natively and still are not the backend's passes
    rc, rep, text = audit(tmp_path, capsys, "--ops", "gather,scatter_add", "--matrix", "quick",
                          "--ranks", "1,3", "--run-native", "--backend", f"{PLANTED}:enable(none, gather)")
    s = rep["ops"]["scatter_add"]["counts"]
    assert rc == 0 and s["pass"] == 0 and s["native"] > 100, ctx(rep)
    assert any(c.startswith("scatter_add/") for c in rep["timing"]["case_worker"]), ctx(rep)
    assert section(text, "Coverage")[-1].strip() == (
        f"the backend runs 2 of 5 op variants; {s['native']} passing case(s) ran natively and are "
        "not counted as its passes"), text
    assert f"; {s['native']} passing case(s) ran natively, not the backend's" in text.splitlines()[-1]


def test_a_composite_op_is_the_backends_through_what_it_decomposes_into(tmp_path, capsys):
    """take_along_dim is CompositeImplicitAutograd (-> gather): with gather planted it counts as
    the backend's, and the faulty gather (flat index reader) fails it: its failures stay
    failures, marked composite. With only scatter_add planted, it is native."""
    args = ("--ops", "take_along_dim", "--matrix", "quick", "--ranks", "3", "--variants", "func")
    rc, rep, text = audit(tmp_path, capsys, *args, "--backend", f"{PLANTED}:enable(flat_index, gather)")
    assert rc == 1, ctx(rep)
    e = rep["coverage"]["take_along_dim"]["func"]
    assert e == {"ran_by": "composite", "overloads": ["aten::take_along_dim"],
                 "via": ["aten::gather"]}, ctx(rep)
    fails = [f for f in rep["failures"] if f["status"] in FAILING]
    assert fails and all(f["ran_by"] == "composite" for f in fails), ctx(rep)
    c = rep["ops"]["take_along_dim"]["counts"]
    assert c["native"] == 0 and c["pass"] > 0, ctx(rep)
    assert "func: composite (aten::take_along_dim -> aten::gather)" in text, text
    rc, rep, text = audit(tmp_path, capsys, *args, "--backend", f"{PLANTED}:enable(flat_index, scatter_add)")
    assert rc == 0 and rep["coverage"]["take_along_dim"]["func"]["ran_by"] == "native", ctx(rep)
    c = rep["ops"]["take_along_dim"]["counts"]
    assert c["pass"] == 0 and c["native"] > 0, ctx(rep)
    assert "the backend runs 0 of 1 op variants" in text, text


def _stridewise_built() -> bool:
    code = "import stridewise; stridewise.supported_ops()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(PYDIR)))
    return r.returncode == 0


def test_stridewise_runs_the_scatter_family_and_gather_not_an_excluded_op(tmp_path, capsys):
    """stridewise routes every spec'd op; with index_fill excluded from its enable() (the
    backend's own call arguments), index_fill's variants run natively and are counted so."""
    if not _stridewise_built():
        pytest.skip("the stridewise native library is not built")
    ops = ("gather", "scatter.src", "scatter.value_reduce", "scatter_add", "scatter_reduce",
           "index_fill")
    rc, rep, text = audit(tmp_path, capsys, "--ops", ",".join(ops), "--matrix", "quick", "--ranks", "1",
                          "--dtypes", "float32,int64", "--backend", "stridewise:enable(None, [index_fill])")
    cov = rep["coverage"]
    for op in ops[:-1]:
        assert {e["ran_by"] for e in cov[op].values()} == {"backend"}, (op, ctx(rep))
        assert rep["ops"][op]["counts"]["native"] == 0, (op, ctx(rep))
    assert cov["scatter_reduce"]["out"]["overloads"] == ["aten::scatter_reduce.two_out"], ctx(rep)
    assert {e["ran_by"] for e in cov["index_fill"].values()} == {"native"}, ctx(rep)
    c = rep["ops"]["index_fill"]["counts"]
    assert c["pass"] == 0 and c["native"] > 0, ctx(rep)
    assert "the backend runs 14 of 20 op variants" in text, text  # index_fill{,.Tensor}: 6


def test_stridewise_runs_index_fill(tmp_path, capsys):
    if not _stridewise_built():
        pytest.skip("the stridewise native library is not built")
    rc, rep, text = audit(tmp_path, capsys, "--ops", "index_fill,index_fill.Tensor", "--matrix", "quick",
                          "--ranks", "1", "--dtypes", "float32", "--backend", "stridewise")
    for op in ("index_fill", "index_fill.Tensor"):
        assert {e["ran_by"] for e in rep["coverage"][op].values()} == {"backend"}, (op, ctx(rep))
        assert rep["ops"][op]["counts"]["native"] == 0 and rep["ops"][op]["counts"]["pass"] > 0, ctx(rep)


def test_without_a_backend_nothing_changes(tmp_path, capsys):
    rc, rep, text = audit(tmp_path, capsys, "--ops", "take", "--matrix", "quick", "--ranks", "1")
    assert rc == 0 and rep["coverage"] == {} and rep["summary"]["native"] == 0, ctx(rep)
    assert rep["summary"]["pass"] > 0 and "\nCoverage (" not in text and "native" not in header(text)


def override_impl(lib, name, fn, key):
    """lib.impl over a kernel registered from Python, on every torch the suite claims: torch
    2.11's Library.impl refuses it unless asked (allow_override=False by default there; "This is
    not allowed since there's already a kernel registered from python overriding g's behavior
    ..."), 2.13's allows it by default. Passing allow_override=True asks for exactly what the
    test means on both."""
    import inspect

    kw = {"allow_override": True} if "allow_override" in inspect.signature(lib.impl).parameters else {}
    lib.impl(name, fn, key, **kw)


def test_snapshot_and_diff_follow_the_dispatcher():
    """A private namespace (never aten: the oracle runs in this process): g has a CPU kernel,
    c is CompositeImplicitAutograd over g, h has a CPU kernel. Overriding g's CPU kernel makes
    g the backend's, c composite through g, h native."""
    assert coverage.overloads("torch.ops.aten.scatter_.src(self, dim, idx, src) + "
                              "torch.ops.aten.gather.default(x, 0, i) + torch.ops.aten.gather.out(a)") \
        == ["aten::scatter_.src", "aten::gather", "aten::gather.out"]
    assert coverage.dispatch_keys("cpu") == ("CPU", "AutogradCPU")
    assert coverage.dispatch_keys("cuda:1") == ("CUDA", "AutogradCUDA")
    ns = f"swcov{SEED}"
    lib = torch.library.Library(ns, "DEF")
    lib2 = None
    try:
        for n in ("g", "c", "h"):
            lib.define(f"{n}(Tensor x) -> Tensor")
        lib.impl("g", lambda x: x + 1, "CPU")
        lib.impl("c", lambda x: getattr(torch.ops, ns).g(x) * 2, "CompositeImplicitAutograd")
        lib.impl("h", lambda x: x - 1, "CPU")
        qs = [f"{ns}::{n}" for n in ("g", "c", "h")]
        before = coverage.snapshot(qs, "cpu")
        assert [before[q]["composite"] for q in qs] == [False, True, False], before
        assert all(before[q]["kernel"] for q in qs), before
        into = coverage.trace(lambda: getattr(torch.ops, ns).c(torch.ones(2)))
        assert f"{ns}::g" in into and f"{ns}::c" not in into, into
        lib2 = torch.library.Library(ns, "IMPL")
        with warnings.catch_warnings():  # "Overriding a previously registered kernel"
            warnings.simplefilter("ignore")
            override_impl(lib2, "g", lambda x: x + 2, "CPU")
        assert getattr(torch.ops, ns).g(torch.zeros(1)).item() == 2.0, "the override did not take"
        after = coverage.snapshot(qs, "cpu")
        d = coverage.diff(before, after, {f"{ns}::c": into})
        assert [d[q]["ran_by"] for q in qs] == ["backend", "composite", "native"], d
        assert d[f"{ns}::c"]["covered"] == [f"{ns}::g"], d
        assert coverage.diff(before, coverage.snapshot(qs, "cpu"))[f"{ns}::c"] == \
            {"kernel": before[f"{ns}::c"]["kernel"], "ran_by": "composite"}  # not traced
    finally:
        for x in (lib2, lib):
            if x is not None and hasattr(x, "_destroy"):
                x._destroy()
    per = {"aten::a": {"ran_by": "native"}, "aten::b": {"ran_by": "backend"},
           "aten::c": {"ran_by": "composite", "covered": ["aten::b"]},
           "aten::d": {"ran_by": "composite", "covered": []}}
    cls = lambda e: coverage.classify(e, per)["ran_by"]  # noqa: E731
    assert cls("torch.ops.aten.a.default(x)") == "native"
    assert cls("torch.ops.aten.a.default(torch.ops.aten.b.default(x))") == "backend"
    assert cls("torch.ops.aten.c.default(x)") == "composite"
    assert cls("torch.ops.aten.d.default(x)") == "native"
    assert cls("torch.ops.aten.zz.default(x)") == cls("x + 1") == "unknown"


def test_the_worker_computes_coverage_once_and_cheaply():
    """The snapshot (and the composite trace) must not import torch._dynamo (a TorchDispatchMode
    would: a second per worker start) nor take long."""
    code = f"""
import sys, time, types
sys.path.insert(0, {str(PYDIR)!r})
try:
    import stridewise
except ImportError:
    m = types.ModuleType("stridewise"); m.__path__ = [{str(PYDIR / 'stridewise')!r}]
    sys.modules["stridewise"] = m
import torch
from stridewise.audit import worker
t = time.time()
state = worker._coverage_before(torch.device("cpu"))
cov = worker._coverage_after(state, torch.device("cpu"))
print(round(time.time() - t, 3), "torch._dynamo" in sys.modules)
assert state[1]["aten::take_along_dim"], state[1]
assert all(v["ran_by"] == "native" for v in cov["ops"]["gather"].values()), cov["ops"]["gather"]
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-1500:]
    took, dynamo = r.stdout.split()
    assert dynamo == "False" and float(took) < 1.0, r.stdout  # (10 ms here; dynamo: 1-4 s)


OVERRIDE = ROOT / "tests" / "override_backend"


def _python_override_refused() -> bool:
    """Does this torch's Library.impl refuse to replace a kernel registered from Python, when
    asked plainly (no allow_override)? Probed on a private op, not read off a version number."""
    ns = f"swovr{SEED}"
    lib = torch.library.Library(ns, "DEF")
    lib2 = torch.library.Library(ns, "IMPL")
    try:
        lib.define("p(Tensor x) -> Tensor")
        lib.impl("p", lambda x: x, "CPU")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                lib2.impl("p", lambda x: x + 1, "CPU")
            except RuntimeError as e:
                assert "already a kernel registered from python" in str(e), e
                return True
        return False
    finally:
        lib2._destroy()
        lib._destroy()


def test_a_backend_overriding_a_python_registered_kernel(tmp_path, capsys):
    """override_backend's enable() replaces a Python-registered aten::gather CPU kernel (put there
    by --import override_backend.base, before the dispatcher snapshot) with a plain
    Library.impl. Where torch allows that (2.13), coverage attributes gather to the backend and
    its cases pass as the backend's; where torch refuses (2.11), the audit stops (exit 2) with an
    error naming the backend, the overload, the dispatch key and torch's own reason, and writes
    no report (no case passes as native)."""
    args = ["--ops", "gather", "--variants", "func", "--matrix", "quick", "--ranks", "1,3",
            "--import", "override_backend.base", "--backend", f"{OVERRIDE}:enable"]
    if not _python_override_refused():
        rc, rep, text = audit(tmp_path, capsys, *args)
        assert rc == 0 and rep["summary"]["failed"] == 0, ctx(rep)
        assert rep["coverage"]["gather"] == {"func": {"ran_by": "backend", "overloads": ["aten::gather"]}}, \
            ctx(rep)
        c = rep["ops"]["gather"]["counts"]
        assert c["pass"] > 50 and c["native"] == 0, ctx(rep)
        assert "func: backend (aten::gather)" in text, text
        return
    capsys.readouterr()
    rc = cli.main([*args, "--json", str(tmp_path / "r.json"), "--no-repros", "--no-progress",
                   "--seed", str(SEED), "--jobs", "2"])
    err = capsys.readouterr().err
    first = err.splitlines()[0] if err else ""
    assert rc == 2 and not (tmp_path / "r.json").exists(), (rc, err[-2000:])
    for part in ("stridewise audit: error: worker set-up failed: BackendError: ",
                 f"--backend '{OVERRIDE}:enable': override_backend.enable() could not register its "
                 f"kernel: torch {torch.__version__} refuses to override aten::gather for the CPU "
                 "dispatch key, which already has a kernel registered from Python (the kernel there: "
                 "registered at ", "base.py",
                 "torch says: RuntimeError: This is not allowed since there's already a kernel "
                 "registered from python overriding gather's behavior for CPU dispatch key and aten "
                 "namespace.", "allow_override=False by default"):
        assert part in first, (part, first)
