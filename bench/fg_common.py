"""FlagGems beside ATen and stridewise in one run: the helpers bench_adv.py, bench_scatter.py (and
the benchmarks built on its driver) and bench_gather.py share.

- add_args(parser): `--flaggems auto|on|off` (auto: on CUDA when `import flag_gems` works; on:
  also on the CPU, for a stand-in module in the tests; off: never).
- flag_gems(args, device): the module, imported once per run, or None and why not. Its import
  is checked not to change the dispatcher's kernels of the ops the benchmarks measure (every
  aten:: packet of stridewise's op table): where it does, ATen's column would be FlagGems', and
  the reason says so.
- fg_status(args, device, op, run, verify): whether FlagGems runs the call (its context changes
  the kernel of an aten overload the call reaches), and its result checked once like ours.
  Any error of FlagGems' (absent, not registered, raising, wrong) is a result in the row, never
  the end of the run; a wrong result is marked, and still timed.
- fg_cells(row) / fg_notes(rows): the table's two FlagGems cells and the notes under it.

FlagGems runs under flag_gems.use_gems(include=[its functions of the op], FG_FUNCS) when this
FlagGems names them (FULL_CONFIG_BY_FUNC), else under use_gems() (everything it registers, as
flag_gems.enable() would); the dispatcher says whether the call is then theirs.
"""
from __future__ import annotations

import re
from pathlib import Path

import torch

# FlagGems' function names (flag_gems.use_gems(include=...)) per stridewise routing name.
FG_FUNCS = {
    "index": ("index",), "index_put": ("index_put_", "index_put", "_index_put_impl_"),
    "take": ("take",), "put": ("put_", "put"),
    "scatter": ("scatter", "scatter_"), "scatter_add": ("scatter_add_", "scatter_add"),
    "scatter_reduce": ("scatter_reduce", "scatter_reduce_", "scatter_reduce_two"),
    "gather": ("gather",),
    "index_select": ("index_select",), "index_add": ("index_add", "index_add_"),
    "index_copy": ("index_copy", "index_copy_"), "index_reduce": ("index_reduce", "index_reduce_"),
    "index_fill": ("index_fill", "index_fill_"), "embedding": ("embedding",),
    "embedding_dense_backward": ("embedding_dense_backward", "embedding_backward"),
}
_FG = {}  # the import, tried once per run: {"mod", "why"}


def add_args(p):
    p.add_argument("--flaggems", choices=("auto", "on", "off"), default="auto",
                   help="auto: FlagGems on CUDA when importable; on: also on the CPU; off: never")


def reset():
    """Forget the import's outcome (tests that swap the flag_gems module within one process)."""
    _FG.clear()


def _routed_packets():
    """The aten:: packets of stridewise's op table: the loaded library's, or, for a build from
    before the table (gpu_all.sh's benchab runs these scripts against an older tree's library),
    the table beside these scripts (core/include/stridewise/ops.def)."""
    try:
        from stridewise._compile import packets
    except ImportError:
        text = (Path(__file__).resolve().parents[1] / "core/include/stridewise/ops.def").read_text()
        rows = re.findall(r'^SW_OP\(.*?"([^"]*)"\)', re.sub(r",\s*\n\s*", ", ", text), re.M)
        return sorted({p for row in rows for p in row.split()})
    return sorted({p for ps in packets().values() for p in ps})


def watched_qualnames():
    """Every overload of every aten:: packet stridewise routes (its op table): the kernels the
    import of flag_gems must leave alone."""
    from stridewise.audit import coverage
    out = []
    for name in _routed_packets():
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None:
            out += [coverage.qualname(name, o) for o in packet.overloads()]
    return out


def flag_gems(args, device):
    """The flag_gems module, or None and why not (module docstring)."""
    if not _FG:
        from stridewise.audit import coverage
        if args.flaggems == "off" or (args.flaggems == "auto" and device.type != "cuda"):
            _FG.update(mod=None, why="off (--flaggems off)" if args.flaggems == "off" else "not tried on the CPU")
            return None, _FG["why"]
        qs = watched_qualnames()
        before = coverage.snapshot(qs, device.type)
        try:
            import flag_gems as fg
        except Exception as e:  # noqa: BLE001 - absent or broken: reported, the run goes on
            _FG.update(mod=None, why=f"not importable: {type(e).__name__}: {str(e)[:120]}")
            return None, _FG["why"]
        changed = [q for q, e in coverage.diff(before, coverage.snapshot(qs, device.type)).items()
                   if e["ran_by"] == "backend"]
        warn = f" (WARNING: its import alone changed {', '.join(changed)}: ATen's column is not ATen's there)"
        _FG.update(mod=fg, why=f"flag_gems {getattr(fg, '__version__', '?')}" + (warn if changed else ""))
        if changed:
            print(warn.strip(" ()"), flush=True)
    return _FG["mod"], _FG["why"]


