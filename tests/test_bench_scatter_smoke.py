"""bench/bench_scatter.py (and bench_gather.py's FlagGems column) end to end on the CPU at tiny
sizes, in this process (one thread: a shared CI core's OpenMP waits cost ms per call here).

- Every case of the table (float32 and bfloat16) makes a row with finite times for ours, ATen,
  both deterministic modes and the copy; FlagGems is "-" with its reason (not tried on the CPU);
  the JSON draws (bench/plot_bench.py).
- A planted fault, one element of out off by 5% written after the routed call of ours, stops
  the run at the check, for every case, in the fast mode and (planted only there) in
  deterministic mode: every check is seen failing, each rule (float64, bitwise) on its cases.
- `--cases shared` / `--cases perelem` stand for the two groups.
- A stand-in flag_gems that registers a CPU scatter_add_ and gather is timed where its context
  changes the dispatcher's kernel, said "not registered" elsewhere, and a wrong result of its
  is marked "!" without stopping the run.
"""
from __future__ import annotations

import contextlib
import json
import math
import sys
import types

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import ROOT

SMOKE = ["--device", "cpu", "--shrink", "1024", "--quick", "--reps", "2", "--target-us", "50"]


@pytest.fixture
def bench(sw, tmp_path, monkeypatch):
    """(bench_scatter, fg_common), OUT at tmp_path, one thread, FlagGems' import forgotten."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import bench_scatter
    import fg_common

    monkeypatch.setenv("OUT", str(tmp_path))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    fg_common.reset()
    yield bench_scatter, fg_common
    fg_common.reset()
    torch.set_num_threads(threads)


def _rows(tmp_path, name="bench_scatter"):
    data = json.loads((tmp_path / f"{name}.json").read_text())
    assert not data.get("partial")  # bench_scatter's JSON says whether the run ended; bench_gather's has no key
    return data["rows"]


def _finite(*xs):
    return all(x is not None and math.isfinite(x) and x > 0 for x in xs)


def test_every_case_makes_a_row(bench, tmp_path):
    bs, _ = bench
    dtypes = ["float32", "bfloat16"]
    bs.main(SMOKE + ["--dtypes", ",".join(dtypes), "--cases", ",".join(bs.CASE_ORDER)])
    rows = _rows(tmp_path)
    assert [(r["case"], r["dtype"]) for r in rows] == [(c, d) for c in bs.CASE_ORDER for d in dtypes]
    for r in rows:
        name = f"{r['case']}/{r['dtype']}"
        assert _finite(r["ours_us"], r["aten_us"], r["copy_us"], r["ours_det_us"], r["aten_det_us"]), name
        assert abs(r["ratio"] - r["aten_us"] / r["ours_us"]) < 1e-9, name
        assert r["flaggems"] == {"ran": False, "why": "not tried on the CPU"}, name
        assert r["flaggems_us"] is None and r["ratio_fg"] is None, name
        assert r["det_errors"] == {} and r["bytes_per_call"] > 0, name
        # the call ran on stridewise (not handed to ATen's kernel), in deterministic mode too
        assert r["routed"] and r["ours_stats"]["calls"] == 1 and "fallback" not in r["ours_stats"], name
        assert r["ours_det_stats"]["deterministic"] == 1 and "fallback" not in r["ours_det_stats"], name
        exact = r["op"] == "scatter"
        assert (r["check"] == "bitwise equal to ATen's") if exact else r["check"].startswith("float64 rule"), name
        want_i = "int32" if r["case"].endswith("_i32") else "int64"
        assert r["index_dtype"] == want_i and (r["case"] in bs.CASE_GROUPS["shared"] or want_i in r["shapes"]), name
    md = (tmp_path / "bench_scatter.md").read_text()
    assert "| FlagGems us | FlagGems/ours |" in md
    for c in bs.CASE_ORDER:  # the two FlagGems cells of every row: "-"
        assert f"| {c} | float32 |" in md
    lines = [ln for ln in md.splitlines() if ln.startswith("| hist_4k | float32 |")]
    assert lines and lines[0].split(" | ")[6:8] == ["-", "-"], lines
    assert "- FlagGems not tried on the CPU: " in md
    pytest.importorskip("matplotlib")
    import plot_bench

    plot_bench.main([str(tmp_path / "bench_scatter.json"), "-o", str(tmp_path / "again.png")])
    assert (tmp_path / "bench_scatter.png").stat().st_size > 0 and (tmp_path / "again.png").stat().st_size > 0


class Plant(TorchDispatchMode):
    """After each in-place scatter call made inside it in the chosen mode (fast or
    deterministic), moves out's first element by 5% of max(|value|, 1)."""

    def __init__(self, det):
        super().__init__()
        self.det, self.hits = det, 0

    @classmethod
    def _should_skip_dynamo(cls):
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._schema.name
        if (name.startswith("aten::scatter") and name.endswith("_")
                and torch.are_deterministic_algorithms_enabled() == self.det):
            first = args[0][(0,) * args[0].dim()]
            first.add_(0.05 * max(abs(float(first)), 1.0))
            self.hits += 1
        return out


