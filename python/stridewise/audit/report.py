"""The report: op x layout-class table, per-op status counts, diagnoses, failures; JSON."""
from __future__ import annotations

import platform

import torch

from . import diagnose, harm
from .oracle import FAILING, STATUSES

SCHEMA = "stridewise-audit/1"
LAYOUT_ORDER = ("contiguous", "expand", "expand_all", "expand_nondim", "transpose", "permute",
                "step_slice", "offset", "compound", "compound_writable", "deep_compound", "mixed")
SHORT = {"contiguous": "contig", "expand": "expand", "expand_all": "exp_all",
         "expand_nondim": "exp_nd", "transpose": "transp", "permute": "permute",
         "step_slice": "step", "offset": "offset", "compound": "compnd",
         "compound_writable": "cmp_wr", "deep_compound": "deep", "mixed": "mixed"}
CELL = {"wrong": "w", "crash": "c", "bad-error": "e", "device-assert": "a", "known": "k",
        "error": "X", "native": "n"}


def layout_of(case) -> str:
    lc = case.layout_class
    return lc if lc in LAYOUT_ORDER else "mixed"


def count(results) -> dict:
    c = {s: 0 for s in STATUSES}
    for r in results:
        c[r.verdict.status] = c.get(r.verdict.status, 0) + 1
    c["cases"] = len(results)
    c["failed"] = sum(c[s] for s in FAILING) + c.get("error", 0)
    return c


def by_op(results) -> dict:
    out: dict = {}
    for r in results:
        out.setdefault(r.case.op, []).append(r)
    return out


def analyse(results) -> dict:
    """Counts and diagnoses per op and overall."""
    ops = by_op(results)
    info = {"ops": {}, "diagnosis": []}
    for op, rs in ops.items():
        layouts: dict = {}
        for r in rs:
            layouts.setdefault(layout_of(r.case), []).append(r)
        classes = harm.groups(rs)
        info["ops"][op] = {
            "counts": count(rs),
            "by_layout": {k: count(v) for k, v in layouts.items()},
            "diagnosis": diagnose.diagnose(op, rs, classes),
            "harm": classes,
        }
    failing_ops = [op for op, v in info["ops"].items() if v["counts"]["failed"]]
    if len(failing_ops) > 1:
        info["diagnosis"] = diagnose.diagnose("all ops", results)
    info["counts"] = count(results)
    return info


def _cell(c: dict) -> str:
    ok = c.get("pass", 0)
    extra = " ".join(f"{CELL[s]}{c[s]}" for s in ("wrong", "crash", "bad-error", "error",
                                                   "device-assert", "known", "native") if c.get(s))
    if not ok and not extra:
        return "-"
    return f"{ok} {extra}".strip() if extra else str(ok)


def _table(rows, header) -> list:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(x).ljust(w) if i == 0 else str(x).rjust(w)  # noqa: E731
                              for i, (x, w) in enumerate(zip(r, widths)))
    return [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]