def _first_line(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


class _Reached:
    """A context manager recording the qualified names of the overloads dispatched inside it
    (below autograd, as stridewise.audit.coverage.trace does)."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode
        seen = self.seen = []

        class Record(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls):  # torch >= 2.12 would wrap the hook (imports dynamo)
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                ov = func._overloadname
                q = func._schema.name + ("" if ov in ("default", "") else f".{ov}")
                if q not in seen:
                    seen.append(q)
                return func(*args, **(kwargs or {}))

        self.mode = Record()

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


def fg_status(args, device, op, run, verify):
    """{"ran": bool, "why", "ctx" (when ran: the context manager factory to time it under), "ok",
    "check"}. run(ctx) returns the call's result on the first input set, the call made inside
    ctx() and anything it prepares (a fresh copy of what the call writes) outside it: the
    overloads reached inside are the ones FlagGems must take; contextlib.nullcontext is ATen.
    verify(got) -> (ok, how) compares the result with ATen's as the benchmark checks ours."""
    fg, why = flag_gems(args, device)
    if fg is None:
        return {"ran": False, "why": why}
    from stridewise.audit import coverage
    known = getattr(fg, "FULL_CONFIG_BY_FUNC", None)
    names = [n for n in FG_FUNCS.get(op, (op,)) if known is not None and n in known]
    ctx = (lambda: fg.use_gems(include=names)) if names else fg.use_gems
    try:  # FlagGems' registration and its call: any error of theirs is a result, not the run's end
        rec = _Reached()
        run(lambda: rec)
        reached = [q for q in rec.seen if q.startswith("aten::")]
        before = coverage.snapshot(reached, device.type)
        with ctx():
            after = coverage.snapshot(reached, device.type)
        mine = [q for q, e in coverage.diff(before, after).items() if e["ran_by"] == "backend"]
        if not mine:
            return {"ran": False, "why": f"not registered for {', '.join(reached)}"}
        got = run(ctx)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as e:  # noqa: BLE001
        return {"ran": False, "why": f"error: {_first_line(e)}"}
    try:
        ok, how = verify(got)
    except Exception as e:  # noqa: BLE001 - e.g. a result of another shape or dtype
        ok, how = False, f"not comparable: {_first_line(e)}"
    return {"ran": True, "why": f"{why} runs {', '.join(mine)}", "ctx": ctx, "ok": bool(ok), "check": how}


def ratio(a, b):
    return a / b if a is not None and b else None


def fg_cells(r, none="-"):
    """("FlagGems us", "FlagGems/ours") cells: `none` and "-" where FlagGems did not run the op
    (the reason is the row's "flaggems" "why"); a result that failed the check is marked "!"."""
    fg = r["flaggems"]
    if not fg["ran"]:
        return none, "-"
    mark = "" if fg["ok"] else " !"
    us = "-" if r.get("flaggems_us") is None else f"{r['flaggems_us']:.1f}"
    rf = r.get("ratio_fg")
    return us + mark, "-" if rf is None else f"{rf:.2f}"


def grouped(rows, key):
    """{key(row): "case, case/dtype, ..."} over the rows whose key is not None; a case is named
    alone when all its rows share the key."""
    out = {}
    for r in rows:
        k = key(r)
        if k is not None:
            out.setdefault(k, {}).setdefault(r["case"], []).append(r["dtype"])
    n_dt = {c: sum(r["case"] == c for r in rows) for c in {r["case"] for r in rows}}
    return {k: ", ".join(c if len(d) == n_dt[c] else ", ".join(f"{c}/{x}" for x in d) for c, d in cases.items())
            for k, cases in out.items()}


def fg_notes(rows):
    """The lines under a table: why FlagGems did or did not run, per group of rows, and every
    row where its result failed the check (marked "!" in the table)."""
    notes = [f"- FlagGems {why}: {cases}" for why, cases in grouped(rows, lambda r: r["flaggems"]["why"]).items()]
    notes += [f"- FlagGems differs from ATen (marked !): {r['case']}/{r['dtype']}, {r['flaggems']['check']}"
              for r in rows if r["flaggems"]["ran"] and not r["flaggems"]["ok"]]
    return notes
