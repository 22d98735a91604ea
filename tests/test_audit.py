"""The auditor (python -m stridewise audit), tested against native ATen and a planted backend.

- native ATen passes the quick matrix of the whole family (CPU; CUDA when present)
- every planted fault (tests/planted_backend) is caught, with the right diagnosis
- --guard turns the flat index reader into a crash attributed to its case (confirmed on replay)
- the JSON report's schema, exit codes, case-id round trips, repro scripts that reproduce
- each check is seen failing on a planted fault (values, tolerance, inputs modified, writes
  outside the view, missing error, spurious error, crash)

Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from conftest import PYDIR, ROOT  # noqa: E402  (the installed package or python/)
PLANTED = ROOT / "tests" / "planted_backend"
STANDALONE = PYDIR / "stridewise" / "audit" / "standalone.py"

# conftest.py stands a namespace package in for stridewise when its native library does not
# load: the auditor needs only torch

from stridewise import schemas  # noqa: E402
from stridewise.audit import cli, gen, matrix  # noqa: E402
from stridewise.audit.caseid import parse_case_id  # noqa: E402
from stridewise.audit.specs import SPECS  # noqa: E402
from stridewise.audit.worker import classify_error  # noqa: E402

SEED = int(os.environ.get("STRIDEWISE_SEED") or random.SystemRandom().randrange(1, 10**6)) % 10**6
HAVE_CUDA = torch.cuda.is_available()
DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA"))]


def planted(kind: str) -> str:
    return f"{PLANTED}:enable({kind})"


def audit(tmp_path, *args, seed=SEED):
    """Run the CLI in-process; returns (exit status, JSON report, repro dir)."""
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    argv = [*map(str, args), "--json", str(out / "r.json"), "--repro-dir", str(out / "repro"),
            "--no-progress", "--seed", str(seed), "-q"]
    rc = cli.main(argv)
    rep = json.loads((out / "r.json").read_text()) if (out / "r.json").exists() else None
    assert rep is not None, (f"STRIDEWISE_SEED={SEED}: audit exit status {rc} and no JSON report (the "
                             f"audit could not run: its reason is in the captured stderr) for {argv}")
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out / "r.json"))  # every report the tests write
    return rc, rep, out / "repro"


# GPU time is scarce: the CUDA variants below run sized-down audits (about 90 s together on an
# H200), each sized for what it proves there; the CPU variants (CI) keep their full matrices.
# A few workers suffice on CUDA (the parent's CPU oracle is the bottleneck, and each worker costs
# a device context); a worker that printed a device-side assertion is dead, 5 s is grace enough.
CUDA_RUN = ("--jobs", "6", "--assert-grace", "5")


def cuda_sized(device) -> bool:
    """Whether the device's variant runs the sized-down audit (every device but the CPU)."""
    return device != "cpu"


def sized(device, cpu=(), cuda=()):
    """Extra audit arguments: ``cpu`` on CPU, ``cuda`` (plus CUDA_RUN) on any other device."""
    return [*cuda, *CUDA_RUN] if cuda_sized(device) else [*cpu]


FAILING = ("wrong", "crash", "bad-error", "error")


def _case_line(f) -> str:
    s = f"  {f['status']}/{f['reason']} {f['id']}: {f['detail'][:400]}"
    if f.get("exception"):
        s += f" | exception: {f['exception'][:300]}"
    if f.get("replay"):
        s += f" | replay: {f['replay']}"
    if f.get("known_issue"):
        s += f" | known: {f['known_issue']}"
    return s


def why(rep, n: int = 12) -> str:
    """Context for assertion messages, enough to tell the cause from one run: seed, device,
    summary, the failing cases grouped by (op, status, reason), diagnoses, then up to ``n``
    failing cases (id, detail, exception, replay), then a few known / device-assert ones."""
    if not rep:
        return f"STRIDEWISE_SEED={SEED}, no report"
    from collections import Counter

    fails = [f for f in rep["failures"] if f["status"] in FAILING]
    other = [f for f in rep["failures"] if f["status"] not in FAILING]
    groups = Counter((f["op"], f["status"], f["reason"]) for f in fails)
    others = Counter((f["op"], f["status"], f["reason"]) for f in other)
    d = {op: [x["text"] for x in v["diagnosis"]] for op, v in rep["ops"].items() if v["diagnosis"]}
    lines = [f"STRIDEWISE_SEED={SEED} device={rep['device']} ({rep.get('device_name')}) "
             f"torch={rep['torch']} backend={rep['backend']} guard={rep['guard']} "
             f"seconds={rep['seconds']} argv={rep.get('argv')}",
             f"summary={rep['summary']}",
             f"failing groups (op, status, reason): {dict(groups.most_common(20))}",
             f"not failing, not passing: {dict(others.most_common(20))}",
             f"diagnosis={d}", f"failing cases ({len(fails)}; the first {min(n, len(fails))}):"]
    lines += [_case_line(f) for f in fails[:n]]
    if other:
        lines.append("known / device-assert cases (a few):")
        lines += [_case_line(f) for f in other[:4]]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# native ATen passes


# CUDA: 60 cases per op, chosen to meet every value of every matrix dimension (layouts of each
# operand, kinds incl. oob/oobneg/oobbig, dtypes, ranks, params): each of ATen CUDA's behaviours
# (device-side asserts, the 32-bit truncation, overlap refusal, upcast oracle) is met, ~1,100
# cases instead of ~11,000 (the 740 device asserts of the full quick matrix cost a worker each).
QUICK_CUDA_LIMIT = 60


