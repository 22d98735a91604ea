"""bench/bench_index.py's index_fill cases end to end on the CPU at tiny sizes (the driver is
bench_scatter.py's, whose own smoke test covers its method): every fill case makes a routed row
(no fallback) checked bitwise against ATen, its bytes are the sectors it writes (counted here
independently, from the index), and a planted fault in our result stops the run at the check.
bench_index configures bench_scatter's module tables; the fixture restores them.
"""
from __future__ import annotations

import json
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import ROOT

SMOKE = ["--device", "cpu", "--shrink", "64", "--quick", "--reps", "2", "--target-us", "50"]
FILLS = ["fill_cols", "fill_cols_64", "fill_cols_t", "fill_rows", "fill_rows_t"]


@pytest.fixture
def bi(sw, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import bench_index
    import bench_scatter as bs
    import fg_common

    saved = {k: getattr(bs, k) for k in ("MAKERS", "OP_OF", "BYTES_OF")}
    saved = {k: dict(v) for k, v in saved.items()}
    order, exact, note = list(bs.CASE_ORDER), bs.EXACT_OPS, bs.BYTES_NOTE
    monkeypatch.setenv("OUT", str(tmp_path))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    fg_common.reset()
    yield bench_index
    for k, v in saved.items():
        getattr(bs, k).clear()
        getattr(bs, k).update(v)
    bs.CASE_ORDER[:] = order
    bs.EXACT_OPS, bs.BYTES_NOTE = exact, note
    torch.set_num_threads(threads)


def sectors_written(shape, strides, dim, idx, es):
    """The 32-byte sectors an index_fill along dim writes, by direct enumeration."""
    rows, cols = shape
    out = set()
    for r in range(rows):
        for c in range(cols):
            if (c if dim == 1 else r) in idx:
                out.add((r * strides[0] + c * strides[1]) * es // 32)
    return len(out)


def test_every_fill_case_makes_a_routed_bitwise_row(bi, tmp_path):
    bi.main(SMOKE + ["--dtypes", "float32,bfloat16", "--cases", ",".join(FILLS)])
    data = json.loads((tmp_path / "bench_index.json").read_text())
    rows = data["rows"]
    assert [(r["case"], r["dtype"]) for r in rows] == [(c, d) for c in FILLS for d in ("float32", "bfloat16")]
    for r in rows:
        gen = torch.Generator().manual_seed(4321)  # the bench's first set, made again
        name = f"{r['case']}/{r['dtype']}"
        assert r["routed"] and r["ours_stats"]["calls"] == 1 and "fallback" not in r["ours_stats"], name
        assert r["check"] == "bitwise equal to ATen's", name
        assert all(x and math.isfinite(x) for x in (r["ours_us"], r["aten_us"], r["copy_us"])), name
        dim, m, transposed = bi.FILLS[r["case"]]
        dtype = getattr(torch, r["dtype"])
        self_, idx, *_ = bi.fill(dim, m, transposed)(dtype, torch.device("cpu"), gen, 64)
        want = 32 * sectors_written(list(self_.shape), self_.stride(), dim, set(idx.tolist()),
                                    self_.element_size()) + idx.numel() * 8
        assert r["bytes_per_call"] == want, (name, r["bytes_per_call"], want)


class Plant(TorchDispatchMode):
    """After each index_fill_ made inside it, one more element of self set to the fill value's
    neighbour: a wrong write the bench's check must stop at."""

    @classmethod
    def _should_skip_dynamo(cls):
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func._schema.name == "aten::index_fill_":
            args[0].view(-1)[0].add_(1) if args[0].is_contiguous() else args[0][0, 0].add_(1)
        return out


def test_a_wrong_fill_stops_the_run(bi, sw, monkeypatch):
    import bench_scatter as bs

    real = bs._ours_result

    def planted(sw_, op, fn, out0, i0, s0, device):
        with Plant():
            return real(sw_, op, fn, out0, i0, s0, device)
    monkeypatch.setattr(bs, "_ours_result", planted)
    with pytest.raises(SystemExit, match="stridewise differs from ATen's"):
        bi.main(SMOKE + ["--dtypes", "float32", "--cases", "fill_cols"])


def test_embedding_backward_cases_make_routed_rows_with_the_tables_bytes(bi, tmp_path):
    """Issue 36's embedding backward cases: routed, checked against float64, and their bytes the
    gradient and index read plus the table written once (the result is not copied)."""
    cases = list(bi.EMB_BWD)
    bi.main(SMOKE + ["--dtypes", "float32", "--cases", ",".join(cases)])
    rows = json.loads((tmp_path / "bench_index.json").read_text())["rows"]
    assert [r["case"] for r in rows] == cases
    for r in rows:
        gen = torch.Generator().manual_seed(4321)  # the bench's first set, made again
        out0, ids, grad, _fn, desc, _ = bi.CASES[r["case"]][0](torch.float32, torch.device("cpu"), gen, 64)
        assert r["routed"] and r["ours_stats"]["calls"] >= 1, r["case"]
        assert r["check"].startswith("float64 rule"), r["check"]
        want = grad.numel() * 4 + ids.numel() * 8 + out0.numel() * 4
        assert r["bytes_per_call"] == want, (r["case"], r["bytes_per_call"], want)
        if r["case"] == "emb_bwd_one":
            assert int(ids.unique().numel()) == 1
        if r["case"] in ("emb_bwd_zipf", "emb_bwd_768_zipf"):  # skewed: the top id far above uniform
            counts = ids.flatten().bincount()
            assert int(counts.max()) > 20 * ids.numel() / out0.shape[0], r["case"]
