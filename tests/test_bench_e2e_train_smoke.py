"""bench/e2e_train.py (issue 41) end to end on the CPU at its smoke sizes: every training step
runs native and with stridewise, each routes the ops its model is there for (counted by
stridewise.stats(), no fallback), the profiled routed time and the prediction are consistent,
and the table has a row per case and dtype. Figures are not judged here (tiny shapes on a shared
CPU are noise); the GPU run is the measurement."""
from __future__ import annotations

import json

import pytest

from conftest import ROOT

# what each step must route (a model that stopped calling its op would measure nothing)
EXPECT = {
    "sage": {"index_select", "scatter_add"},
    "gat": {"index_select", "scatter_add"},
    "moe_scatter": {"index_select", "scatter_add"},
    "moe_index": {"index_select", "index_add"},
    "moe_index_xi": {"index", "index_add"},
    "moe_index_put": {"index_select", "index_put"},
    "lm_embed": {"embedding", "embedding_dense_backward", "gather", "index"},
    "sparse_rows": {"index_add", "index_select"},
    "hf_gpt2": {"embedding", "embedding_dense_backward"},
}


@pytest.fixture
def e2e(sw, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import e2e_train

    return e2e_train


def test_every_training_step_runs_and_routes_its_ops(e2e, tmp_path, capsys):
    out = tmp_path / "e2e.json"
    md = tmp_path / "e2e.md"
    assert e2e.main(["--device", "cpu", "--size", "smoke", "--reps", "2", "--warmup", "1",
                     "--breakdown", "--json", str(out), "--markdown", str(md),
                     "--plot", str(tmp_path / "e2e.png")]) == 0
    assert (tmp_path / "e2e.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rep = json.loads(out.read_text())
    got = {(r["case"], r["dtype"]) for r in rep["rows"]}
    want = {(c, d) for c, (_, dts) in e2e.train_cases.CASES.items() for d in dts}
    assert got == want, got ^ want
    assert set(EXPECT) == set(e2e.train_cases.CASES)
    for r in rep["rows"]:
        where = f"{r['case']} {r['dtype']}: {r['routed_calls']} {r['fallbacks']}"
        assert EXPECT[r["case"]] <= set(r["routed_calls"]), where
        assert not r["fallbacks"], where
        assert r["native_ms"] > 0 and r["stridewise_ms"] > 0 and r["spread"][0] <= r["spread"][1], r
        assert 0 < r["routed_us_native"] <= r["profiled_us_native"], r  # a share, not more
        assert r["predicted"] == pytest.approx(
            r["profiled_us_native"] / (r["profiled_us_native"] - r["routed_us_native"] + r["routed_us_stridewise"]))
        ops = {k.split("::")[1] for k in r["breakdown"]}
        assert ops, where  # the profiler saw routed aten ops in the step
    text = md.read_text()
    assert text.count("\n| ") >= len(want) and "kept of predicted" in text, text[:2000]
    assert all(f"**{c} {d}**" in text for c, d in want), text[-2000:]