@pytest.mark.parametrize("det", [False, True], ids=["fast", "det"])
def test_planted_fault_stops_the_run(bench, tmp_path, monkeypatch, det):
    bs, _ = bench
    import stridewise

    real_use = stridewise.use
    plant = Plant(det)

    @contextlib.contextmanager
    def planted_use(*a, **k):
        with real_use(*a, **k) as now, plant:
            yield now

    monkeypatch.setattr(stridewise, "use", planted_use)
    for case in bs.CASE_ORDER:
        hits = plant.hits
        with pytest.raises(SystemExit) as e:
            bs.main(SMOKE + ["--dtypes", "float32", "--cases", case])
        msg = str(e.value)
        assert msg.startswith(f"{case}/float32: stridewise "), msg
        assert ("in deterministic mode" in msg) == det, msg
        rule = "differs from ATen's" if bs.OP_OF.get(case) == "scatter" else "float64 rule"
        assert rule in msg and plant.hits > hits, msg
        assert not (tmp_path / "bench_scatter.json").exists()  # stopped before any row


def test_not_ours_is_named(bench, tmp_path, monkeypatch):
    """A call stridewise hands to ATen's kernel is timed but marked: "routed" false (the picture
    leaves it out) and a note under the table."""
    bs, _ = bench
    import stridewise

    monkeypatch.setattr(stridewise, "stats", lambda: {"scatter_add": {"calls": 1, "cpu": 1, "fallback": 1}})
    bs.main(SMOKE + ["--dtypes", "float32", "--cases", "hist_16"])
    (r,) = _rows(tmp_path)
    assert not r["routed"] and r["not_ours"] == "stridewise handed the call to ATen's kernel (fallback)", r
    md = (tmp_path / "bench_scatter.md").read_text()
    assert "- ours is not stridewise's kernel (stridewise handed the call to ATen's kernel (fallback)): hist_16" in md


def test_case_groups(bench):
    bs, _ = bench
    seen = []
    drv = types.SimpleNamespace(
        MAKERS=bs.MAKERS, CASE_ORDER=bs.CASE_ORDER, CASE_GROUPS=bs.CASE_GROUPS, BYTES_NOTE="",
        bench_case=lambda args, sw, case, d, *rest: seen.append(case) or {"case": case, "dtype": d},
        table=lambda rows: "", summary_line=lambda *a: "")
    bs.main(["--device", "cpu", "--dtypes", "float32", "--cases", "perelem"], driver=drv)
    assert seen == bs.CASE_GROUPS["perelem"] and "hist_4k_mean" in seen and "moe_add" not in seen
    seen.clear()
    bs.main(["--device", "cpu", "--dtypes", "float32", "--cases", "shared,dim1_add,perm_copy"], driver=drv)
    assert seen == bs.CASE_GROUPS["shared"] + ["perm_copy"]
    assert set(bs.CASE_GROUPS["shared"]) | set(bs.CASE_GROUPS["perelem"]) == set(bs.CASE_ORDER)
    assert bs.CASE_ORDER[:10] == ["moe_add", "moe_amax", "moe_add_nc", "gnn_sum", "gnn_mean", "gnn_amax",
                                  "gnn_sorted", "dup_add", "dim1_add", "copy_rows"]