def text(results, info: dict, meta: dict, max_failures: int = 8) -> str:
    out = [f"stridewise audit  device={meta['device']}  backend={meta['backend'] or 'none (native ATen)'}"
           f"  guard={'on' if meta['guard'] else 'off'}  matrix={meta['matrix']}  seed={meta['seed']}",
           *_memory_lines(meta),
           f"torch {torch.__version__}  python {platform.python_version()}  "
           f"{info['counts']['cases']} cases in {meta['seconds']:.1f}s  ({meta['jobs']} worker(s))"
           + (f"  under compute-sanitizer {meta['sanitizer']}" if meta.get("sanitizer") else ""), ""]
    cols = ("pass", "wrong", "crash", "bad-error", "device-assert", "known", "unsupported", "skip")
    if meta.get("backend"):  # passing cases the backend did not run (coverage.py)
        cols = ("pass", "native") + cols[1:]
    rows = []
    for op, v in info["ops"].items():
        c = v["counts"]
        rows.append([op, c["cases"]] + [c.get(s, 0) or "." for s in cols]
                    + ([c["error"]] if info["counts"].get("error") else []))
    hdr = ["op", "cases"] + list(cols) + (["AUDITOR-ERROR"] if info["counts"].get("error") else [])
    c = info["counts"]
    rows.append(["TOTAL", c["cases"]] + [c.get(s, 0) or "." for s in cols]
                + ([c["error"]] if c.get("error") else []))
    out += _table(rows, hdr) + [""]
    out += coverage_text(results, meta)
    out += backward_text(results, meta)
    present = [l for l in LAYOUT_ORDER if any(l in v["by_layout"] for v in info["ops"].values())]
    rows = [[op] + [_cell(v["by_layout"].get(l, {})) for l in present] for op, v in info["ops"].items()]
    out.append("op x layout class (cell: passing cases, then w=wrong c=crash e=bad-error "
               "a=device-assert k=known X=auditor error n=passed, ran natively)")
    out += _table(rows, ["op"] + [SHORT[l] for l in present]) + [""]
    by_harm = [line for op, v in info["ops"].items() for line in harm.text(op, v["harm"])]
    if by_harm:
        out.append("Findings by harm, per op, most harmful first (crashes, wrong values, wrong "
                   "gradients (--grad), inputs modified, missing errors, spurious errors by "
                   "message, device asserts), each with its diagnosis")
        out += by_harm + [""]
    across = [d for d in info["diagnosis"] if d.predicate != "none" and len(d.ops) > 1]
    if across:
        out.append("Across ops (one cause in several ops)")
        out += [f"  {', '.join(d.ops)}: {d.text}" for d in across] + [""]
    fails = [r for r in results if r.verdict.status in FAILING or r.verdict.status == "error"]
    if fails:
        out.append(f"Failures ({len(fails)}; the first {max_failures} per op)")
        shown: dict = {}
        for r in sorted(fails, key=lambda r: (r.case.op, _harm_rank(r), _size(r))):
            if shown.get(r.case.op, 0) >= max_failures:
                continue
            shown[r.case.op] = shown.get(r.case.op, 0) + 1
            rep = ""
            if r.replay is not None:
                rep = (" [crashed as the first case of a fresh worker: alone]" if r.replay.get("alone") else
                       " [crash confirmed on replay]" if r.replay["confirmed"] else
                       " [first attempt hung; verdict of the replay]" if r.replay.get("flaky") else
                       " [NOT reproduced on replay]")
            if getattr(r, "ran_by", None) == "native":
                rep += " [ran natively]"
            out.append(f"  {r.verdict.status:<9} {r.case.id}{rep}")
            out.append(f"            {r.verdict.detail.splitlines()[0][:220] if r.verdict.detail else r.verdict.reason}")
            if r.repro:
                out.append(f"            repro: {r.repro}")
        out.append("")
    kn = [r for r in results if r.verdict.status == "known"]
    if kn:
        from .known import KNOWN

        names = sorted({r.known for r in kn})
        out.append("Known upstream issues (not counted as failures; repro scripts written)")
        for k in KNOWN:
            if k.name in names:
                n = sum(1 for r in kn if r.known == k.name)
                out.append(f"  {k.name}: {n} case(s): {k.summary}")
        out.append("")
    if meta.get("timing"):  # the time profile (timing.py): where the wall time went
        from . import timing

        out += timing.text(meta["timing"]) + [""]
    verdict = "FAIL" if info["counts"]["failed"] else "PASS"
    kn = info["counts"].get("known", 0)
    not_run = sum(1 for r in results if r.verdict.status == "native" and r.verdict.reason == "not-run")
    ran = info["counts"].get("native", 0) - not_run
    out.append(f"{verdict}: {info['counts']['failed']} failing case(s) of {info['counts']['cases']}"
               + (f" ({kn} known upstream issue case(s) not counted)" if kn else "")
               + (f"; {not_run} case(s) of variants the backend does not register not run"
                  if not_run else "")
               + (f"; {ran} passing case(s) ran natively, not the backend's" if ran else "")
               + (f"; repro scripts in {meta['repro_dir']}" if meta.get("repro_dir") and meta.get("repros") else "")
               + (f"; JSON in {meta['json']}" if meta.get("json") else ""))
    return "\n".join(out)


def _harm_rank(r) -> int:
    """Most harmful first (harm.py's order); an auditor error last."""
    h = harm.harm_of(r)
    return harm.ORDER.index(h) if h in harm.ORDER else len(harm.ORDER)


def _size(r) -> int:
    n = 0
    if r.built is not None and hasattr(r.built, "tensors"):
        for v in r.built.tensors.values():
            for t in (v if isinstance(v, list) else [v]):
                if t is not None:
                    n += t.numel()
    return n