@pytest.mark.parametrize("device", DEVICES)
def test_aten_passes_quick_matrix_of_the_whole_family(tmp_path, device):
    rc, rep, _ = audit(tmp_path, "--device", device, "--matrix", "quick",
                       *sized(device, cuda=("--limit", QUICK_CUDA_LIMIT)))
    assert rep["summary"]["failed"] == 0 and rc == 0, why(rep)
    assert set(rep["ops"]) == set(SPECS), why(rep)
    # CPU: the whole quick matrix; CUDA: the limit per op (less what the sampler could not fill)
    min_cases, min_pass = ((0.9 * QUICK_CUDA_LIMIT * len(SPECS), QUICK_CUDA_LIMIT // 2)
                           if cuda_sized(device) else (5000, 100))
    assert rep["summary"]["cases"] > min_cases, why(rep)
    assert rep["summary"]["error"] == 0, why(rep)
    # every op ran every layout class and real cases (not just skips)
    for op, v in rep["ops"].items():
        assert v["counts"]["pass"] > min_pass, (op, v["counts"], why(rep))
        assert {"contiguous", "expand", "transpose", "step_slice", "offset", "compound"} <= set(v["by_layout"]), \
            (op, sorted(v["by_layout"]), why(rep))


@pytest.mark.parametrize("device", DEVICES)
def test_aten_passes_large_probes(tmp_path, device):
    rc, rep, _ = audit(tmp_path, "--device", device, "--large-only", *sized(device))
    assert rc == 0 and rep["summary"]["pass"] == rep["summary"]["cases"] == 12, why(rep)


# --------------------------------------------------------------------------------------------
# planted faults: caught, with the right diagnosis

PLANTS = {
    # kind: (op, acceptable main-diagnosis predicates, words the diagnosis must contain, reasons)
    "flat_index": ("gather", {"idx.noncontig", "idx.stride0"}, "read as contiguous", None),
    "offset_ignored": ("gather", {"self.offset"}, "storage offset of self", {"values"}),
    "out_strides": ("gather", {"out.noncontig"}, "strides are ignored",
                    {"outside-view-written", "values"}),
    "neg_nowrap": ("take", {"kind=neg", "idx.neg"}, "not wrapped", None),
    "skip_oob": ("gather", {"bad_index"}, "silently ignored", {"missing-error"}),
    "rank_limit": ("gather", {"rank>=6"}, "rank limit", None),
    # writing into an expanded input also races, so a case or two may show wrong values instead
    "writes_input": ("scatter_add", {"variant=func"}, "input is modified",
                     {"input-modified", "values"}),
    "out_ignored": ("gather", {"variant=out"}, "", None),
    # float32 is the one lossy dtype the quick matrix accumulates besides complex128
    "lossy_accum": ("scatter_add", {"floating", "dtype=float32"}, "tolerance", {"values"}),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", list(PLANTS))
def test_planted_fault_is_caught_with_the_right_diagnosis(tmp_path, device, kind):
    op, preds, words, reasons = PLANTS[kind]
    # CUDA: ranks 3 and 6 (where the dtype, index-kind and wide sweeps run too): each fault's cases
    # and the passing cases that set its diagnosis apart (rank_limit: rank 6 fails, rank 3 passes);
    # out_strides keeps every rank: about half its non-contiguous out= cases pass by chance, and
    # with fewer of them the diagnosis narrows to "out= non-contiguous and <something>"
    cuda = () if kind == "out_strides" else ("--ranks", "3,6")
    rc, rep, repro = audit(tmp_path, "--device", device, "--ops", op, "--matrix", "quick",
                           "--backend", planted(kind), *sized(device, cuda=cuda))
    assert rc == 1 and rep["summary"]["failed"] > 0, why(rep)
    assert rep["summary"]["error"] == 0, why(rep)
    diag = rep["ops"][op]["diagnosis"]
    # the fault's predicate, possibly narrowed by a conjunction ("... and indices are plain
    # random": duplicate indices read from the wrong place may read the right values)
    assert diag and set(diag[0]["predicate"].split("&")) & preds, why(rep)
    assert words in diag[0]["text"], why(rep)
    # it is about every failure of its harm class (of all failures when one cause explains all)
    # and explains at least 90% of them (diagnose.MAX_EXCEPTIONS)
    head_class = [g for g in rep["ops"][op]["harm"] if g["class"] == diag[0]["class"]]
    assert diag[0]["failing"] == (head_class[0]["cases"] if head_class
                                  else rep["ops"][op]["counts"]["failed"]), why(rep)
    assert diag[0]["explained"] >= 0.9 * diag[0]["failing"], why(rep)
    if reasons:
        assert {f["reason"] for f in rep["failures"] if f["op"] == op} <= reasons, why(rep)
    for f in rep["failures"]:
        assert Path(f["repro"]).is_file(), f


@pytest.mark.parametrize("device", DEVICES)
def test_planted_32bit_overflow_is_caught_by_the_large_probe(tmp_path, device):
    # CUDA: rank 2 only: the small cases only have to pass, the large probe has to fail
    rc, rep, _ = audit(tmp_path, "--device", device, "--ops", "gather", "--matrix", "quick",
                       "--ranks", "2" if cuda_sized(device) else "1,2,3", "--large",
                       "--backend", planted("overflow32"), *sized(device))
    assert rc == 1, why(rep)
    d = rep["ops"]["gather"]["diagnosis"][0]
    assert d["predicate"] == "large" and "2**31" in d["text"], why(rep)
    assert all(f["kind"] == "large" for f in rep["failures"]), why(rep)


TRUNC_TEXT = "out-of-range check done on a truncated 32-bit index (the value wraps into range)"


def test_planted_int32_truncation_is_diagnosed_as_such(tmp_path):
    """truncate32 casts index values to int32 before the bounds check (2**32+1 -> 1): only the
    oobbig cases (int64 indices >= 2**32) fail, as missing errors, and the diagnosis names the
    truncation instead of a rank limit. Native ATen on CPU passes those same cases."""
    ops = ("index_select", "gather")
    rc, rep, _ = audit(tmp_path, "--ops", ",".join(ops), "--matrix", "quick",
                       "--backend", planted("truncate32"))
    assert rc == 1 and rep["summary"]["failed"] > 0 and rep["summary"]["error"] == 0, why(rep)
    assert {f["op"] for f in rep["failures"]} == set(ops), why(rep)
    assert all("/i64/oobbig/" in f["id"] and f["reason"] == "missing-error"
               for f in rep["failures"]), why(rep)
    oobbig = [cid for cid, _ in rep["cases"] if "/oobbig/" in cid]
    assert {cid for cid, st in rep["cases"] if st != "pass"} == {f["id"] for f in rep["failures"]}
    for d in [*rep["diagnosis"], *(rep["ops"][op]["diagnosis"][0] for op in ops)]:
        assert d["predicate"] == "idx.ge32", why(rep)
        assert d["text"].startswith("fails only with index values >= 2**32 (e.g. 42949672"), why(rep)
        assert d["text"].endswith(TRUNC_TEXT) and "rank" not in d["text"], why(rep)
        assert d["failing"] == d["explained"] == d["covered"], why(rep)
    rc, nat, _ = audit(tmp_path, *[a for cid in oobbig for a in ("--case", cid)])
    assert rc == 0 and nat["summary"]["pass"] == len(oobbig) > 0, why(nat)


def test_diagnosis_prefers_a_precise_predicate_over_one_that_merely_covers_every_failure():
    """The H200 report: index_select & co. raise no error for index values >= 2**32 (rank-3
    oobbig cases), plus one unrelated failure elsewhere. "from rank 2 up" holds for every
    failure but for thousands of passing cases; "index values >= 2**32" misses one failure and
    holds for no passing case: the latter must win (and say that one failure is outside it)."""
    from stridewise.audit import diagnose
    from stridewise.audit.oracle import Verdict

    def res(rank, kind, status="pass", reason=""):
        big = kind == "oobbig"
        f = {"rank": rank, "kind": kind, "variant": "func", "dtype": "float32", "idx_dtype": "i64",
             "idx.stride0": False, "idx.noncontig": False, "idx.offset": False, "idx.neg": False,
             "idx.huge": big, "idx.ge32": big, "bad_index": big, "expects_error": big}
        if big:
            f["idx.big"] = 2**32 + 1 + rank
        return types.SimpleNamespace(features=f, verdict=Verdict(status, reason, ""))

    rs = [res(r, "rand") for r in (0, 1) for _ in range(300)]
    rs += [res(r, k) for r in (2, 3, 6) for k in ("rand", "dup", "wide") for _ in range(900)]
    rs += [res(3, "oobbig", "bad-error", "missing-error") for _ in range(36)]
    rs.append(res(6, "dup", "bad-error", "missing-error"))  # a stray failure
    d = diagnose.diagnose("index_select", rs)[0]
    assert d.predicate == "idx.ge32", d.text
    assert d.text.startswith("fails mostly with index values >= 2**32 (e.g. 4294967300) "
                             "(36 of 36 such cases, all of them; 1 other failing case outside it)"), d.text
    assert d.text.endswith(TRUNC_TEXT) and (d.failing, d.explained) == (37, 36), d
    # with no stray failure: the same predicate, exact (and "only")
    d = diagnose.diagnose("index_select", rs[:-1])[0]
    assert d.predicate == "idx.ge32" and d.text.startswith("fails only with"), d.text
    # a stray of another harm class (a spurious error) is diagnosed apart: the missing errors'
    # diagnosis is exact, and the lone spurious error is too few to diagnose
    rs[-1] = res(6, "dup", "bad-error", "spurious-error")
    ds = diagnose.diagnose("index_select", rs)
    assert [d.cls for d in ds] == ["missing-error", "spurious-error"], [d.text for d in ds]
    assert ds[0].predicate == "idx.ge32" and ds[0].text.startswith(
        "raises no (or the wrong) error only with index values >= 2**32"), ds[0].text
    assert ds[0].failing == ds[0].explained == 36 and ds[1].predicate == "none", ds
    # ... and it follows even when its class is the more harmful one (CI seed 39: the planted
    # writes_input fault also left one wrong value where self was expanded): the headline names
    # the class that has a cause
    rs[-1] = res(6, "dup", "wrong", "values")
    ds = diagnose.diagnose("index_select", rs)
    assert [(d.cls, d.predicate) for d in ds] == [("missing-error", "idx.ge32"), ("wrong", "none")], \
        [d.text for d in ds]
    # "from rank 2 up" holds for every failure here, but for nearly every case too: never a cause
    rs = [res(r, k) for r in (0, 1) for k in ("rand",) for _ in range(10)]
    rs += [res(r, k, *(("wrong", "values") if i % 3 == 0 else ("pass", "")))
           for r in (2, 3, 6) for k in ("rand", "dup", "wide") for i in range(300)]
    ds = diagnose.diagnose("gather", rs)
    assert ds[0].predicate == "none" and "no single feature" in ds[0].text, [d.text for d in ds]


def test_missing_errors_split_by_what_native_raises():
    """FlagGems' scatter_add_ (H200): 22 missing overlap refusals and 9 unchecked out-of-range
    indices in one class. Split by what native raises, each missing check gets its own
    diagnosis (and its own repro under --verify-repros)."""
    from stridewise.audit import diagnose, harm
    from stridewise.audit.caseid import parse_case_id
    from stridewise.audit.oracle import Verdict

    over = ("no error raised; native CPU raises RuntimeError: unsupported operation: more than one "
            "element of the written-to tensor refers to a single memory location.")
    oob = "no error raised; native CPU raises RuntimeError: index {} is out of bounds for dimension 0 with size 3"

    def res(k, kind, expanded, detail):
        f = {"rank": 2, "kind": kind, "variant": "inplace", "dtype": "float32", "idx_dtype": "i64",
             "self.stride0": expanded, "self.noncontig": expanded, "bad_index": kind == "oob",
             "expects_error": bool(detail)}
        v = Verdict("bad-error", "missing-error", detail) if detail else Verdict("pass", "", "")
        return types.SimpleNamespace(features=f, verdict=v, exc=None, replay=None,
                                     case=parse_case_id(f"scatter_add/inplace/contig/r2/float32/i64/{kind}/s{k}"))

    rs = [res(k, "rand", True, over) for k in range(22)] + [res(k, "oob", False, oob.format(k + 3))
                                                             for k in range(9)]
    rs += [res(100 + k, "rand", False, "") for k in range(200)]
    (g,) = harm.groups(rs)
    assert g["class"] == "missing-error" and [x["cases"] for x in g["groups"]] == [22, 9], g["groups"]
    assert g["groups"][1]["message"] == "index N is out of bounds for dimension N with size N"
    ds = diagnose.diagnose("scatter_add", rs)
    texts = [d.text for d in ds]
    assert len(ds) == 2 and "self-overlapping" in texts[0] and "out-of-range" in texts[1], texts


def test_failures_of_0_dim_tensors_are_diagnosed_as_such():
    """FlagGems on the H200 raised 'IndexError: list index out of range' (and 3 other
    messages) on every 0-dim case; without a rank-0 predicate the best fit was "indices are
    plain random"."""
    from stridewise.audit import diagnose
    from stridewise.audit.oracle import Verdict

    def res(rank, failing):
        f = {"rank": rank, "kind": "rand", "variant": "func", "dtype": "float32", "idx_dtype": "i64"}
        v = (Verdict("bad-error", "spurious-error", "raised where native CPU does not: IndexError: "
                     "list index out of range") if failing else Verdict("pass", "", ""))
        return types.SimpleNamespace(features=f, verdict=v, exc=None)

    rs = [res(0, True) for _ in range(12)] + [res(r, False) for r in (1, 2, 3, 6) for _ in range(50)]
    d = diagnose.diagnose("scatter.src", rs)[0]
    assert d.predicate == "rank=0" and "0-dim tensors" in d.text, d.text


def test_a_missing_overlap_refusal_is_named_by_what_native_raises():
    """FlagGems' in-place scatter_add/index_add into an expanded self (H200, 2026-12-02): no
    error where ATen refuses the self-overlapping write. The layout predicate (self expanded)
    fits, but what native raises names the missing check, not "self is read as contiguous"."""
    from stridewise.audit import diagnose
    from stridewise.audit.oracle import Verdict

    def res(expanded, failing):
        f = {"rank": 2, "kind": "rand", "variant": "inplace", "dtype": "float32", "idx_dtype": "i64",
             "self.stride0": expanded, "self.noncontig": expanded, "self.offset": False,
             "expects_error": expanded}
        v = (Verdict("bad-error", "missing-error", "no error raised; native CPU raises RuntimeError: "
                     "unsupported operation: more than one element of the written-to tensor refers "
                     "to a single memory location. Please clone()") if failing else Verdict("pass", "", ""))
        return types.SimpleNamespace(features=f, verdict=v)

    rs = [res(True, True) for _ in range(20)] + [res(False, False) for _ in range(200)]
    d = diagnose.diagnose("scatter_add", rs)[0]
    assert d.predicate in ("self.stride0", "self.noncontig", "expects_error"), d.text
    assert "self-overlapping (expanded) tensor is not refused" in d.text, d.text
    assert "read as contiguous" not in d.text, d.text


@pytest.mark.parametrize("device", DEVICES)
def test_correct_python_kernels_pass(tmp_path, device):
    """The planted engine without a fault passes: failures above come from the faults."""
    # CUDA: 80 cases per op meeting every matrix dimension: the engine's CUDA path has no false alarm
    rc, rep, _ = audit(tmp_path, "--device", device, "--ops", "gather,scatter_add,index_select,take",
                       "--matrix", "quick", "--ranks", "0,1,3,6", "--backend", planted("none"),
                       *sized(device, cuda=("--limit", "80")))
    assert rc == 0, why(rep)


@pytest.mark.parametrize("device", DEVICES)
def test_flush_attributes_deferred_errors_to_their_call(tmp_path, device):
    """A backend that reports a bad index after the call (like stridewise's deferred CUDA check
    mode) fails the audit as missing errors; with --flush naming its report call, each error is
    the call's own and the backend passes. Its repro scripts carry the flush call too."""
    args = ("--device", device, "--ops", "gather", "--matrix", "quick", "--ranks", "1,3",
            "--backend", planted("deferred"))
    rc, rep, _ = audit(tmp_path, *args)
    assert rc == 1 and "missing-error" in {f["reason"] for f in rep["failures"]}, why(rep)
    rc, rep, _ = audit(tmp_path, *args, "--flush", f"{PLANTED}:check_errors")
    assert rc == 0 and rep["summary"]["failed"] == 0, why(rep)
    # a repro of a failing case under --flush: the script calls the flush after the op
    rc, rep, repro = audit(tmp_path, *args[:-1], planted("skip_oob"), "--flush", f"{PLANTED}:check_errors")
    assert rc == 1, why(rep)
    text = Path(rep["failures"][0]["repro"]).read_text()
    assert "--flush" in text and "FLUSH()" in text
    r = subprocess.run([sys.executable, rep["failures"][0]["repro"], device], capture_output=True,
                       text=True, timeout=120, env=_plain_env())
    assert r.returncode == 1 and "FAIL (reproduced)" in r.stdout, (r.returncode, r.stdout[-800:], r.stderr[-800:])


# --------------------------------------------------------------------------------------------
# guard pages: the flat reader becomes a crash, attributed to its case


@pytest.mark.parametrize("device", DEVICES)
def test_guard_turns_the_flat_reader_into_an_attributed_crash(tmp_path, device):
    # CUDA: ranks 1-3 as on CPU (~130 cases; every crash costs two fresh workers, run in parallel)
    rc, rep, _ = audit(tmp_path, "--device", device, "--ops", "gather", "--matrix", "quick",
                       "--ranks", "1,2,3", "--variants", "func", "--guard",
                       "--backend", planted("flat_index"), *sized(device))
    assert rc == 1, why(rep)
    assert rep["summary"]["error"] == 0, why(rep)  # e.g. a guard allocation failing in a worker
    crashes = [f for f in rep["failures"] if f["status"] == "crash"]
    assert crashes, why(rep)
    for f in crashes:
        assert f.get("replay") and f["replay"]["confirmed"], (_case_line(f), why(rep))  # crashed again alone
        idx = f["operands"]["idx"]
        # the crashing case really is one whose index is read past its storage
        assert any(st == 0 and sz > 1 for sz, st in zip(idx["shape"], idx["stride"])), (_case_line(f), idx)
    # exact attribution: a case crashes iff reading the index flat (numel elements from its
    # first one) runs past the end of its storage, which guard mode cuts to the view's extent
    by_id = {f["id"]: f for f in rep["failures"]}
    wrong = []
    for cid, status in rep["cases"]:
        c = parse_case_id(cid)
        if c.kind not in ("rand", "dup", "wide"):
            continue
        idx = gen.build(SPECS[c.op], c).tensors["idx"]
        past_end = idx.storage_offset() + idx.numel() > gen.extent(idx)
        if (status == "crash") != past_end:
            wrong.append(f"past_end={past_end} status={status}: " +
                         (_case_line(by_id[cid]) if cid in by_id else cid))
    assert not wrong, ("crash iff the flat read runs past the storage, violated by:\n" +
                       "\n".join(wrong[:12]) + "\n" + why(rep))
    subs = {d["predicate"] for d in rep["ops"]["gather"]["diagnosis"] if d["statuses"].keys() == {"crash"}}
    assert "idx.stride0" in subs, why(rep)
    # the repro script crashes too (guard pages inlined): a signal on CPU; on a GPU the fault is a
    # sticky device error raised as an exception, which the script reports with exit status 3
    r = subprocess.run([sys.executable, crashes[0]["repro"], device], capture_output=True, text=True,
                       timeout=120, env=_plain_env())
    assert r.returncode not in (0, 1), (crashes[0]["id"], r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    if device != "cpu":
        assert r.returncode == 3 and "CRASH (reproduced)" in r.stdout, (r.returncode, r.stdout[-1500:])


def test_guard_page_faults_one_element_past_the_storage():
    code = f"""
import sys, ctypes
sys.path.insert(0, {str(PYDIR / 'stridewise' / 'audit')!r})
import torch
from guard import CpuGuard
t = CpuGuard().empty(5, torch.float64)
t.copy_(torch.arange(5.))
assert t.tolist() == [0., 1., 2., 3., 4.]
print("inside ok", flush=True)
ctypes.c_double.from_address(t.data_ptr() + 5 * 8).value
print("NOT REACHED", flush=True)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "inside ok" in r.stdout and "NOT REACHED" not in r.stdout, (r.stdout, r.stderr)
    assert r.returncode == -11, (r.returncode, r.stderr[-400:])


# --------------------------------------------------------------------------------------------
# report, exit codes, ids, repro scripts


def test_findings_by_harm_keep_a_fault_apart_from_spurious_noise(tmp_path):
    """A planted fault (the index read as contiguous memory) mixed with spurious-error noise
    (KeyError('complex128') on every complex128 operand): the report lists wrong values before
    spurious errors, diagnoses the wrong values as the flat index reader, and groups the noise
    by exception and message with its own predicate (the dtype)."""
    rc, rep, _ = audit(tmp_path, "--ops", "gather,scatter_add", "--matrix", "quick", "--backend",
                       f"{PLANTED}:enable(flat_index, None, complex128)")
    assert rc == 1, why(rep)
    for op in ("gather", "scatter_add"):
        h = rep["ops"][op]["harm"]
        classes = [g["class"] for g in h]
        assert classes == sorted(classes, key=lambda c: (
            "crash", "wrong", "input-modified", "missing-error", "spurious-error",
            "device-assert").index(c)), (op, classes)
        assert classes[0] == "wrong", (op, classes, why(rep))
        assert "read as contiguous memory" in h[0]["why"], (op, h[0], why(rep))
        spurious = next(g for g in h if g["class"] == "spurious-error")
        assert sum(x["cases"] for x in spurious["groups"]) == spurious["cases"]
        noise = [x for x in spurious["groups"] if x["exception"] == "KeyError"]
        assert len(noise) == 1 and noise[0]["message"] == "'complex128'", (op, spurious["groups"])
        assert "complex128" in noise[0]["why"], (op, noise[0])
        assert noise[0]["cases"] == max(x["cases"] for x in spurious["groups"]), spurious["groups"]
        failing = [f for f in rep["failures"] if f["op"] == op and f["status"] in FAILING]
        assert sum(g["cases"] for g in h) == len(failing), (op, why(rep))


@pytest.mark.parametrize("kind", list(PLANTS))
def test_each_planted_fault_heads_its_class_despite_spurious_noise(tmp_path, kind):
    """Every planted fault mixed with noise (KeyError('complex128') on every complex128
    operand): its harm class (the biggest one that is not spurious errors) is diagnosed with the
    fault's own predicate and words, the op's headline diagnosis is that class's (not a mix of
    fault and noise: "from rank 1 up"), and the noise is one spurious group of its own, blamed
    on the dtype."""
    op, preds, words, _ = PLANTS[kind]
    rc, rep, _ = audit(tmp_path, "--ops", op, "--matrix", "quick", "--backend",
                       f"{PLANTED}:enable({kind}, None, complex128)")
    assert rc == 1, why(rep)
    h = rep["ops"][op]["harm"]
    fault = max((g for g in h if g["class"] != "spurious-error"), key=lambda g: g["cases"])
    # (a conjunction may narrow it: "the index is non-contiguous and indices are plain random"
    # where duplicate indices read from the wrong place happen to read the right values)
    assert set(fault["predicate"].split("&")) & preds and words in fault["why"], (kind, fault, why(rep))
    head = rep["ops"][op]["diagnosis"][0]
    assert head["predicate"] == fault["predicate"] and head["class"] in ("", fault["class"]), (kind, head)
    spurious = next(g for g in h if g["class"] == "spurious-error")
    noise = spurious["groups"][0]
    assert (noise["exception"], noise["message"]) == ("KeyError", "'complex128'"), spurious
    assert noise["predicate"] == "dtype=complex128", noise


def test_error_messages_normalise_to_one_line_per_cause():
    from stridewise.audit.harm import normalise

    a = normalise("index 7 is out of bounds for dimension 1 with size 5\nmore")
    b = normalise("index 12 is out of bounds for dimension 0 with size 3")
    assert a == b == "index N is out of bounds for dimension N with size N"
    assert normalise("shape [4, 3] is invalid for input of size (2, 6)") == \
        "shape [..] is invalid for input of size [..]"
    assert normalise("'complex128'") == "'complex128'"  # names stay: they say the cause
    assert normalise("got float16 and int32") == "got float16 and int32"


def test_json_schema(tmp_path):
    rc, rep, _ = audit(tmp_path, "--ops", "take,gather", "--matrix", "quick", "--ranks", "1,2",
                       "--backend", planted("offset_ignored"))
    assert rc == 1
    assert rep["schema"] == "stridewise-audit/1"
    # the structure: the shipped JSON Schema (audit() validated it too); below, what a schema
    # cannot say (the counts add up, the case ids round-trip)
    schemas.validate(rep, schemas.AUDIT_REPORT, "test_json_schema report")
    assert rep["failures"] and all(f.get("repro") and f.get("operands") for f in rep["failures"])
    s = rep["summary"]
    statuses = ("pass", "wrong", "crash", "bad-error", "device-assert", "known", "unsupported",
                "skip", "error")
    assert sum(s[k] for k in statuses) == s["cases"] == len(rep["cases"])
    assert s["failed"] == s["wrong"] + s["crash"] + s["bad-error"] + s["error"]
    assert s["exit_status"] == 1
    assert "eps(dtype)" in rep["tolerance"]["rule"]
    for op, v in rep["ops"].items():
        assert sum(v["counts"][k] for k in statuses) == v["counts"]["cases"]
        assert sum(c["cases"] for c in v["by_layout"].values()) == v["counts"]["cases"]
    for cid, status in rep["cases"]:
        assert parse_case_id(cid).id == cid
    # planted faults: a malformed report is rejected, the message names the failing path
    name = sorted(k for k, v in rep["failures"][0]["operands"].items() if isinstance(v, dict))[0]
    for path, mutate, words in SCHEMA_FAULTS:
        path = path.replace("OPERAND", name)
        bad = json.loads(json.dumps(rep))
        mutate(bad)
        with pytest.raises(schemas.SchemaError) as e:
            schemas.validate(bad, schemas.AUDIT_REPORT, "r.json")
        msg = str(e.value)
        assert msg.startswith(f"r.json: {path}: ") and all(w in msg for w in words), (path, msg)
        assert e.value.path == path and "audit_report.schema.json" in msg, msg


def _del(key):
    return lambda d: d.pop(key)


def _first_operand(rep) -> dict:
    ops = rep["failures"][0]["operands"]
    return ops[sorted(k for k, v in ops.items() if isinstance(v, dict))[0]]


SCHEMA_FAULTS = [  # (JSON path named, the fault, words of the message)
    ("$.schema", lambda d: d.update(schema="stridewise-audit/2"), ["'stridewise-audit/1' was expected"]),
    ("$", _del("cases"), ["'cases' is a required property"]),
    ("$.summary.crash", lambda d: d["summary"].update(crash="3"), ["'3' is not of type 'integer'"]),
    ("$.summary.exit_status", lambda d: d["summary"].update(exit_status=7), ["7 is not one of [0, 1]"]),
    ("$.cases[0][1]", lambda d: d["cases"][0].__setitem__(1, "passed"), ["'passed' is not one of"]),
    ("$.failures[0]", lambda d: d["failures"][0].pop("status"), ["'status' is a required property"]),
    ("$.failures[0].operands.OPERAND.shape", lambda d: _first_operand(d).update(shape="2x3"),
     ["is not of type 'array'"]),
    ("$.guard", lambda d: d.update(guard="yes"), ["'yes' is not of type 'boolean'"]),
]


def test_exit_codes_and_reasons(tmp_path, capsys):
    assert audit(tmp_path, "--ops", "take", "--ranks", "1", "--matrix", "quick")[0] == 0
    assert audit(tmp_path, "--ops", "take", "--ranks", "1", "--matrix", "quick",
                 "--backend", planted("neg_nowrap"))[0] == 1

    def run(*args):
        capsys.readouterr()
        rc = cli.main([*args, "--no-progress", "--repro-dir", str(tmp_path / "r")])
        return rc, capsys.readouterr().err

    rc, err = run("--ops", "nosuchop")
    assert rc == 2 and "unknown op 'nosuchop'" in err
    rc, err = run("--dtypes", "float99")
    assert rc == 2 and "float99" in err
    rc, err = run("--backend", "no_such_backend_module_xyz", "--ops", "take")
    assert rc == 2 and "no_such_backend_module_xyz" in err and "import" in err, err
    rc, err = run("--backend", f"{PLANTED}:no_such_call", "--ops", "take")
    assert rc == 2 and "no_such_call" in err and "enable" in err, err  # lists what exists
    rc, err = run("--flush", "stridewise:check_errors", "--ops", "take")
    assert rc == 2 and "--flush needs --backend" in err, err
    rc, err = run("--backend", planted("none"), "--flush", "stridewise", "--ops", "take")
    assert rc == 2 and "name the call" in err, err
    rc, err = run("--case", "gather/idx=nolayout")
    assert rc == 2 and "nolayout" in err
    rc, err = run("--device", "nosuchdevice")
    assert rc == 2 and "nosuchdevice" in err
    # the standalone entry works with or without the native library
    r = subprocess.run([sys.executable, str(STANDALONE), "--ops", "take", "--ranks", "1", "--matrix",
                        "quick", "--no-progress", "-q", "--backend", planted("neg_nowrap"),
                        "--repro-dir", str(tmp_path / "r2")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1 and "FAIL" in r.stdout, (r.stdout, r.stderr[-800:])


def test_module_entry_points(tmp_path):
    args = ["--ops", "take", "--ranks", "1", "--matrix", "quick", "--no-progress", "-q",
            "--repro-dir", str(tmp_path / "r")]
    env = dict(os.environ, PYTHONPATH=str(PYDIR))
    for cmd in ([sys.executable, "-m", "stridewise.audit"], [sys.executable, "-m", "stridewise", "audit"]):
        r = subprocess.run(cmd + args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        if r.returncode != 0 and "NativeLibraryError" in r.stderr:
            pytest.skip("stridewise/__init__ requires the native library (see docs/audit.md)")
        assert r.returncode == 0 and "PASS" in r.stdout, (cmd, r.stdout[-500:], r.stderr[-800:])


def test_case_ids_round_trip_and_abbreviate():
    for spec in SPECS.values():
        for v in spec.variants:
            for c in matrix.cases_for(spec, v, matrix.MatrixOptions("quick", seed=3)):
                assert parse_case_id(c.id, spec.operands + ("out",), tuple(spec.params)) == c, c.id
    c = parse_case_id("gather/idx=expand/r3/float16/s123")
    assert (c.op, c.variant, c.layout_of("idx"), c.rank, c.dtype, c.idx_dtype, c.kind, c.seed) == \
        ("gather", "func", "expand", 3, "float16", "i64", "rand", 123)
    assert c.id == "gather/func/idx=expand/r3/float16/i64/rand/s123"


def test_single_case_is_reproducible(tmp_path):
    cid = "gather/func/self=offset/r3/float16/i64/rand/s123"
    rc, rep, _ = audit(tmp_path, "--case", "gather/self=offset/r3/float16/s123",
                       "--backend", planted("offset_ignored"))
    assert rc == 1 and rep["cases"] == [[cid, "wrong"]], why(rep)
    rc2, rep2, _ = audit(tmp_path, "--case", cid, "--backend", planted("offset_ignored"))
    assert rep2["failures"][0]["detail"] == rep["failures"][0]["detail"]  # same data, same answer
    assert rep2["failures"][0]["operands"] == rep["failures"][0]["operands"]
    assert rep["failures"][0]["operands"]["self"]["storage_offset"] > 0


def _plain_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    return env


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["offset_ignored", "skip_oob", "out_strides"])
def test_repro_scripts_reproduce_and_isolate_the_backend(tmp_path, device, kind):
    op = PLANTS[kind][0]
    # CUDA: rank 2 only (about 100 cases): the audit only has to yield one failing case's script
    rc, rep, repro = audit(tmp_path, "--device", device, "--ops", op, "--matrix", "quick",
                           "--ranks", "2" if cuda_sized(device) else "1,2,3", "--backend", planted(kind),
                           *sized(device))
    assert rc == 1, why(rep)
    scripts = sorted(Path(f["repro"]) for f in rep["failures"])[:1]
    assert scripts, why(rep)
    for s in scripts:
        r = subprocess.run([sys.executable, str(s), device], capture_output=True, text=True,
                           timeout=120, env=_plain_env(), cwd=tmp_path)
        assert r.returncode == 1 and "FAIL (reproduced)" in r.stdout, (s, r.stdout, r.stderr[-500:])
        native = s.with_name(s.stem + "_native.py")
        native.write_text(re.sub(r"^BACKEND = .*$", "BACKEND = None", s.read_text(), flags=re.M))
        r = subprocess.run([sys.executable, str(native), device], capture_output=True, text=True,
                           timeout=120, env=_plain_env(), cwd=tmp_path)
        assert r.returncode == 0 and "OK" in r.stdout, (native, r.stdout, r.stderr[-500:])


def test_tolerance_is_configurable(tmp_path):
    # bfloat16 rounding costs ~2**-8 relative: far beyond 2*eps(float32)*(terms+1), within 1e5*eps
    args = ("--ops", "scatter_add", "--matrix", "quick", "--ranks", "1,2", "--dtypes", "float32",
            "--backend", planted("lossy_accum"))
    rc, rep, _ = audit(tmp_path, *args)
    assert rc == 1, why(rep)
    rc, rep, _ = audit(tmp_path, *args, "--tol-factor", "1e5")
    assert rc == 0, why(rep)
    assert rep["tolerance"]["factor"] == 1e5


def test_device_error_classification():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert classify_error(RuntimeError("CUDA error: device-side assert triggered\nCUDA kernel "
                                       "errors might be asynchronously reported"), cuda) == "device-assert"
    assert classify_error(RuntimeError("CUDA error: an illegal memory access was encountered"),
                          cuda) == "device-fault"
    assert classify_error(RuntimeError("index 5 is out of bounds for dimension 1"), cuda) is None
    assert classify_error(RuntimeError("CUDA error: device-side assert triggered"), cpu) is None


def test_native_is_the_oracle_even_when_the_backend_replaces_cpu_kernels(tmp_path):
    """The planted backend overrides aten::gather on CPU; the oracle (parent process) must
    still be native: a correct backend passes and a broken one fails, on CPU."""
    assert audit(tmp_path, "--ops", "gather", "--ranks", "2", "--matrix", "quick",
                 "--backend", planted("none"))[0] == 0
    assert audit(tmp_path, "--ops", "gather", "--ranks", "2", "--matrix", "quick",
                 "--backend", planted("offset_ignored"))[0] == 1


def test_every_check_fires_on_a_tampered_answer():
    """Feed the judge a correct native answer, then break it one way at a time."""
    from stridewise.audit import oracle
    from stridewise.audit.worker import execute

    tol = oracle.Tolerance()
    cpu = torch.device("cpu")

    def verdict(cid, tamper):
        c = parse_case_id(cid)
        spec = SPECS[c.op]
        built = gen.build(spec, c)
        ref = oracle.reference(spec, built, tol)
        ans = execute(spec, c, cpu)
        assert oracle.judge(spec, built, ref, ans, tol).status in ("pass", "skip"), cid
        tamper(ans)
        return oracle.judge(spec, built, ref, ans, tol)

    def flip(raw: bytes, i: int) -> bytes:
        b = bytearray(raw)
        b[i] ^= 0x40
        return bytes(b)

    def flip_result(a):
        a["result"]["raw"] = flip(a["result"]["raw"], 1)

    def flip_input(a):
        a["storages"]["self"][0] = flip(a["storages"]["self"][0], 0)

    def flip_outside(a):  # out is a step slice: element 0 of its storage is outside the view
        a["storages"]["out"][0] = flip(a["storages"]["out"][0], 0)

    def grow(a):
        a["storages"]["out"][0] += b"\0" * 8

    def unalias(a):
        a["alias"] = False

    def no_error(a):
        a.update(ok=True, result={"dtype": "float32", "shape": [0], "raw": b""}, storages={})

    def raised(a):
        a.update(ok=False, exc_type="RuntimeError", exc_msg="planted")

    def crashed(a):
        a.update(ok=False, fatal="crash", detail="worker died: SIGSEGV")

    def assert_(a):
        a.update(ok=False, fatal="device-assert", exc_msg="CUDA error: device-side assert triggered")

    def off_by_tol(a):  # float accumulation: move one element by 1e-3 (>> 2*eps32*terms)
        t = gen.unpack(a["result"]).clone()
        t.view(-1)[0] += 1e-3 * (1 + abs(float(t.view(-1)[0])))
        a["result"] = gen.pack(t)

    g = "gather/func/r2/float32/s1"
    assert (verdict(g, flip_result).reason, verdict(g, flip_input).reason) == ("values", "input-modified")
    o = "gather/out/out=step_slice/r2/float32/s1"
    assert verdict(o, flip_outside).reason == "outside-view-written"
    assert verdict(o, grow).reason == "storage-resized"
    assert verdict(o, unalias).reason == "not-aliased"
    bad = "gather/func/r2/float32/oob/s1"
    assert verdict(bad, no_error).reason == "missing-error"
    assert verdict(bad, assert_).status == "device-assert"
    assert verdict(g, raised).reason == "spurious-error"
    assert verdict(g, crashed).status == "crash"
    assert verdict(g, assert_).reason == "device-assert-valid"
    acc = "scatter_add/func/r2/float32/dup/s1"
    v = verdict(acc, off_by_tol)
    assert v.reason == "values" and "eps(dtype)" in v.detail
    w = "scatter.src/func/r2/float32/dup/s1"  # write mode: a value nobody wrote
    assert verdict(w, flip_result).reason == "values"
