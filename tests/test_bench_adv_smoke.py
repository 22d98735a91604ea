"""bench/bench_adv.py end to end on the CPU at tiny sizes (--cpu-smoke), in one child process:
every case of the table (float32), plus two cases whose ops stridewise routes today (index_select,
index_add_) so that the routed path (check, timing, deterministic mode, host time, the plot) runs
before the issue-22 ops are routed, and a stand-in flag_gems that registers a CPU take, so that
the FlagGems path (registration seen in the dispatcher, check, timing) runs without FlagGems."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import PYDIR, ROOT

FAKE_FLAG_GEMS = '''
import torch
__version__ = "0-stand-in"
FULL_CONFIG_BY_FUNC = {"take": []}


def _take(x, i):
    return x.reshape(-1).index_select(0, i.reshape(-1)).view(i.shape)


class use_gems:
    def __init__(self, exclude=None, include=None):
        self.include = include or ["take"]

    def __enter__(self):
        self.lib = torch.library.Library("aten", "IMPL")
        if "take" in self.include:
            self.lib.impl("take", _take, "CPU")

    def __exit__(self, *exc):
        self.lib._destroy()
'''

DRIVER = '''
import sys, torch
sys.path.insert(0, {bench!r})
import bench_adv as b


def routed_rows(dtype, device, gen, shrink):  # x[i] through index_select, which is routed today
    return b.rows()(dtype, device, gen, shrink)._replace(fn=lambda x, i: torch.index_select(x, 0, i))


def routed_acc(dtype, device, gen, shrink):  # x[i] += v through index_add_
    return b.acc()(dtype, device, gen, shrink)._replace(fn=lambda x, i, v: x.index_add_(0, i, v))


b.CASES.update(sel=(routed_rows, "index_select", False), add=(routed_acc, "index_add", True))
b.MAKERS.update(sel=routed_rows, add=routed_acc)
b.CASE_ORDER[:] = list(b.CASES)
b.main(["--cpu-smoke", "--dtypes", "float32", "--flaggems", "on"])
'''


def test_bench_adv_cpu_smoke(sw, tmp_path):
    fake = tmp_path / "fake"
    (fake / "flag_gems").mkdir(parents=True)
    (fake / "flag_gems" / "__init__.py").write_text(FAKE_FLAG_GEMS)
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), PYTHONPATH=os.pathsep.join([str(PYDIR), str(fake)]))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER.format(bench=str(ROOT / "bench")))],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = {r["case"]: r for r in json.loads((out / "bench_adv.json").read_text())["rows"]}
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_adv

    assert set(rows) == set(bench_adv.CASE_ORDER) | {"sel", "add"}
    supported = set(sw.supported_ops())
    for name, r in rows.items():
        assert r["aten_us"] > 0 and r["copy_gbs"] > 0, name
        if r["op"] in supported:  # routed: timed, with the stats of the call and the check's rule
            assert r["routed"] and r["ours_us"] > 0 and r["ours"]["stats"]["calls"] >= 1, name
            assert abs(r["ratio"] - r["aten_us"] / r["ours_us"]) < 1e-9 and r["host_us"] is not None, name
        else:  # not routed: ATen alone, never ours
            assert not r["routed"] and r["ours_us"] is None and r["ratio"] is None, name
            assert "ours" not in r["raw_us"] and "supported_ops" in r["ours"]["why"], name
    assert rows["sel"]["ours"]["check"] == "bitwise" and rows["add"]["ours"]["check"].startswith("float64 rule")
    assert rows["add"]["ours_det_us"] > 0 and rows["add"]["aten_det_us"] > 0 and rows["sel"]["ours_det_us"] is None
    # FlagGems: timed where its context changed the dispatcher's kernel (take), else said why not
    fg = rows["take"]["flaggems"]
    assert fg["ran"] and fg["ok"] and rows["take"]["flaggems_us"] > 0 and "aten::take" in fg["why"], fg
    fg = rows["rows"]["flaggems"]
    assert not fg["ran"] and fg["why"] == "not registered for aten::index.Tensor", fg
    md = (out / "bench_adv.md").read_text()
    assert "| sel | float32 |" in md and "| take | float32 |" in md
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (out / "bench_adv.png").stat().st_size > 0, p.stdout[-2000:]
