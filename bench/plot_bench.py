#!/usr/bin/env python3
"""A picture of a bench/bench_gather.py or bench/bench_scatter.py run: per case and dtype, how
much faster than ATen, and how close to the device's copy bandwidth.

    python3 bench/plot_bench.py bench/results/bench_gather.json -o bench/results/bench_gather.png
    python3 bench/plot_bench.py docs/bench_gather.md -o docs/bench_gather.png   # a committed table

Input: the JSON a bench script writes ({"header": ..., "rows": [...]}), or a markdown page that
holds the table the script prints (docs/bench_*.md). From markdown, the first table with the
columns "ATen/ours" and "ours % copy" is read (--table N: the N-th such table, from 0), and its
provenance (GPU, torch/CUDA versions, date, command) is taken from the prose above it: the
nearest heading's section first, then the whole page above the table (see markdown_results).
A picture is never drawn without its provenance: a missing field is an error.

What is plotted comes from one function, series(results):
  ratio          ATen time / ours, as the bench computed it ("ratio_aten_over_ours" in the gather
                 JSON, "ratio" in the scatter JSON, the "ATen/ours" column of a table): > 1 is
                 stridewise faster
  ours_pct_copy  our GB/s as % of the device copy's GB/s measured in the same run (the bench's
                 "ours_pct_copy" / "ours % copy")
  aten_pct_copy  ATen's, derived as ours_pct_copy * ours_us / aten_us: both bench scripts divide
                 the same bytes per call by each side's time, so this equals ATen GB/s / copy GB/s
                 without the rounding of the printed GB/s columns (the seed case prints 0-1 GB/s)
The figure: top panel, bars from the 1.0x line to each ratio on a log2 axis (2x faster and 2x
slower are the same distance from it), value on each bar; bottom panel, our % of copy per dtype
as bars with ATen's as a black tick across each bar, and the 100% line (the copy). Rows that
bench_adv.py marks not routed (JSON "routed": false; "ours us" cell "not routed") are left out.

The bench scripts call plot_or_hint() after writing their JSON: a missing matplotlib costs one
printed line, never the run (the JSON holds everything needed to draw it later).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import textwrap
from pathlib import Path

INSTALL_HINT = "pip install matplotlib==3.11.2"
DTYPE_COLORS = {"float32": "#4C72B0", "float16": "#DD8452", "bfloat16": "#55A868"}
OTHER_COLORS = ["#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD"]
REQUIRED_COLUMNS = ("case", "dtype", "ours us", "ATen us", "ATen/ours", "ours % copy")


# ---- input ---------------------------------------------------------------------------------

def load(path, table=0):
    """results = {"header": str, "rows": [dict], "source": str} from a bench JSON or a markdown
    page (table: which qualifying table of the page, from 0; ignored for JSON)."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".json":
        data = json.loads(text)
        return {"header": data["header"], "rows": data["rows"], "source": _shown(path)}
    return markdown_results(text, table, name=_shown(path))


def _shown(path):
    """The path as the picture names it: relative to the working directory when under it (an
    absolute path says where a checkout lived, not which file)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _cells(line):
    # Cells keep their text minus the bold markers the docs put on misses ("**0.91**").
    return [c.strip().strip("*").strip() for c in line.strip().strip("|").split("|")]


def _tables(lines):
    """(start line, header cells, data rows as lists of cells) for every markdown table."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s|:-]+\|$", lines[i + 1].strip()):
            start, head, rows = i, _cells(lines[i]), []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.append((start, head, rows))
        else:
            i += 1
    return out


def _first(pattern, *texts):
    for t in texts:
        m = re.search(pattern, t)
        if m:
            return m.group(1)
    return None


