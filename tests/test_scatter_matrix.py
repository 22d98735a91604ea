"""The scatter family's layout matrix, driven by the auditor's op specs
(python/stridewise/audit/specs/gather_scatter.py) against stridewise, with --guard (every input
storage, and out=, ends at a guard page: one element past what the view addresses faults).

One audit per spec: scatter.src, scatter.value, scatter.reduce, scatter.value_reduce,
scatter_add, scatter_reduce (each reduce, include_self both) and take_along_dim (which runs on
our gather). Each audit must report 0 failures, and stridewise's own counters, collected from
the audit's worker processes, must show that the op ran on stridewise (calls on the device,
not handed back to ATen except where the core has no kernel) with non-contiguous and expanded
operands counted and no copy made.

CPU (CI): the full matrix of each spec (about 10,000 cases for the 7 specs, ~15 s on 2 cores).
CUDA (skipped without a GPU): a sized-down quick matrix (--limit per op, every matrix dimension
met), in stridewise's 'sync' check mode (each call raises its own bad index) and in 'deferred'
mode with the flush call stridewise.check_errors(True) after every call (docs/audit.md).

How the counters are collected: the audit's --backend is a small module written into the
test's tmp dir (STATS_BACKEND below) whose enable() resets stridewise's stats, sets the check
mode and enables every stridewise op, and whose flush() (the audit's --flush, run after every
call that returned) writes the worker's stats to STATS_DIR/<pid>.json, then in deferred mode
raises a pending CUDA error. The stats are summed over the workers.

Seeds: STRIDEWISE_SEED (conftest) picks the audit's --seed, so every run sees fresh data; the
seed is in every failure message.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import BASE_SEED, CUDA_SKIP

from stridewise.audit import cli

# spec -> the stridewise stats entry that counts it
STATS_KEY = {
    "scatter.src": "scatter",
    "scatter.value": "scatter",
    "scatter.reduce": "scatter",
    "scatter.value_reduce": "scatter",
    "scatter_add": "scatter_add",
    "scatter_reduce": "scatter_reduce",
    "take_along_dim": "gather",
}
HAS_SRC = {"scatter.src", "scatter.reduce", "scatter_add", "scatter_reduce"}

STATS_BACKEND = '''\
"""Audit backend for tests/test_scatter_matrix.py: stridewise with its stats written out."""
import json
import os

import stridewise

_DIR = None
_MODE = None


def enable(stats_dir, mode="none"):
    global _DIR, _MODE
    _DIR, _MODE = stats_dir, mode
    stridewise.reset_stats()
    if mode in ("sync", "deferred"):
        stridewise.set_cuda_check_mode(mode)
    return stridewise.enable()


def flush():
    path = os.path.join(_DIR, "%d.json" % os.getpid())
    with open(path + ".tmp", "w") as fh:
        json.dump(stridewise.stats(), fh)
    os.replace(path + ".tmp", path)
    if _MODE == "deferred":
        stridewise.check_errors(True)
'''

FAILING = ("wrong", "crash", "bad-error", "error")


def _why(rep, n=10) -> str:
    if not rep:
        return f"STRIDEWISE_SEED={BASE_SEED}: no report"
    fails = [f for f in rep["failures"] if f["status"] in FAILING]
    lines = [f"STRIDEWISE_SEED={BASE_SEED} device={rep['device']} argv={rep.get('argv')}",
             f"summary={rep['summary']}",
             f"diagnosis={ {op: [d['text'] for d in v['diagnosis']] for op, v in rep['ops'].items()} }"]
    for f in fails[:n]:
        lines.append(f"  {f['status']}/{f['reason']} {f['id']}: {f['detail'][:300]}"
                     + (f" | exception: {f['exception'][:200]}" if f.get("exception") else "")
                     + (f" | repro: {f['repro']}" if f.get("repro") else ""))
    return "\n".join(lines)


def run_audit(tmp_path: Path, op: str, device: str, backend: str, *extra, flush: str | None = None):
    """The audit CLI in-process (as tests/test_audit.py runs it); returns (rc, JSON report)."""
    out = tmp_path / f"a{len(list(tmp_path.glob('a*')))}"
    out.mkdir()
    argv = ["--device", device, "--ops", op, "--backend", backend, "--guard",
            "--json", str(out / "r.json"), "--repro-dir", str(out / "repro"),
            "--no-progress", "-q", "--seed", str(BASE_SEED % 1_000_000), *map(str, extra)]
    if flush:
        argv += ["--flush", flush]
    rc = cli.main(argv)
    rep = json.loads((out / "r.json").read_text()) if (out / "r.json").exists() else None
    assert rep is not None, f"STRIDEWISE_SEED={BASE_SEED}: audit exit {rc} and no report for {argv}"
    return rc, rep


def stridewise_backend(tmp_path: Path, mode: str = "none"):
    """(--backend, --flush, stats dir) for the stats-collecting stridewise backend."""
    mod = tmp_path / "sw_stats_backend.py"
    mod.write_text(STATS_BACKEND)
    stats = tmp_path / "stats"
    stats.mkdir(exist_ok=True)
    return f"{mod}:enable({stats},{mode})", f"{mod}:flush", stats


def summed_stats(stats_dir: Path) -> dict:
    total: dict = {}
    files = sorted(stats_dir.glob("*.json"))
    for f in files:
        for op, counters in json.loads(f.read_text()).items():
            t = total.setdefault(op, {})
            for k, v in counters.items():
                if isinstance(v, dict):  # fallback_reasons: summed per rule
                    sub = t.setdefault(k, {})
                    for r, n in v.items():
                        sub[r] = sub.get(r, 0) + n
                else:
                    t[k] = t.get(k, 0) + v
    return total


def check_stats(op: str, device: str, st: dict, rep, errors_counted: bool = True) -> list:
    """What the counters must show after the audit of `op` on `device`. `errors_counted`: the
    calls raise their own bad-index errors (CPU, CUDA sync mode); in deferred mode the error is
    raised by check_errors(), outside any call, and no call counts it."""
    key = STATS_KEY[op]
    s = st.get(key)
    if not s:
        return [f"no stridewise stats for {key!r} (workers wrote {sorted(st)}): the op never ran on stridewise"]
    problems = []
    ran = s["calls"] - s.get("fallback", 0)
    passed = rep["ops"][op]["counts"]["pass"]
    want = {
        "calls": 0,
        device: 0,
        "noncontig_index": 0,
        "noncontig_self": 0,
        "noncontig_out": 0,
        "expanded_index": 0,
    }
    if op == "take_along_dim":
        # ATen wraps the index with remainder() before its gather: a fresh contiguous index
        # whatever the layout the caller passed, so only self's and out's layouts reach us
        del want["noncontig_index"], want["expanded_index"]
    if op in HAS_SRC:
        want.update(noncontig_src=0, expanded_src=0)
    for k in want:
        if s.get(k, 0) <= 0:
            problems.append(f"stats[{key!r}][{k!r}] == {s.get(k)}: not counted")
    if s.get("copies", 0) != 0:
        problems.append(f"stats[{key!r}]['copies'] == {s['copies']}: stridewise copied an operand")
    # the calls that reached our kernel (not ATen's, via fallback) are the bulk of the cases
    if ran < 0.5 * passed:
        problems.append(f"only {ran} of {s['calls']} calls ran stridewise's kernel "
                        f"(fallback {s.get('fallback')}), for {passed} passing cases")
    if errors_counted and op != "take_along_dim" and s.get("errors", 0) <= 0:
        problems.append(f"stats[{key!r}]['errors'] == 0: the out-of-range cases never reached stridewise")
    return problems


# --------------------------------------------------------------------------------------------
# CPU: the full matrix


@pytest.mark.parametrize("op", list(STATS_KEY))
def test_cpu_matrix_passes_on_stridewise(sw, tmp_path, op):
    backend, flush, stats_dir = stridewise_backend(tmp_path)
    rc, rep = run_audit(tmp_path, op, "cpu", backend, "--matrix", "full", flush=flush)
    assert rc == 0 and rep["summary"]["failed"] == 0, _why(rep)
    assert rep["summary"]["error"] == 0 and rep["summary"]["crash"] == 0, _why(rep)
    counts = rep["ops"][op]["counts"]
    assert counts["pass"] > 250, (counts, _why(rep))  # real cases ran, not just skips
    assert {"contiguous", "expand", "transpose", "step_slice", "offset", "compound"} <= \
        set(rep["ops"][op]["by_layout"]), _why(rep)
    assert rep["guard"] is True
    st = summed_stats(stats_dir)
    problems = check_stats(op, "cpu", st, rep)
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED} stats={st.get(STATS_KEY[op])}\n" + "\n".join(problems)


def test_take_along_dim_runs_on_our_gather(sw, tmp_path):
    """take_along_dim is composite in ATen (broadcast, remainder() of the index, gather): its
    aten::gather call runs on stridewise when 'gather' is routed, and only then; the broadcast
    (stride-0) self is counted as non-contiguous."""
    import torch

    g = torch.Generator().manual_seed(BASE_SEED)
    x = torch.randn(4, 5, 6, generator=g).transpose(0, 2)  # (6, 5, 4), non-contiguous
    idx = torch.randint(0, 5, (6, 3, 1), generator=g)  # broadcast along the last dim
    want = torch.take_along_dim(x, idx, 1)
    with sw.use(include=["gather"]):
        got = torch.take_along_dim(x, idx, 1)
        flat_idx = torch.randint(0, x.numel(), (7,), generator=g)
        flat = torch.take_along_dim(x.contiguous(), flat_idx)  # dim=None: ATen views self flat
    st = sw.stats()["gather"]
    assert torch.equal(got, want), "take_along_dim under stridewise differs from native"
    assert torch.equal(flat, x.contiguous().view(-1)[flat_idx])
    assert st["calls"] == 2 and st["cpu"] == 2 and st["noncontig_self"] >= 1, st
    sw.reset_stats()
    with sw.use(include=["scatter"]):  # gather not routed: ours does not run
        torch.take_along_dim(x, idx, 1)
    assert sw.stats()["gather"]["calls"] == 0, sw.stats()["gather"]


# --------------------------------------------------------------------------------------------
# CUDA: a sized-down quick matrix in both check modes

CUDA_LIMIT = 150
CUDA_RUN = ("--jobs", "6", "--assert-grace", "5")


@CUDA_SKIP
@pytest.mark.parametrize("mode", ["sync", "deferred"])
@pytest.mark.parametrize("op", list(STATS_KEY))
def test_cuda_matrix_passes_on_stridewise(sw, tmp_path, op, mode):
    backend, flush, stats_dir = stridewise_backend(tmp_path, mode)
    rc, rep = run_audit(tmp_path, op, "cuda", backend, "--matrix", "quick", "--limit", CUDA_LIMIT,
                        *CUDA_RUN, flush=flush)
    assert rc == 0 and rep["summary"]["failed"] == 0, _why(rep)
    # ours never answers a bad index with a device-side assert: every expected error is a
    # catchable one, so no case may be a device assert
    assert rep["summary"]["device-assert"] == 0 and rep["summary"]["error"] == 0, _why(rep)
    assert rep["ops"][op]["counts"]["pass"] > CUDA_LIMIT // 2, _why(rep)
    st = summed_stats(stats_dir)
    problems = check_stats(op, "cuda", st, rep, errors_counted=(mode == "sync"))
    assert not problems, f"STRIDEWISE_SEED={BASE_SEED} stats={st.get(STATS_KEY[op])}\n" + "\n".join(problems)


# --------------------------------------------------------------------------------------------
# planted faults in a scatter kernel: the same audit catches them

PLANTED = Path(__file__).resolve().parent / "planted_backend"
PLANTED_DEVICES = [pytest.param("cpu", id="cpu"),
                   pytest.param("cuda", id="cuda", marks=CUDA_SKIP)]

# kind: (acceptable main-diagnosis predicates, words in it, acceptable failure reasons)
SCATTER_PLANTS = {
    # the index read as contiguous memory: an expanded index is read past its storage, which
    # the guard page turns into a crash in that very case; other layouts give wrong values
    "flat_index": ({"idx.noncontig", "idx.stride0"}, "read as contiguous", None),
    # out= (and the copy of self into it) written as if contiguous
    "out_strides": ({"out.noncontig"}, "strides are ignored", {"outside-view-written", "values"}),
    # self's storage offset ignored when the target offsets are computed
    "offset_ignored": ({"any.offset", "self.offset", "out.offset", "written.offset"}, "storage offset", None),
    # a bad index value silently skipped
    "skip_oob": ({"bad_index"}, "silently ignored", {"missing-error"}),
}


@pytest.mark.parametrize("device", PLANTED_DEVICES)
@pytest.mark.parametrize("kind", list(SCATTER_PLANTS))
def test_planted_scatter_fault_is_caught(tmp_path, device, kind):
    preds, words, reasons = SCATTER_PLANTS[kind]
    extra = ("--matrix", "quick") if device == "cpu" else ("--matrix", "quick", "--ranks", "3,6", *CUDA_RUN)
    rc, rep = run_audit(tmp_path, "scatter_add", device, f"{PLANTED}:enable({kind})", *extra)
    assert rc == 1 and rep["summary"]["failed"] > 0, _why(rep)
    assert rep["summary"]["error"] == 0, _why(rep)
    diag = rep["ops"]["scatter_add"]["diagnosis"]
    # The diagnosis may narrow an accepted predicate further ("any.offset&kind=rand").
    head = diag[0]["predicate"].split("&")[0] if diag else None
    assert diag and head in preds and words in diag[0]["text"], _why(rep)
    if reasons:
        got = {f["reason"] for f in rep["failures"]}
        assert got <= reasons, (got, _why(rep))
    if kind == "flat_index" and device == "cpu":
        # --guard: the flat read of an expanded index crashes in its own case
        crashes = [f for f in rep["failures"] if f["status"] == "crash"]
        assert crashes, _why(rep)
        for f in crashes:
            idx = f["operands"]["idx"]
            assert any(st == 0 and sz > 1 for sz, st in zip(idx["shape"], idx["stride"])), f


def test_planted_none_passes_the_same_audit(tmp_path):
    """The planted engine without a fault passes: the failures above are the faults'. And the
    stats check fails where stridewise did not run (no worker stats, or zero counters)."""
    rc, rep = run_audit(tmp_path, "scatter_add", "cpu", f"{PLANTED}:enable(none)", "--matrix", "quick")
    assert rc == 0 and rep["summary"]["failed"] == 0, _why(rep)
    assert check_stats("scatter_add", "cpu", {}, rep)
    zero = {k: 0 for k in ("calls", "cpu", "noncontig_index", "noncontig_self", "noncontig_out",
                           "expanded_index", "noncontig_src", "expanded_src", "copies", "fallback", "errors")}
    assert len(check_stats("scatter_add", "cpu", {"scatter_add": zero}, rep)) >= 9
    ran_on_aten = dict(zero, calls=900, cpu=900, fallback=900, noncontig_index=1, noncontig_self=1,
                       noncontig_out=1, expanded_index=1, noncontig_src=1, expanded_src=1, errors=1)
    assert any("ran stridewise's kernel" in p for p in check_stats("scatter_add", "cpu", {"scatter_add": ran_on_aten}, rep))