def _memory_lines(meta: dict) -> list:
    """The header's memory and oracle lines: what a case's storage checks could see."""
    m, out = meta.get("memory"), []
    if m and m["mode"] == "margin":
        out.append("memory: poisoned margins: each storage sits between 0xA5 margins compared "
                   "after the call (a write past a storage is found; a read there returns poison)"
                   + (f"; no guard pages: {m['why_no_guard']}" if m.get("why_no_guard") else ""))
    elif m and m["mode"] == "guard":
        out.append("memory: guard pages: each storage ends where inaccessible memory begins")
    elif m:
        out.append("memory: plain storages (--guard: guard pages; --margin: poisoned margins)")
    if meta.get("oracle"):
        out.append(f"oracle: {meta['oracle']} (every case, unless its line names another)")
    return out


def to_json(results, info: dict, meta: dict) -> dict:
    def case_json(r):
        d = {"id": r.case.id, "op": r.case.op, "variant": r.case.variant,
             "layout_class": layout_of(r.case), "rank": r.case.rank, "dtype": r.case.dtype,
             "index_dtype": r.case.idx_dtype, "kind": r.case.kind,
             "status": r.verdict.status, "reason": r.verdict.reason, "detail": r.verdict.detail,
             "seconds": round(r.seconds, 4)}
        if r.verdict.mismatch:
            d["mismatch"] = r.verdict.mismatch
        if r.replay is not None:
            d["replay"] = r.replay
        if r.known:
            d["known_issue"] = r.known
        if r.exc:
            d["exception"] = r.exc
        if r.repro:
            d["repro"] = r.repro
        if getattr(r, "ran_by", None):
            d["ran_by"] = r.ran_by
        if getattr(r, "oracle", None):
            d["oracle"] = r.oracle  # what the verdict rests on, when not the usual
        if getattr(r, "grad", None):
            d["grad"] = r.grad  # the backward's own verdict (--grad)
        if getattr(r, "worker", None):
            d["worker"] = r.worker  # [slot, pid]
        if getattr(r, "timing", None):
            d["timing"] = {k: round(v, 5) for k, v in r.timing.items()}
        if r.built is not None and hasattr(r.built, "tensors"):
            d["operands"] = {n: _describe(v) for n, v in r.built.tensors.items()}
            d["scalars"] = {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
                            for k, v in r.built.scalars.items()}
        return d

    fails = [r for r in results if r.verdict.status not in ("pass", "skip", "unsupported", "native")]
    return {
        "schema": SCHEMA,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "argv": meta.get("argv"),
        "device": meta["device"],
        "device_name": meta.get("device_name"),
        "backend": meta.get("backend"),
        "backend_info": meta.get("backend_info"),
        "guard": meta["guard"],
        **({"memory": meta["memory"]} if meta.get("memory") else {}),
        **({"oracle": meta["oracle"]} if meta.get("oracle") else {}),
        "matrix": meta["matrix"],
        "seed": meta["seed"],
        "tolerance": meta.get("tolerance"),
        "sanitizer": meta.get("sanitizer"),  # compute-sanitizer tool ($STRIDEWISE_SANITIZER) or None
        "started": meta.get("started"),
        "seconds": round(meta["seconds"], 2),
        "summary": dict(info["counts"], exit_status=1 if info["counts"]["failed"] else 0),
        "ops": {op: {"counts": v["counts"], "by_layout": v["by_layout"],
                     "diagnosis": [d.to_json() for d in v["diagnosis"]],
                     "harm": harm.to_json(v["harm"])}
                for op, v in info["ops"].items()},
        "diagnosis": [d.to_json() for d in info["diagnosis"]],
        "coverage": coverage_json(results, meta),
        "timing": meta.get("timing") or {},
        "repro_dir": meta.get("repro_dir"),
        "failures": [case_json(r) for r in fails],
        "cases": [[r.case.id, r.verdict.status] for r in results],
        **({"backward": backward_json(results)} if meta.get("grad") else {}),
    }


def coverage_json(results, meta: dict) -> dict:
    """{op: {variant: {"ran_by", "overloads"[, "via"]}}} for the ops and variants of the run
    (variant "large": the --large probe's own call) when a backend was audited; else {}."""
    cov = (meta.get("coverage") or {}).get("ops") or {}
    if not cov:
        return {}
    out: dict = {}
    for r in results:
        vs = out.setdefault(r.case.op, {})
        if r.case.kind == "large":
            if "large" not in vs:
                from .coverage import overloads
                from .large import call_of

                vs["large"] = {"ran_by": getattr(r, "ran_by", None),
                               "overloads": overloads(call_of(r.case.op))}
        elif r.case.variant not in vs and r.case.variant in cov.get(r.case.op, {}):
            vs[r.case.variant] = cov[r.case.op][r.case.variant]
    return {op: vs for op, vs in out.items() if vs}