def _fake_flag_gems(wrong):
    """A flag_gems stand-in: use_gems() registers CPU kernels of aten::scatter_add_ (through
    scatter_reduce_ 'sum') and aten::gather (through stridewise's own op); `wrong` moves the
    first element of their results."""
    mod = types.ModuleType("flag_gems")
    mod.__version__ = "0-stand-in"
    mod.FULL_CONFIG_BY_FUNC = {"scatter_add_": [], "gather": []}

    def scatter_add_(self, dim, index, src):
        self.scatter_reduce_(dim, index, src, "sum")
        if wrong:
            self.view(-1)[0] += 1000.0
        return self

    def gather(self, dim, index, sparse_grad=False):
        out = torch.ops.stridewise.gather(self, dim, index)
        if wrong:
            out.view(-1)[0] += 1000.0
        return out

    class use_gems:
        def __init__(self, include=None, exclude=None):
            self.include = include or ["scatter_add_", "gather"]

        def __enter__(self):
            self.lib = torch.library.Library("aten", "IMPL")
            if "scatter_add_" in self.include:
                self.lib.impl("scatter_add_", scatter_add_, "CPU")
            if "gather" in self.include:
                self.lib.impl("gather", gather, "CPU")

        def __exit__(self, *exc):
            self.lib._destroy()

    mod.use_gems = use_gems
    return mod


@pytest.mark.parametrize("wrong", [False, True], ids=["right", "wrong"])
def test_flaggems_stand_in(bench, tmp_path, monkeypatch, wrong):
    bs, fgc = bench
    monkeypatch.setitem(sys.modules, "flag_gems", _fake_flag_gems(wrong))
    bs.main(SMOKE + ["--dtypes", "float32", "--flaggems", "on", "--cases", "hist_16,last_add_64_i32,last_amax_64"])
    rows = {r["case"]: r for r in _rows(tmp_path)}
    for case in ("hist_16", "last_add_64_i32"):
        r, fg = rows[case], rows[case]["flaggems"]
        assert fg["ran"] and fg["ok"] is not wrong and "aten::scatter_add_" in fg["why"], fg
        assert _finite(r["flaggems_us"]) and abs(r["ratio_fg"] - r["flaggems_us"] / r["ours_us"]) < 1e-9, r
        assert fg["check"].startswith("float64 rule"), fg
    fg = rows["last_amax_64"]["flaggems"]
    assert fg == {"ran": False, "why": "not registered for aten::scatter_reduce_.two"}, fg
    md = (tmp_path / "bench_scatter.md").read_text()
    assert ("- FlagGems differs from ATen (marked !): hist_16/float32" in md) == wrong
    cells = [ln.split(" | ")[6] for ln in md.splitlines() if ln.startswith("| hist_16 |")]
    assert cells and cells[0].endswith(" !") == wrong, cells

    fgc.reset()
    import bench_gather

    bench_gather.main(["--device", "cpu", "--shrink", "64", "--quick", "--reps", "2", "--no-sync-check",
                       "--dtypes", "float32", "--cases", "contig,scattered", "--flaggems", "on"])
    for r in _rows(tmp_path, "bench_gather"):
        fg = r["flaggems"]
        assert fg["ran"] and fg["ok"] is not wrong and "aten::gather" in fg["why"], fg
        assert _finite(r["flaggems_us"]) and abs(r["ratio_fg"] - r["flaggems_us"] / r["ours_us"]) < 1e-9, r
    md = (tmp_path / "bench_gather.md").read_text()
    assert "| FlagGems us | FlagGems/ours |" in md
    assert ("- FlagGems differs from ATen (marked !): contig/float32" in md) == wrong
