"""--verify-repros: every finding of the report replayed alone, and passed by native PyTorch.

A kernel author acts on the report only if each finding holds up outside the audit. So for
every distinct finding -- one harm group of an op (harm.py), and each message group of its
spurious errors -- the auditor takes a representative (the group's smallest case, a crash
confirmed on replay first) and runs its repro script (repro.py) in a fresh process twice:

- with the backend: the script must reproduce the finding: exit 1 printing "FAIL
  (reproduced)", or for a crash a signal / exit 3 (EXIT_DEVICE_CRASH) / a hang;
- with ``--native`` (same script, same device, backend not enabled): native PyTorch must pass
  it, exit 0.

A finding that does not reproduce, or whose script native PyTorch fails, is an auditor bug (a
repro writer that drops part of an operand, an oracle that disagrees with native): the report
says so loudly and the audit exits 1. Device asserts (native raises there too) are not
failures and are not replayed. ``--verify-repros-from REPORT.json`` re-runs the check from the
representatives a report recorded (JSON ``repro_check``).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# harm classes (harm.py) that fail a backend: each of their groups is a finding to replay
REPLAYED = ("crash", "wrong", "backward", "input-modified", "missing-error", "spurious-error")
TIMEOUT = 120.0
TITLE = "Findings, each replayed alone"


# -- which findings, and which case stands for each -------------------------------------------

def _key(r, order):
    from .report import _size

    unconfirmed = r.verdict.status == "crash" and not (r.replay or {}).get("confirmed")
    return (unconfirmed, hasattr(r.built, "repro_source"), _size(r), order)


CANDIDATES = 3  # cases tried per finding, until one holds up
AFTER_OTHERS = ("not reproduced alone, as the report says: the audit's replay alone did not crash "
                "either; it crashed after other cases of its worker (memory corrupted by one of "
                "them?): rerun with --guard, which faults at the first write past a storage "
                "(on a device without guard pages, --margin finds writes past a storage)")


def candidates(results, n: int = CANDIDATES) -> list:
    """The results that may stand for a finding, best first: the smallest case with operands
    (those get a repro script), a crash confirmed on replay before one that was not, a
    small-shape case before a >2**31-element probe; then the next ones that differ from those
    already taken in kind, variant, dtype or parameters (a finding's smallest case may meet a
    limit of native PyTorch on the device, e.g. ATen CUDA's unimplemented complex multiply
    reduction: another case of the same finding then shows it)."""
    ranked = [r for r, _ in sorted(((r, k) for k, r in enumerate(results) if r.built is not None),
                                   key=lambda x: _key(*x))]
    out, seen = [], set()
    for r in ranked:
        c = r.case
        sig = (c.kind, c.variant, c.dtype, c.params)
        if sig in seen:
            continue
        seen.add(sig)
        out.append(r)
        if len(out) == n:
            break
    return out


def representative(results):
    """The best of :func:`candidates` (None when no case has operands)."""
    cands = candidates(results, 1)
    return cands[0] if cands else None


def _first_line(text: str, n: int = 140) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= n else line[:n - 3] + "..."


def findings(info: dict) -> list:
    """The distinct findings of ``report.analyse``'s info, each a dict: op, class, message,
    cases, result (the representative) and example (its case id)."""
    out = []
    for op, v in info["ops"].items():
        for g in v.get("harm", ()):
            if g["class"] not in REPLAYED:
                continue
            from .diagnose import subgroups

            for x in subgroups(g):
                cands = candidates(x["results"])
                r = cands[0] if cands else None
                if x is g:
                    msg = _first_line(r.verdict.detail or r.verdict.reason) if r else g["title"]
                elif g["class"] == "missing-error":
                    msg = _first_line(f"no error where native raises {x['exception']}: {x['message']}")
                else:
                    msg = _first_line(f"{x['exception']}: {x['message']}")
                # a crash the audit's own replay could not repeat alone (every case of it): the
                # report already says it needed the cases run before it
                after = g["class"] == "crash" and all(
                    (y.replay or {}).get("confirmed") is False for y in x["results"])
                out.append({"op": op, "class": g["class"], "message": msg, "cases": len(x["results"]),
                            "result": r, "candidates": cands, "after_others": after,
                            "example": r.case.id if r else x.get("example")})
    return out


# -- running the scripts ----------------------------------------------------------------------

def _run(script: str, device: str, native: bool, timeout: float) -> dict:
    argv = [sys.executable, script, device] + (["--native"] if native else [])
    t0 = time.time()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        rc, out, err, hung = p.returncode, p.stdout, p.stderr, False
    except subprocess.TimeoutExpired as e:
        dec = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")  # noqa: E731
        rc, out, err, hung = None, dec(e.stdout), dec(e.stderr), True
    except OSError as e:
        rc, out, err, hung = None, "", f"{type(e).__name__}: {e}", False
    return {"exit": rc, "timed_out": hung, "seconds": round(time.time() - t0, 2),
            "stdout_tail": out[-1500:], "stderr_tail": err[-1500:]}


def _how(run: dict) -> str:
    if run["timed_out"]:
        return f"timed out after {run['seconds']:.0f}s"
    rc = run["exit"]
    if rc is None:
        return "could not start: " + _first_line(run["stderr_tail"])
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit {rc}"


def reproduces(cls: str, run: dict) -> bool:
    """Whether the run with the backend reproduces a finding of harm class ``cls``: exit 1 with
    the script's "FAIL (reproduced)"; for a crash, a signal, exit 3 ("CRASH (reproduced)", a
    sticky device error) or a hang."""
    from .repro import EXIT_DEVICE_CRASH

    rc, out = run["exit"], run["stdout_tail"]
    if cls == "crash":
        return run["timed_out"] or (rc is not None and rc < 0) or (
            rc == EXIT_DEVICE_CRASH and "CRASH (reproduced)" in out)
    return rc == 1 and "FAIL (reproduced)" in out


def _why_not(cls: str, run: dict) -> str:
    rc = run["exit"]
    if rc == 0:
        return "the script passes: the failure does not reproduce alone"
    if rc == 2 or "ERROR: this script failed" in run["stdout_tail"]:
        return "the script itself failed: " + (_last_line(run["stderr_tail"]) or _last_line(run["stdout_tail"]))
    if cls == "crash":
        return f"a crash was found, the script gave {_how(run)}: " + _last_line(run["stdout_tail"])
    if rc == 1:
        return "exit 1 without 'FAIL (reproduced)': " + (_last_line(run["stderr_tail"]) or _last_line(run["stdout_tail"]))
    return f"{_how(run)} where a {cls} finding was expected: " + (
        _last_line(run["stdout_tail"]) or _last_line(run["stderr_tail"]))


def _last_line(text: str) -> str:
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return _first_line(lines[-1], 220) if lines else ""


def check(items: list, jobs: int = 1, timeout: float = TIMEOUT) -> list:
    """:func:`check_one_each` over each item's candidate scripts (``scripts``, else its
    ``script``), in rounds: a finding that does not hold up with its first script is tried with
    the next, up to CANDIDATES. The check keeps the first script that holds up (or the first
    one tried) and lists every script tried ("tried": [{example, script, outcome}])."""
    def scripts(it):
        return [x for x in (it.get("scripts") or [{"script": it.get("script"), "example": it.get("example")}])
                if x.get("script")]

    final: dict = {}
    tried: dict = {i: [] for i in range(len(items))}
    todo = list(range(len(items)))
    for k in range(CANDIDATES):
        batch = [i for i in todo if k < len(scripts(items[i])) or (k == 0)]
        if not batch:
            break
        subs = []
        for i in batch:
            sc = scripts(items[i])
            x = sc[k] if k < len(sc) else {"script": None, "example": items[i].get("example")}
            subs.append(dict(items[i], script=x["script"], example=x["example"]))
        for i, c in zip(batch, check_one_each(subs, jobs, timeout)):
            tried[i].append({"example": c["example"], "script": c["script"], "outcome": c["outcome"]})
            if i not in final or c["ok"]:
                final[i] = c
        todo = [i for i in batch if not final[i]["ok"]]
    out = []
    for i in range(len(items)):
        c = final[i]
        if len(tried[i]) > 1:
            c["tried"] = tried[i]
            if c["ok"]:
                c["why"] = [f"held up with case {len(tried[i])} of {len(tried[i])} tried; before it: "
                            + "; ".join(f"{t['example']}: {t['outcome']}" for t in tried[i][:-1])]
        out.append(c)
    return out


def check_one_each(items: list, jobs: int = 1, timeout: float = TIMEOUT) -> list:
    """Run each finding's script (``items``: dicts with op, class, message, cases, example,
    script, device) with the backend and with --native, up to ``jobs`` processes at once.
    Returns the JSON-able checks: the item plus "backend" and "native" (exit, how, tails),
    "outcome" ('reproduces', 'does not reproduce', 'native fails', both joined by '; ', or
    'no script') and "ok"."""
    todo = [(i, native) for i, it in enumerate(items) if it.get("script") and os.path.exists(it["script"])
            for native in (False, True)]
    runs: dict = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        futs = {(i, native): ex.submit(_run, items[i]["script"], items[i]["device"], native, timeout)
                for i, native in todo}
        for k, f in futs.items():
            runs[k] = f.result()
    out = []
    for i, it in enumerate(items):
        c = {k: it.get(k) for k in ("op", "class", "message", "cases", "example", "script", "device",
                                    "scripts", "after_others")}
        if (i, False) not in runs:
            c.update(outcome="no script", ok=False, backend=None, native=None,
                     why=("no repro script was written for this finding" if not it.get("script")
                          else f"the repro script {it['script']} is missing"))
            out.append(c)
            continue
        b, n = runs[i, False], runs[i, True]
        b["how"], n["how"] = _how(b), _how(n)
        b["reproduces"] = reproduces(it["class"], b)
        n["passes"] = n["exit"] == 0 and not n["timed_out"]
        bad = ([] if b["reproduces"] else ["does not reproduce"]) + ([] if n["passes"] else ["native fails"])
        why = ([] if b["reproduces"] else [f"with the backend: {_why_not(it['class'], b)}"]) + (
            [] if n["passes"] else [f"native PyTorch ({n['how']}): " + (
                _last_line(n["stdout_tail"]) or _last_line(n["stderr_tail"]))])
        if bad == ["does not reproduce"] and it.get("after_others"):
            # what the report said: it crashed only after other cases of the same worker (memory
            # corrupted by one of them). Not the report's error; not a finding one script shows.
            bad, why = [], [AFTER_OTHERS]
            c["outcome_note"] = "crashed only after other cases"
        c.update(outcome="; ".join(bad) or c.get("outcome_note") or "reproduces", ok=not bad,
                 backend=b, native=n, why=why)
        out.append(c)
    return out


def run_findings(found: list, device: str, jobs: int = 1, timeout: float = TIMEOUT) -> list:
    """check() the findings of :func:`findings` (their representatives' scripts: r.repro)."""
    def script(r):
        path = getattr(r, "repro", None) if r is not None else None
        return os.path.abspath(path) if path else None  # absolute: --verify-repros-from runs anywhere

    items = [dict({k: f[k] for k in ("op", "class", "message", "cases", "example", "after_others")},
                  script=script(f["result"]), device=device,
                  scripts=[{"script": script(r), "example": r.case.id}
                           for r in f.get("candidates") or ([f["result"]] if f["result"] else [])
                           if script(r)]) for f in found]
    return check(items, jobs, timeout)


def failed(checks) -> list:
    return [c for c in checks or () if not c["ok"]]


# -- the report -------------------------------------------------------------------------------

def text(checks: list) -> list:
    """The report section "Findings, each replayed alone" (lines)."""
    if not checks:
        return [f"{TITLE}: no findings to replay", ""]
    lines = [f"{TITLE} (each finding's smallest case: its repro script in a fresh process, with "
             "the backend, then with --native)"]
    for c in checks:
        if c["outcome"] == "no script":
            res = "with backend: NOT RUN  native: NOT RUN  (no script)"
        else:
            b, n = c["backend"], c["native"]
            said = ("NOT reproduced" if not c.get("outcome_note") else
                    f"not alone; {c['outcome']}" if c.get("sequence") else "not reproduced, as reported")
            res = (f"with backend: {'reproduces' if b['reproduces'] else said} ({b['how']})  "
                   f"native: {'passes' if n['passes'] else 'FAILS'} ({n['how']})")
        lines.append(f"  {c['op']}  {c['class']}: {c['message']}  (e.g. {c['example']}; "
                     f"{c['cases']} case(s))  {res}  {c['script'] or '-'}")
        for w in ([c["why"]] if isinstance(c.get("why"), str) else c.get("why") or []):
            lines.append(f"        {w}")
    bad = failed(checks)
    if bad:
        lines.append(f"  AUDITOR BUG: {len(bad)} of {len(checks)} finding(s) do not hold up alone "
                     f"({', '.join(sorted({c['outcome'] for c in bad}))}): the report is wrong about "
                     "them, not the kernel -- fix the auditor (repro.py, the oracle), not the backend")
    else:
        after = sum(1 for c in checks if c.get("outcome_note"))
        lines.append(f"  all {len(checks)} finding(s) hold up and native PyTorch passes each script"
                     + (f": {len(checks) - after} reproduce alone, {after} only after other cases of "
                        "their worker (not shown by one script; sequences below when found)"
                        if after else "; each reproduces alone"))
    return lines + [""]


def verdict_suffix(checks) -> str:
    bad = failed(checks)
    return (f"; AUDITOR BUG: {len(bad)} finding(s) not reproduced alone or failed by native "
            f"PyTorch (see '{TITLE}')") if bad else ""


# -- --verify-repros-from REPORT.json ---------------------------------------------------------

def from_json(path: str, jobs: int = 1, timeout: float = TIMEOUT, quiet: bool = False) -> int:
    """Re-run the check of a JSON report written with --verify-repros; print the section.
    Exit status: 0 every finding reproduces and passes native, 1 not, 2 no such report."""
    from .. import schemas

    try:
        with open(path) as fh:
            rep = json.load(fh)
        # the report's structure (schema stridewise-audit/1, repro_check included): the shipped
        # JSON Schema, stridewise/schemas/audit_report.schema.json
        schemas.validate(rep, schemas.AUDIT_REPORT, path)
    except schemas.SchemaError as e:
        print(f"stridewise audit: error: --verify-repros-from: not a stridewise audit report: {e}",
              file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"stridewise audit: error: --verify-repros-from {path}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 2
    recorded = rep.get("repro_check")
    if recorded is None:
        print(f"stridewise audit: error: --verify-repros-from {path}: the report records no "
              "findings' scripts (key 'repro_check'): write it with --verify-repros --json",
              file=sys.stderr)
        return 2
    # the script that held up (or was tried first) is the recorded evidence: re-run that one
    items = [dict({k: v for k, v in c.items() if k not in ("scripts", "tried")},
                  device=c.get("device") or rep.get("device") or "cpu") for c in recorded]
    checks = check(items, jobs, timeout)
    lines = text(checks)
    bad = failed(checks)
    verdict = (f"{'FAIL' if bad else 'PASS'}: {len(checks) - len(bad)} of {len(checks)} finding(s) of "
               f"{path} reproduce alone and pass native PyTorch" + verdict_suffix(checks))
    print(verdict if quiet else "\n".join(lines + [verdict]))
    return 1 if bad else 0