def markdown_results(text, table=0, name="<markdown>"):
    """The N-th table with REQUIRED_COLUMNS, as results whose rows carry the JSON keys the
    bench scripts write, and a header in the bench's own format built from the prose above it.
    Raises ValueError when the table or any provenance field is not found."""
    lines = text.splitlines()
    found = [t for t in _tables(lines) if all(c in t[1] for c in REQUIRED_COLUMNS)]
    if len(found) <= table:
        raise ValueError(f"{name}: no table #{table} with columns {', '.join(REQUIRED_COLUMNS)} "
                         f"({len(found)} found)")
    start, head, data = found[table]
    above = lines[:start]
    h = max((k for k, ln in enumerate(above) if ln.startswith("#")), default=0)
    heading, section, page = above[h] if above else "", "\n".join(above[h:]), "\n".join(above)
    date = _first(r"(\d{4}-\d{2}-\d{2})", heading, page)
    time = _first(r"(\d{1,2}:\d{2} UTC)", heading)  # only the heading's: prose names other runs
    prov = {
        "date": date and (f"{date} {time}" if time else date),
        "device": _first(r"(NVIDIA [\w-]+)", section, page),
        "torch": _first(r"torch (\d[\w.+]*\w)", section, page),
        "CUDA": _first(r"CUDA (\d+(?:\.\d+)*)", section, page),
        "command": _first(r"`(python3? bench/bench_\w+\.py[^`]*)`", section, page),
    }
    missing = [k for k, v in prov.items() if not v]
    if missing:
        raise ValueError(f"{name}: table at line {start + 1}: no {', '.join(missing)} in the text above it")
    python = _first(r"Python (\d+(?:\.\d+)*)", section, page)
    op = re.search(r"bench_(\w+)\.py", prov["command"]).group(1)
    header = "\n".join([
        f"# stridewise {op} benchmark ({prov['date']})", "",
        f"- device: {prov['device']}",
        f"- torch {prov['torch']}, CUDA {prov['CUDA']}" + (f", python {python}" if python else ""),
        f"- command: `{prov['command']}`",
    ])
    col = {c: head.index(c) for c in head}
    rows = []
    for cells in data:
        if len(cells) != len(head):
            raise ValueError(f"{name}: table at line {start + 1}: a row has {len(cells)} cells, "
                             f"the header {len(head)}: {cells[:2]}")
        g = lambda c: cells[col[c]]  # noqa: E731
        if g("ours us") == "not routed":  # bench_adv.py's word for a case ours did not run
            continue
        rows.append({"case": g("case"), "dtype": g("dtype"),
                     "ours_us": float(g("ours us")), "aten_us": float(g("ATen us")),
                     "ratio": float(g("ATen/ours")), "ours_pct_copy": float(g("ours % copy").rstrip("%"))})
    return {"header": header, "rows": rows, "source": f"{name}, table at line {start + 1}"}


def provenance(header):
    """{op, date, device, versions, command} from a bench header (the JSON's or the one
    markdown_results builds). The interpreter's path in the command is cut to its name: the
    picture should say what was run, not where python lived."""
    def line(pattern):
        m = re.search(pattern, header, re.M)
        return m.groups() if m else None
    title = line(r"^# stridewise (\w+) benchmark \((.*)\)\s*$") or ("?", "date unknown")
    device = line(r"^- device: (.*)$")
    versions = line(r"^- (torch .*)$")
    command = line(r"^- command: `(.*)`\s*$")
    cmd = command[0] if command else "command unknown"
    exe, _, rest = cmd.partition(" ")
    if "/" in exe and re.match(r"python[\d.]*$", exe.rsplit("/", 1)[1]):
        cmd = exe.rsplit("/", 1)[1] + (" " + rest if rest else "")
    return {"op": title[0], "date": re.sub(r"(\d)T(\d)", r"\1 \2", title[1]),
            "device": device[0] if device else "device unknown",
            "versions": versions[0] if versions else "versions unknown", "command": cmd}


# ---- the numbers plotted -------------------------------------------------------------------

def series(results):
    """One dict per row, in the bench's order: case, dtype, ratio (ATen/ours), ours_pct_copy,
    aten_pct_copy (module docstring). The ratio must agree with the row's two times (2% plus
    the table's rounding): a shifted column or an edited number is refused, not drawn."""
    out = []
    for r in results["rows"]:
        if r.get("routed") is False:  # bench_adv.py: ATen timed alone, nothing of ours to draw
            continue
        ratio = r["ratio_aten_over_ours"] if "ratio_aten_over_ours" in r else r["ratio"]
        ours_us, aten_us = float(r["ours_us"]), float(r["aten_us"])
        if not abs(ratio - aten_us / ours_us) <= 0.02 * ratio + 0.006:
            raise ValueError(f"{r['case']}/{r['dtype']}: ATen/ours {ratio} disagrees with the times "
                             f"(ATen {aten_us} us / ours {ours_us} us = {aten_us / ours_us:.3f})")
        ours_pct = float(r["ours_pct_copy"])
        out.append({"case": r["case"], "dtype": r["dtype"], "ratio": float(ratio),
                    "ours_pct_copy": ours_pct, "aten_pct_copy": ours_pct * ours_us / aten_us})
    return out


def ratio_label(x):
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


# ---- the picture ---------------------------------------------------------------------------

