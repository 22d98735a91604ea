"""Failures ordered by harm, and spurious errors grouped by what they say.

A kernel author reads the worst first: a crash, then wrong values (or writes outside the
view), inputs modified, missing errors, spurious errors (raised where native ATen computes),
device asserts. Spurious errors come in a few distinct messages, each raised on many cases
(``KeyError: 'complex128'`` on every complex128 case): they are grouped by exception type and
message, with numbers, quoted names and shapes normalised, so that one line stands for each
distinct bug; each group is diagnosed on its own (explain.py), so its predicate says what
the cases share ("when the dtype is complex128"), and a noisy group never hides the wrong
values beside it.
"""
from __future__ import annotations

import re

from . import explain
from .features import predicates

# (class, title, (status, reasons or None for any reason))
CLASSES = (
    ("crash", "crashes", ("crash", None)),
    ("wrong", "wrong values or writes outside the view", ("wrong", None)),
    # --grad (grad.py): anything wrong in backward (wrong, missing or extra gradients, an error
    # or a crash in backward) after a forward that passed; matched by reason (backward-*)
    ("backward", "wrong gradients or failures in backward", (None, None)),
    ("input-modified", "inputs modified", ("wrong", ("input-modified",))),
    ("missing-error", "missing errors", ("bad-error", ("missing-error", "error-type"))),
    ("spurious-error", "spurious errors (raised where native ATen computes)",
     ("bad-error", ("spurious-error",))),
    ("device-assert", "device asserts", ("device-assert", None)),
)
ORDER = tuple(c for c, _, _ in CLASSES)
TITLE = {c: t for c, t, _ in CLASSES}
_PREFIX = "raised where native CPU does not: "


# Matchers naming reasons first: an input-modified "wrong" is its own class.
_MATCH = sorted(((cls, m) for cls, _, m in CLASSES), key=lambda x: x[1][1] is None)


def harm_of(r):
    """The harm class of a result, or None when it does not fail."""
    st, reason = r.verdict.status, r.verdict.reason
    if st in ("wrong", "crash", "bad-error") and (reason or "").startswith("backward"):
        return "backward"
    for cls, (status, reasons) in _MATCH:
        if st == status and (reasons is None or reason in reasons):
            return cls
    return None


def normalise(msg: str) -> str:
    """One line of an error message with its case-specific parts replaced: quoted names and
    dtypes stay (they name the cause: 'complex128'), numbers become N, bracketed shapes
    [..] / (..) of numbers become [..]."""
    line = (msg or "").strip().splitlines()[0] if (msg or "").strip() else ""
    line = re.sub(r"[\[(]\s*-?\d+(\s*,\s*-?\d+)*\s*,?\s*[\])]", "[..]", line)
    line = re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?(?![\w.])", "N", line)
    line = re.sub(r"0x[0-9a-fA-F]+", "0x..", line)
    return line[:200]


def error_of(r) -> tuple:
    """(exception type, normalised message) of a spurious error."""
    text = getattr(r, "exc", None) or r.verdict.detail or ""
    if text.startswith(_PREFIX):
        text = text[len(_PREFIX):]
    typ, sep, msg = text.partition(": ")
    if not sep or not re.fullmatch(r"[A-Za-z_][\w.]*", typ):
        typ, msg = "Exception", text
    return typ, normalise(msg)


_NATIVE = re.compile(r"native(?: CPU| PyTorch)?(?: on \S+)? raises (.*)$", re.S)


def native_error_of(r) -> tuple:
    """(exception type, normalised message) of what native raises for a missing error: the
    check the backend lacks (an index bound, ATen's refusal of a self-overlapping write, ...)."""
    m = _NATIVE.search(r.verdict.detail or "")
    text = (m.group(1) if m else (r.verdict.detail or "")).strip()
    typ, sep, msg = text.partition(": ")
    if not re.fullmatch(r"[A-Za-z_][\w.]*", typ):
        typ, msg = "Exception", text
    return typ, normalise(msg)


# classes split by message: spurious errors by what the backend raised, missing errors by what
# native raises (each message a distinct missing check)
SPLIT = {"spurious-error": error_of, "missing-error": native_error_of}


def groups(results, preds=None) -> list:
    """The failing results of one op by harm class, most harmful first: a list of
    {"class", "title", "cases", "results", "groups", "diagnosis", "why", "example"}; "groups"
    splits the spurious errors by (exception type, normalised message) and the missing errors by
    what native raises, biggest first, each with its own results and diagnosis (explain.diagnose_class: the class's cases against the
    passing ones)."""
    considered = [r for r in results if r.verdict.status not in ("skip", "unsupported", "known")]
    by: dict = {}
    for r in considered:
        h = harm_of(r)
        if h is not None:
            by.setdefault(h, []).append(r)
    if by and preds is None:
        preds = predicates(considered)

    def diagnosed(d: dict, cls: str, rs: list) -> dict:
        dg = explain.diagnose_class("", cls, rs, considered, preds, d)
        d.update(diagnosis=dg, predicate=dg.predicate, example=dg.example,
                 why=dg.text if dg.predicate != "none" else "")
        return d

    out = []
    for cls in ORDER:
        rs = by.get(cls)
        if not rs:
            continue
        g = {"class": cls, "title": TITLE[cls], "cases": len(rs), "results": rs, "groups": []}
        if cls in SPLIT:
            msgs: dict = {}
            for r in rs:
                msgs.setdefault(SPLIT[cls](r), []).append(r)
            for (typ, msg), mrs in sorted(msgs.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                g["groups"].append(diagnosed({"exception": typ, "message": msg, "cases": len(mrs),
                                              "results": mrs}, cls, mrs))
        if cls == "backward":  # the aten ops the failing backwards ran (grad.py), commonest first
            from collections import Counter

            from .grad import shown_ops

            ops = Counter(q for r in rs for q in shown_ops((getattr(r, "grad", None) or {}).get("ops") or []))
            g["backward_ops"] = [q for q, _ in ops.most_common()]
        if cls != "spurious-error":
            diagnosed(g, cls, rs)
        out.append(g)
    return out


def to_json(gs: list) -> list:
    def strip(d):
        return {k: v for k, v in d.items() if k not in ("results", "diagnosis")}

    return [dict(strip(g), groups=[strip(x) for x in g["groups"]]) for g in gs]


def text(op: str, gs: list) -> list:
    """The op's findings, most harmful first: per class its count, an example case and its
    diagnosis (with the other explanations that fit almost as well); spurious errors one line
    per distinct message."""
    if not gs:
        return []
    lines = [f"  {op}"]
    for i, g in enumerate(gs, 1):
        lines.append(f"    {i}. {g['title']}: {g['cases']} case(s)"
                     + (f"  e.g. {g['example']}" if g.get("example") else ""))
        if g.get("backward_ops"):
            lines.append(f"         backward ran {', '.join(g['backward_ops'])}")
        d = g.get("diagnosis")
        if d is not None:
            lines.append(f"         {d.text}")
            if d.alternatives and d.predicate not in ("none", "always"):
                lines.append(f"         also consistent with: {'; '.join(d.alternatives)}")
        subs = g["groups"] if g["class"] == "spurious-error" or len(g["groups"]) > 1 else []
        for x in subs:
            why = x["diagnosis"].phrase if x.get("diagnosis") is not None and x.get("why") else ""
            where = "native raises " if g["class"] == "missing-error" else ""
            lines.append(f"       {x['cases']:>5} x {where}{x['exception']}: {x['message']}")
            lines.append(f"               e.g. {x['example']}" + (f"; {why}" if why else ""))
    return lines