def _backward_names(e: dict) -> str:
    """--grad: the overloads a variant's backward runs, each marked by who runs it."""
    b = e.get("backward")
    if not b or not b.get("overloads"):
        return ""
    mine = set(b.get("backend") or [])
    return "; backward: " + ", ".join(f"{q} [{'backend' if q in mine else 'native'}]"
                                       for q in b["overloads"])


def coverage_text(results, meta: dict) -> list:
    """The Coverage section (a backend was audited): per op, who ran each variant."""
    cov = coverage_json(results, meta)
    if not cov:
        return []
    keys = (meta.get("coverage") or {}).get("keys") or []
    out = [f"Coverage (who ran each variant, from the dispatcher's kernels for "
           f"{'/'.join(keys) or meta['device']} before and after the backend's enable; "
           f"composite: decomposes into ops the backend runs; backward: the backend runs only "
           f"its backward)"]
    width = max(len(op) for op in cov)
    run = total = 0
    for op, vs in cov.items():
        parts = []
        for v in ("func", "inplace", "out", "large"):
            e = vs.get(v)
            if e is None:
                continue
            total += 1
            run += e.get("ran_by") in ("backend", "composite", "backward")
            names = ", ".join(e.get("overloads", []))
            if e.get("via"):
                names += " -> " + ", ".join(e["via"])
            parts.append(f"{v}: {e.get('ran_by')} ({names}{_backward_names(e)})")
        out.append(f"  {op.ljust(width)}  " + "  ".join(parts))
    skipped = sum(1 for r in results if r.verdict.status == "native" and r.verdict.reason == "not-run")
    native = sum(1 for r in results if r.verdict.status == "native") - skipped
    bad = sum(1 for r in results if getattr(r, "ran_by", None) == "native"
              and r.verdict.status in FAILING + ("error", "device-assert"))
    out.append(f"  the backend runs {run} of {total} op variants"
               + (f"; {skipped} case(s) of the others were not run (native ATen would run them; "
                  f"--run-native runs them)" if skipped else "")
               + (f"; {native} passing case(s) ran natively and are not counted as its passes"
                  if native or not skipped else "")
               + (f"; {bad} native-run case(s) did not pass: they stay in the counts, marked "
                  f"[ran natively] (ATen's own, or a native kernel calling into the backend)"
                  if bad else ""))
    return out + [""]


def _describe(v):
    if isinstance(v, list):
        return [None if t is None else _describe(t) for t in v]
    return {"shape": list(v.shape), "stride": list(v.stride()), "storage_offset": v.storage_offset(),
            "dtype": str(v.dtype).replace("torch.", ""), "contiguous": v.is_contiguous()}


# --------------------------------------------------------------------------------------------
# --grad (grad.py): the backward verdicts


def backward_json(results) -> dict:
    """{"counts": {status: n}, "cases": [[id, status, reason, upstream layout, [backward ops]]]}
    for every case whose backward was judged (a failing one is also its case's verdict)."""
    from .grad import shown_ops

    judged = [r for r in results if getattr(r, "grad", None)]
    counts: dict = {}
    for r in judged:
        counts[r.grad["status"]] = counts.get(r.grad["status"], 0) + 1
    return {"counts": counts,
            "cases": [[r.case.id, r.grad["status"], r.grad.get("reason") or "",
                       r.grad.get("upstream"), shown_ops(r.grad.get("ops") or [])] for r in judged]}


def backward_text(results, meta: dict) -> list:
    """The Backward section (--grad): how many backwards were judged and how they went, and
    the aten ops the backwards ran, per op."""
    if not meta.get("grad"):
        return []
    from .grad import shown_ops

    b = backward_json(results)
    c = b["counts"]
    fail = sum(c.get(s, 0) for s in FAILING)
    out = [f"Backward (--grad: func variant, floating dtypes, forward passed): {sum(c.values())} "
           f"case(s) judged: {c.get('pass', 0)} pass, {fail} fail"
           + (f", {c['skip']} not compared (native's own backward raises)" if c.get("skip") else "")]
    per: dict = {}
    for r in results:
        if getattr(r, "grad", None):
            ops = per.setdefault(r.case.op, {})
            for q in shown_ops(r.grad.get("ops") or []):
                ops[q] = ops.get(q, 0) + 1
    width = max((len(op) for op in per), default=0)
    for op, ops in per.items():
        out.append(f"  {op.ljust(width)}  backward ran " + ", ".join(ops) if ops else
                   f"  {op.ljust(width)}  (no backward op recorded)")
    return out + [""]
