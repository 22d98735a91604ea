#!/usr/bin/env python3
"""Did our figures move between two runs of a benchmark by more than the noise?

    python3 bench/drift.py BEFORE END.json [--md OUT.md]

BEFORE is a committed table (docs/bench_gather.md, docs/bench_scatter.md: the page's first
results table, whose rows have "case", "dtype", "ours us" and "ATen us") or one benchmark
script's JSON; END is the JSON of the run to judge (bench_gather.py or bench_scatter.py).

Per case and dtype, each of our timings (ours, torch.ops, det ours) is compared with its
control, ATen's timing of the same case in the same run (ATen's for ours and torch.ops, det
ATen's for det ours): ATen's kernels did not change, so what moves ATen between the runs (the
machine, its clocks, launch overhead) moves ours alike. change = (ours END / ours BEFORE) /
(ATen END / ATen BEFORE) - 1, i.e. the change of ATen/ours. The noise of a case is the spread
of its timings over the repetitions of END (interquartile range over median of the per-batch
times in the JSON's raw_us, the larger of ours' and ATen's; at least 2%): the run's own
run-to-run noise. Ours "moved" where |change| exceeds it. Also printed: ATen's own |change|
between the runs (the sessions' drift). Prints a table and a verdict; exits 1 when any of our
timings moved, else 0.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

CONTROL = {"ours": "aten", "ours_op": "aten", "det_ours": "det_aten",
           "ours_det": "aten_det"}  # ours -> its control (bench_index names det "ours_det")
FLOOR = 0.02
MD_COLUMNS = {"ours us": "ours", "ATen us": "aten", "torch.ops us": "ours_op",
              "det ours us": "det_ours", "det ATen us": "det_aten"}


def _from_json(path: str) -> dict:
    out = {}
    for r in json.load(open(path))["rows"]:
        out[(r["case"], r["dtype"])] = {k[:-3]: float(v) for k, v in r.items()
                                        if k.endswith("_us") and isinstance(v, (int, float))
                                        and k != "host_us"}
    return out


def _from_md(path: str) -> dict:
    """The first table whose header has case, dtype and 'ours us'."""
    out, cols = {}, None
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            if cols is not None and out:
                break
            continue
        if cols is None:
            if cells[:2] == ["case", "dtype"] and "ours us" in cells:
                cols = cells
            continue
        if set(line.strip()) <= set("|-: "):
            continue
        row = dict(zip(cols, cells))
        vals = {}
        for col, impl in MD_COLUMNS.items():
            try:
                vals[impl] = float(row[col])
            except (KeyError, ValueError):
                pass
        out[(row["case"], row["dtype"])] = vals
    if not out:
        raise SystemExit(f"{path}: no results table (case | dtype | ... | ours us ...)")
    return out


def load(path: str) -> dict:
    return _from_md(path) if path.endswith(".md") else _from_json(path)


def spreads(path: str) -> dict:
    """(case, dtype, impl) -> IQR / median over the repetitions (JSON raw_us), where present."""
    if path.endswith(".md"):
        return {}
    out = {}
    for r in json.load(open(path))["rows"]:
        for impl, xs in (r.get("raw_us") or {}).items():
            if isinstance(xs, list) and len(xs) >= 4:
                q = statistics.quantiles(xs, n=4)
                out[(r["case"], r["dtype"], impl)] = (q[2] - q[0]) / statistics.median(xs)
    return out


def compare(before: dict, end: dict, spread: dict) -> dict:
    rows, aten = {}, []
    for key, b in before.items():
        e = end.get(key, {})
        for impl, ctl in CONTROL.items():
            if not all(x in b and x in e and b[x] > 0 for x in (impl, ctl)):
                continue
            raw, ref = e[impl] / b[impl] - 1, e[ctl] / b[ctl] - 1
            noise = max([FLOOR] + [spread[(*key, x)] for x in (impl, ctl) if (*key, x) in spread])
            change = (1 + raw) / (1 + ref) - 1
            rows[(key, impl)] = {"raw": raw, "control": ref, "change": change, "noise": noise,
                                 "moved": abs(change) > noise}
        if "aten" in b and "aten" in e and b["aten"] > 0:
            aten.append(abs(e["aten"] / b["aten"] - 1))
    return {"rows": rows, "aten_abs": aten}


def _stats(xs) -> str:
    return f"median {100 * statistics.median(xs):.1f}%, max {100 * max(xs):.1f}%" if xs else "none"


def render(res: dict) -> str:
    lines = ["| case | dtype | ours | ours change | control change | change of ATen/ours | noise |",
             "|---|---|---|---:|---:|---:|---:|"]
    for ((case, dt), impl), r in sorted(res["rows"].items()):
        mark = " **moved**" if r["moved"] else ""
        lines.append(f"| {case} | {dt} | {impl} | {100 * r['raw']:+.1f}% | {100 * r['control']:+.1f}% "
                     f"| {100 * r['change']:+.1f}%{mark} | {100 * r['noise']:.1f}% |")
    moved = {k: r for k, r in res["rows"].items() if r["moved"]}
    lines += ["", f"ATen between the runs (|change|, {len(res['aten_abs'])} cases): "
              f"{_stats(res['aten_abs'])}",
              f"noise (spread over the repetitions of the run, per case): "
              f"{_stats([r['noise'] for r in res['rows'].values()])}",
              f"ours against ATen (|change of ATen/ours|, {len(res['rows'])} timings): "
              f"{_stats([abs(r['change']) for r in res['rows'].values()])}",
              f"verdict: {len(moved)} of {len(res['rows'])} of our timings moved beyond their noise" +
              (": " + ", ".join(f"{c}/{d}/{i} {100 * r['change']:+.1f}% (noise {100 * r['noise']:.1f}%)"
                                for ((c, d), i), r in sorted(moved.items()))
               if moved else "")]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before", help="committed table (.md) or a benchmark JSON")
    p.add_argument("end", help="the benchmark JSON of the run to judge")
    p.add_argument("--md", help="also write the table here")
    a = p.parse_args(argv)
    res = compare(load(a.before), load(a.end), spreads(a.end))
    text = render(res)
    print(text)
    if a.md:
        open(a.md, "w").write(text + "\n")
    return 1 if any(r["moved"] for r in res["rows"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