def _layout(rows):
    """Cases in first-seen order on x, dtypes in first-seen order within a case: x position of
    each (case, dtype), the bar width, the cases and the dtypes."""
    cases = list(dict.fromkeys(r["case"] for r in rows))
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    width = 0.8 / len(dtypes)
    pos = {(r["case"], r["dtype"]): cases.index(r["case"]) - 0.4 + width * (dtypes.index(r["dtype"]) + 0.5)
           for r in rows}
    return pos, width, cases, dtypes


def _color(dtypes):
    spare = iter(OTHER_COLORS * 4)
    return {d: DTYPE_COLORS.get(d) or next(spare) for d in dtypes}


def figure(results, source=None):
    """The matplotlib Figure (Agg canvas, no pyplot state). Artists a test can find by gid:
    "ref-1x" (the 1.0x line), "ref-copy" (100% of copy), "ratio:CASE:DTYPE" (bar from 1 to the
    ratio), "ratio-label:CASE:DTYPE" (its value), "pct:CASE:DTYPE" (our % of copy),
    "aten-pct:CASE:DTYPE" (ATen's tick)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, NullLocator

    rows = series(results)
    if not rows:
        raise ValueError("no rows to plot")
    prov = provenance(results["header"])
    pos, width, cases, dtypes = _layout(rows)
    color = _color(dtypes)
    n_dt = len(dtypes)
    label_size = 9 if len(rows) <= 24 else 8.5

    crowded = len(cases) > 12  # bench_adv.py's 23 cases: slanted names under both panels
    fig = Figure(figsize=(10, 8.4 if crowded else 7.6), dpi=100)
    FigureCanvasAgg(fig)
    ax_r, ax_p = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1.25, 1], "hspace": 0.45 if crowded else 0.32})
    fig.subplots_adjust(left=0.105, right=0.985, top=0.81, bottom=0.11 if crowded else 0.075)

    # (a) ratio to ATen. log2: a bar's length is how many times faster (up) or slower (down).
    # Margins in log2 units leave room for the rotated labels beyond the longest bars: about a
    # sixth of the axis each, whatever the data's range (m = 0.17 * (span + 2m)).
    lo = min(min(r["ratio"] for r in rows), 1.0)
    hi = max(max(r["ratio"] for r in rows), 1.0)
    m = max(0.5, 0.26 * math.log2(hi / lo))
    ymin, ymax = 2 ** (math.log2(lo) - (m if lo < 1.0 else 0.4)), 2 ** (math.log2(hi) + m)
    ax_r.set_yscale("log", base=2)
    ax_r.set_ylim(ymin, ymax)
    ax_r.axhspan(ymin, 1.0, color="#C44E52", alpha=0.07, lw=0)
    for r in rows:
        key, x, v = f"{r['case']}:{r['dtype']}", pos[(r["case"], r["dtype"])], r["ratio"]
        slower = v < 1.0
        ax_r.bar(x, v - 1.0, bottom=1.0, width=width * 0.92, color=color[r["dtype"]],
                 edgecolor="#C44E52" if slower else "none", lw=1.2 if slower else 0, gid=f"ratio:{key}")
        ax_r.text(x, v * (0.93 if slower else 1.07), ratio_label(v), gid=f"ratio-label:{key}",
                  ha="center", va="top" if slower else "bottom", rotation=90, fontsize=label_size,
                  color="#C44E52" if slower else "#222222", fontweight="bold" if slower else "normal")
    ax_r.axhline(1.0, color="black", lw=1.4, zorder=3, gid="ref-1x")
    ticks = [2.0 ** k for k in range(math.floor(math.log2(ymin)), math.ceil(math.log2(ymax)) + 1)
             if ymin <= 2.0 ** k <= ymax]
    ax_r.yaxis.set_major_locator(FixedLocator(ticks))
    ax_r.yaxis.set_minor_locator(NullLocator())
    ax_r.set_yticklabels([f"{t:g}x" for t in ticks])
    for t, lab in zip(ticks, ax_r.get_yticklabels()):
        if t == 1.0:
            lab.set_fontweight("bold")
    ax_r.set_ylabel("ATen time / ours\n(1x line = ATen; above: faster)", fontsize=10.5)
    ax_r.set_title("Speed against ATen (same GPU, same run, same inputs)", loc="left", fontsize=11.5,
                   fontweight="bold")

    # (b) achieved bandwidth as % of the device copy measured in the same run.
    top = max(110.0, max(max(r["ours_pct_copy"], r["aten_pct_copy"]) for r in rows) * 1.15)
    ax_p.set_ylim(0, top)
    for r in rows:
        key, x = f"{r['case']}:{r['dtype']}", pos[(r["case"], r["dtype"])]
        ax_p.bar(x, r["ours_pct_copy"], width=width * 0.92, color=color[r["dtype"]], gid=f"pct:{key}")
        ax_p.plot([x - width * 0.46, x + width * 0.46], [r["aten_pct_copy"]] * 2, color="black",
                  lw=2.2, solid_capstyle="butt", gid=f"aten-pct:{key}")
        if n_dt * len(cases) <= 36:  # above ATen's tick too, so neither hides the other
            y = max(r["ours_pct_copy"], r["aten_pct_copy"]) + top * 0.015
            ax_p.text(x, y, f"{r['ours_pct_copy']:.0f}", ha="center", va="bottom", fontsize=label_size - 1,
                      color="#444444", rotation=90)
    ax_p.axhline(100.0, color="#555555", lw=1.1, ls="--", zorder=3, gid="ref-copy")
    ax_p.yaxis.set_major_formatter(lambda v, _: f"{v:.0f}%")
    ax_p.set_ylabel("bytes moved / time\nas % of a device copy", fontsize=10.5)
    ax_p.set_title("Bandwidth against a copy in the same run (dashed = 100%): bars ours, black tick ATen",
                   loc="left", fontsize=11.5, fontweight="bold")

    for ax in (ax_r, ax_p):
        ax.set_xlim(-0.5, len(cases) - 0.5)
        ax.set_xticks(range(len(cases)))
        if crowded:
            ax.set_xticklabels(cases, fontsize=9, rotation=35, ha="right", rotation_mode="anchor")
        else:
            ax.set_xticklabels(cases, fontsize=10.5)
        for k in range(1, len(cases)):
            ax.axvline(k - 0.5, color="#E5E5E5", lw=0.8, zorder=0)
        ax.tick_params(axis="y", labelsize=10)
        ax.tick_params(axis="x", length=0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)

    fig.align_ylabels([ax_r, ax_p])
    fig.suptitle(f"stridewise {prov['op']} vs ATen on {prov['device']}", x=0.105, y=0.975, ha="left",
                 fontsize=15, fontweight="bold")
    sub = f"{prov['date']}  ·  {prov['versions']}\n" + "\n".join(
        textwrap.wrap(f"command: {prov['command']}", 130))
    fig.text(0.105, 0.932, sub, ha="left", va="top", fontsize=10, color="#333333", linespacing=1.4)
    # The dtype key on the top panel's title line, clear of the provenance lines above it (a long
    # command wraps across the whole width); the reference lines are named in their panels.
    fig.legend(handles=[Patch(color=color[d], label=d) for d in dtypes], loc="lower right",
               bbox_to_anchor=(0.985, 0.805), ncol=len(dtypes), fontsize=10, frameon=False,
               columnspacing=1.2, handlelength=1.4, borderaxespad=0)
    src = source or results.get("source")
    if src:
        fig.text(0.105, 0.012, f"data: {src}", ha="left", va="bottom", fontsize=7.5, color="#777777")
    return fig


def plot(results, png, source=None, dpi=160):
    """Draw and write the PNG; returns its path."""
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    figure(results, source).savefig(png, dpi=dpi, facecolor="white")
    return png


def plot_or_hint(json_path, png_path):
    """For the bench scripts, after their JSON is written: draw the PNG beside it, or print one
    line saying why not. Never raises: the run's numbers are already on disk, and losing a
    device run to a plotting problem would cost more than the picture is worth."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"(no picture: matplotlib is not installed; {INSTALL_HINT}, then "
              f"python3 bench/plot_bench.py {json_path} -o {png_path})")
        return None
    try:
        path = plot(load(json_path), png_path)
    except Exception as e:  # noqa: BLE001 - see the docstring
        print(f"(no picture: {type(e).__name__}: {e}; the JSON is at {json_path})")
        return None
    print(f"(picture: {path})")
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", help="bench JSON (bench/results/bench_*.json) or markdown page with its table")
    p.add_argument("-o", "--out", required=True, help="PNG to write")
    p.add_argument("--table", type=int, default=0, help="markdown only: which qualifying table, from 0")
    p.add_argument("--dpi", type=int, default=160)
    args = p.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(f"matplotlib is not installed: {INSTALL_HINT}")
    results = load(args.results, args.table)
    path = plot(results, args.out, dpi=args.dpi)
    rows = series(results)
    print(f"{path}: {len(rows)} rows, ATen/ours {min(r['ratio'] for r in rows):.2f}-"
          f"{max(r['ratio'] for r in rows):.2f}, from {results['source']}")


if __name__ == "__main__":
    main()
