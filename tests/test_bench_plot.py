"""bench/plot_bench.py draws what the bench measured.

- Synthetic results JSON (fresh random times, bytes and copy bandwidth each run; the seed is in
  every failure message): series() equals ATen time / ours and bytes / time / copy GB/s computed
  here from the raw numbers, the figure's bars, labels and ATen ticks carry those values, the
  1.0x line is drawn, the PNG is a PNG of the expected size, provenance is in the picture.
- The committed H200 tables (docs/bench_gather.md, docs/bench_scatter.md) are read as printed:
  an independent parse of the same table here must agree row by row, ATen's % of copy must agree
  with the printed GB/s columns within their rounding, and the provenance must come from the page.
- Without matplotlib, the bench scripts' hook prints one line and returns.

Needs matplotlib (skipped without it, the only skip); about 2 s.
"""
from __future__ import annotations

import importlib.util
import json
import math
import struct
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
DTYPES = ["float32", "float16", "bfloat16"]


@pytest.fixture(scope="module")
def pb():
    spec = importlib.util.spec_from_file_location("plot_bench", ROOT / "bench" / "plot_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def synthetic(rng, style):
    """A results dict shaped like the JSON bench_<style>.py writes, from random raw numbers, and
    the expected series computed from those raw numbers (not from the derived fields)."""
    dtypes = [d for d in DTYPES if rng.random() < 0.7] or [rng.choice(DTYPES)]
    cases = [f"case{k}_{rng.randrange(1000)}" for k in range(rng.randint(2, 7))]
    rows, expected = [], []
    for n, case in enumerate(cases):
        for d in dtypes:
            ours_us = 10 ** rng.uniform(0.5, 4)
            # The first row slower than ATen, the rest anywhere from 4x slower to 32x faster.
            ratio = 2 ** (rng.uniform(-2, -0.05) if not rows else rng.uniform(-2, 5))
            aten_us = ours_us * ratio
            copy_gbs = rng.uniform(50, 5000)
            moved = rng.uniform(0.02, 1.2) * copy_gbs * 1e3 * ours_us  # bytes: 2-120% of the copy
            row = {"case": case, "dtype": d, "shapes": "synthetic", "ours_us": ours_us, "aten_us": aten_us,
                   "copy_us": rng.uniform(1, 100), "bytes_per_call": moved, "copy_gbs": copy_gbs,
                   "ours_gbs": moved / ours_us / 1e3, "aten_gbs": moved / aten_us / 1e3,
                   "ours_pct_copy": 100.0 * (moved / ours_us / 1e3) / copy_gbs,
                   "raw_us": {"ours": [ours_us], "aten": [aten_us]}}
            row["ratio_aten_over_ours" if style == "gather" else "ratio"] = aten_us / ours_us
            rows.append(row)
            expected.append({"case": case, "dtype": d, "ratio": aten_us / ours_us,
                             "ours_pct_copy": 100.0 * moved / (ours_us * 1e3) / copy_gbs,
                             "aten_pct_copy": 100.0 * moved / (aten_us * 1e3) / copy_gbs})
    device = f"NVIDIA Test{rng.randrange(100, 999)}"
    stamp = f"2031-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T0{rng.randint(0, 9)}:1{rng.randint(0, 9)}:00"
    cmd = f"/opt/venv{rng.randrange(99)}/bin/python3 bench/bench_{style}.py --quick --reps {rng.randint(3, 60)}"
    header = "\n".join([f"# stridewise {style} benchmark ({stamp})", "", f"- device: {device}",
                        f"- torch 9.{rng.randrange(9)}.0+cu999, CUDA 99.{rng.randrange(9)}, python 3.99.1",
                        f"- command: `{cmd}`", "- time per call: ..."])
    results = {"header": header, "rows": rows}
    if style == "gather":
        results.update(argv=cmd.split()[1:], sync=[])
    return results, expected, {"device": device, "date": stamp.replace("T", " "),
                               "command": cmd.split(" ", 1)[1], "exe_dir": cmd.split("/bin/")[0]}


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def label(x):
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def by_gid(fig, prefix):
    """gid -> artist for every artist of the figure whose gid starts with prefix."""
    found = {}
    for a in fig.findobj(lambda o: (getattr(o, "get_gid", lambda: None)() or "").startswith(prefix)):
        found[a.get_gid()] = a
    return found


@pytest.mark.parametrize("style", ["gather", "scatter"])
def test_series_and_picture_from_random_results(pb, rng, seed, style, tmp_path):
    results, expected, prov = synthetic(rng, style)
    msg = f"seed {seed}, style {style}"
    path = tmp_path / f"bench_{style}.json"
    path.write_text(json.dumps(results))

    got = pb.series(pb.load(path))
    assert [(g["case"], g["dtype"]) for g in got] == [(e["case"], e["dtype"]) for e in expected], msg
    for g, e in zip(got, expected):
        for k in ("ratio", "ours_pct_copy", "aten_pct_copy"):
            assert close(g[k], e[k]), f"{msg}: {e['case']}/{e['dtype']} {k}: plotted {g[k]}, measured {e[k]}"

    fig = pb.figure(pb.load(path))
    ref = by_gid(fig, "ref-1x")
    assert list(ref) == ["ref-1x"], f"{msg}: no 1.0x line"
    # across the whole panel (axhline: x in axes coordinates), inside the y range with every bar
    assert list(ref["ref-1x"].get_ydata()) == [1.0, 1.0] and list(ref["ref-1x"].get_xdata()) == [0, 1], msg
    ax_r = ref["ref-1x"].axes
    lo, hi = ax_r.get_ylim()
    ratios = [e["ratio"] for e in expected]
    assert ax_r.get_yscale() == "log" and lo < min(ratios + [1.0]) and hi > max(ratios + [1.0]), msg
    bars, labels = by_gid(fig, "ratio:"), by_gid(fig, "ratio-label:")
    pct, ticks = by_gid(fig, "pct:"), by_gid(fig, "aten-pct:")
    for e in expected:
        key = f"{e['case']}:{e['dtype']}"
        b = bars[f"ratio:{key}"]
        ends = sorted([b.get_y(), b.get_y() + b.get_height()])
        want = sorted([1.0, e["ratio"]])
        assert close(ends[0], want[0]) and close(ends[1], want[1]), f"{msg}: {key} bar spans {ends}, ratio {e['ratio']}"
        assert labels[f"ratio-label:{key}"].get_text() == label(e["ratio"]), f"{msg}: {key} label"
        assert close(pct[f"pct:{key}"].get_height(), e["ours_pct_copy"]), f"{msg}: {key} % of copy bar"
        assert all(close(y, e["aten_pct_copy"]) for y in ticks[f"aten-pct:{key}"].get_ydata()), f"{msg}: {key} ATen tick"
    assert len(bars) == len(labels) == len(pct) == len(ticks) == len(expected), msg
    assert list(by_gid(fig, "ref-copy")["ref-copy"].get_ydata()) == [100.0, 100.0], msg

    # Provenance is in the picture, with the interpreter's directory cut off.
    words = " ".join(t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text")))
    for k in ("device", "date", "command"):
        assert prov[k] in words, f"{msg}: {k} {prov[k]!r} not in the picture"
    assert prov["exe_dir"] not in words and style in fig.get_suptitle(), msg

    # The CLI writes a PNG of the expected size (10 x 7.6 in at --dpi).
    png = tmp_path / "sub" / "plot.png"
    pb.main([str(path), "-o", str(png), "--dpi", "50"])
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", msg
    assert struct.unpack(">II", data[16:24]) == (500, 380), msg
    import matplotlib.image
    assert matplotlib.image.imread(png).shape[:2] == (380, 500), msg


def test_series_refuses_a_ratio_the_times_contradict(pb, rng):
    results, _, _ = synthetic(rng, "gather")
    row = results["rows"][-1]
    row["ratio_aten_over_ours"] = row["aten_us"] / row["ours_us"] * 1.25  # 25% off its times
    with pytest.raises(ValueError, match="disagrees with the times"):
        pb.series(results)


def _printed_table(text):
    """The first table with ATen/ours and ours % copy, parsed here without plot_bench."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("|") and "ATen/ours" in ln and "ours % copy" in ln)
    head = [c.strip() for c in lines[i].strip().strip("|").split("|")]
    rows = []
    for ln in lines[i + 2:]:
        if not ln.startswith("|"):
            break
        rows.append(dict(zip(head, (c.strip().replace("*", "") for c in ln.strip().strip("|").split("|")))))
    return "\n".join(lines[:i]), rows


@pytest.mark.parametrize("doc", ["bench_gather.md", "bench_scatter.md"])
def test_committed_tables_are_read_as_printed(pb, doc):
    text = (ROOT / "docs" / doc).read_text()
    above, printed = _printed_table(text)
    results = pb.load(ROOT / "docs" / doc)
    got = pb.series(results)
    assert len(got) == len(printed) > 0
    for g, p in zip(got, printed):
        where = f"{doc} {p['case']}/{p['dtype']}"
        assert (g["case"], g["dtype"]) == (p["case"], p["dtype"]), where
        assert g["ratio"] == float(p["ATen/ours"]), where
        assert g["ours_pct_copy"] == float(p["ours % copy"].rstrip("%")), where
        # ATen's % of copy, derived from ours, against the printed GB/s columns: inside the interval
        # their rounding (0.5 GB/s each) allows, widened by the printed % 's (0.5 point, times
        # ours/ATen). Loose for the launch-bound seed rows (0-1 GB/s), tight for the rest.
        ours_us, aten_us = float(p["ours us"]), float(p["ATen us"])
        ag, cg = float(p["ATen GB/s"]), float(p["copy GB/s"])
        slack = 0.5 * ours_us / aten_us + 0.01
        lo, hi = 100.0 * max(ag - 0.5, 0.0) / (cg + 0.5), 100.0 * (ag + 0.5) / max(cg - 0.5, 0.25)
        assert lo - slack <= g["aten_pct_copy"] <= hi + slack, f"{where}: {g['aten_pct_copy']} vs {ag}/{cg}"
    prov = pb.provenance(results["header"])
    assert f"bench_{prov['op']}.py" in prov["command"] and prov["command"] in above
    assert prov["device"] in above and prov["date"].split()[0] in above
    for v in prov["versions"].replace(",", "").split()[1::2]:  # torch X, CUDA Y, python Z
        assert v in above, f"{doc}: {v} not in the text above the table"
    # A picture shown on the page exists.
    shown = ROOT / "docs" / doc.replace(".md", ".png")
    if shown.name in text:
        assert shown.is_file() and shown.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shown


def test_the_bench_hook_without_matplotlib_prints_one_line(pb, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    png = tmp_path / "x.png"
    assert pb.plot_or_hint(tmp_path / "x.json", png) is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "pip install matplotlib" in out and not png.exists()
