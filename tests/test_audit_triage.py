"""The auditor on what auditing ATen CUDA (H200, torch 2.11) taught it, runnable on CPU.

- a sticky device error met in a case's set-up belongs to the case run before it in that worker
  (device-side assert, or a fault: crash); the interrupted case gets its own verdict from a
  fresh worker, never an auditor error (tests/planted_backend/cuda_sim.py simulates the device)
- a case that hung and then answered alone in a fresh worker takes the replay's verdict; a
  worker stuck after printing a device-side assertion is killed after --assert-grace seconds
Each rule is also seen failing on a planted fault.

Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PYDIR = ROOT / "python"
SIM = ROOT / "tests" / "planted_backend" / "cuda_sim.py"
if str(PYDIR) not in sys.path:
    sys.path.insert(0, str(PYDIR))
try:  # the auditor must not need the native library
    import stridewise  # noqa: F401
except ImportError:
    _stub = types.ModuleType("stridewise")
    _stub.__path__ = [str(PYDIR / "stridewise")]
    sys.modules["stridewise"] = _stub

from stridewise.audit import backends, cli, oracle  # noqa: E402
from stridewise.audit.caseid import parse_case_id  # noqa: E402
from stridewise.audit.runner import RunConfig, Runner, _Slot  # noqa: E402
from stridewise.audit.specs import SPECS  # noqa: E402
from stridewise.audit.worker import execute  # noqa: E402

SEED = int(os.environ.get("STRIDEWISE_SEED") or random.SystemRandom().randrange(1, 10**6)) % 10**6
CPU = torch.device("cpu")
TOL = oracle.Tolerance()


def audit(tmp_path, *args):
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    rc = cli.main([*map(str, args), "--json", str(out / "r.json"), "--no-repros", "--no-progress",
                   "-q"])
    return rc, json.loads((out / "r.json").read_text())


def status(rep) -> dict:
    return dict(map(tuple, rep["cases"]))


def detail(rep, cid) -> str:
    return next(f["detail"] for f in rep["failures"] if f["id"] == cid)


def run_cases(cids, backend=None, device_type=None, **cfg):
    """Runner results (verdicts with reasons) for case ids, one worker."""
    r = Runner(RunConfig(backend=backends.parse(backend) if backend else None, **cfg), SPECS)
    if device_type:
        r.device_type = device_type  # judge as if on that device (known issues are per device)
    return {x.case.id: x for x in r.run([parse_case_id(c) for c in cids])}


def sim(mode, *args) -> str:
    return f"{SIM}:enable({','.join([mode, *map(str, args)])})"


def each(cids) -> list:
    return [a for c in cids for a in ("--case", c)]


A = "index_select/func/contig/r2/float32/i64/oob/s{}"  # native raises: a device asserts
B = "index_select/func/contig/r2/float32/i64/rand/s{}"  # valid


def ab(seed=SEED):
    a2 = "index_add/func/contig/r3/float16/i64/oobneg/s{}".format(seed)
    return [A.format(seed), B.format(seed), a2, B.format(seed + 1)]


# --------------------------------------------------------------------------------------------
# 1. sticky device errors are attributed to the case that left them


def test_planted_late_device_assert_is_attributed_to_the_previous_case(tmp_path):
    """The device-side assert of A (whose op raised an ordinary error) surfaces only in B's
    set-up: A is the device-assert, B is replayed and passes; no auditor error (the H200 run
    reported scatter_reduce cases as auditor errors in gen.materialize)."""
    cids = ab()
    rc, rep = audit(tmp_path, "--jobs", "1", "--backend", sim("late"), *each(cids))
    st = status(rep)
    assert rc == 0 and rep["summary"]["error"] == 0, rep["summary"]
    assert [st[c] for c in cids] == ["device-assert", "pass", "device-assert", "pass"], st
    d = detail(rep, cids[0])
    assert "surfaced only in the set-up of the next case" in d and cids[1] in d, d


def test_planted_late_device_fault_is_a_crash_of_the_previous_case(tmp_path):
    """An illegal address surfacing in B's set-up is A's crash (a fault, not an assert)."""
    cids = ab()
    rc, rep = audit(tmp_path, "--jobs", "1", "--backend", sim("late_fault"), *each(cids))
    st = status(rep)
    assert rc == 1 and [st[c] for c in cids] == ["crash", "pass", "crash", "pass"], st
    assert rep["summary"]["error"] == 0
    d = detail(rep, cids[0])
    assert "illegal memory access" in d and "attributed to this case" in d and cids[1] in d, d


def test_planted_assert_after_a_host_error_is_flushed_by_the_case_itself(tmp_path):
    """The worker synchronizes after an op that raised: the pending assert is the case's own."""
    cids = ab()
    rc, rep = audit(tmp_path, "--jobs", "1", "--backend", sim("sync"), *each(cids))
    st = status(rep)
    assert rc == 0 and [st[c] for c in cids] == ["device-assert", "pass", "device-assert", "pass"], st
    assert "surfaced when synchronizing after the call raised" in detail(rep, cids[0])


def test_device_error_before_any_case_is_not_blamed_on_the_case(tmp_path):
    """A fresh worker meeting a device error in set-up has no previous case: the case is tried
    again, then reported as device-unusable (an error of the run, not of the case)."""
    r = Runner(RunConfig(log_dir=str(tmp_path)), SPECS)
    s = _Slot(r, 0)
    c = parse_case_id(B.format(SEED))
    stale = {"ok": False, "stale": "device-assert", "fatal": "device-assert",
             "exc_type": "AcceleratorError", "exc_msg": "CUDA error: device-side assert triggered",
             "detail": "device error before the op ran (set-up)"}
    for _ in range(2):
        s.case, s.sent = c, time.time()
        assert r._handle(s, dict(stale)) is None and s.pending_replay == c
        s.pending_replay = None
    s.case, s.sent = c, time.time()
    res = r._handle(s, dict(stale))
    assert (res.verdict.status, res.verdict.reason) == ("error", "device-unusable"), res.verdict


# --------------------------------------------------------------------------------------------
# 2. a hang, then an answer alone: the replay's verdict


@pytest.mark.parametrize("mode", ["hang", "hang_silent"])
def test_planted_hang_then_device_assert_takes_the_replays_verdict(tmp_path, mode):
    """index_add oob on the H200: the first attempt hung, the replay device-asserted. The case
    is a device-assert (noted flaky), not a crash; a printed assertion ends the wait early."""
    state = tmp_path / "state"
    state.mkdir()
    cids = ["index_add/func/contig/r3/float32/i64/oob/alpha=1/s{}".format(SEED), B.format(SEED)]
    t0 = time.time()
    timing = ("--timeout", "60", "--assert-grace", "1") if mode == "hang" else ("--timeout", "3")
    rc, rep = audit(tmp_path, "--jobs", "1", *timing, "--backend", sim(mode, state), *each(cids))
    took = time.time() - t0
    st = status(rep)
    assert rc == 0 and [st[c] for c in cids] == ["device-assert", "pass"], (st, rep["failures"])
    f = next(f for f in rep["failures"] if f["id"] == cids[0])
    assert f["replay"]["flaky"] and not f["replay"]["confirmed"], f
    assert "flaky: the first attempt hung" in f["detail"], f["detail"]
    if mode == "hang":
        assert "after printing a device-side assertion" in f["detail"] and took < 30, took


def _replayed(first: dict, replay: dict, cid: str, log_dir):
    r = Runner(RunConfig(log_dir=str(log_dir)), SPECS)
    s = _Slot(r, 0)
    c = parse_case_id(cid)
    s.case, s.sent = c, time.time()
    assert r._handle(s, first) is None and s.pending_replay == c
    s.case, s.sent, s.pending_replay = c, time.time(), None
    return r._handle(s, replay)


def test_a_hang_does_not_hide_a_wrong_replay_nor_does_a_lone_segfault_pass(tmp_path):
    """The replay's verdict stands after a hang even when it fails (planted: wrong values);
    a segfault that does not reproduce alone stays a crash (memory corrupted earlier)."""
    cid = "gather/func/contig/r2/float32/i64/rand/s{}".format(SEED)
    c = parse_case_id(cid)
    good = execute(SPECS["gather"], c, CPU)
    bad = dict(good, result=dict(good["result"], raw=bytes(b ^ 0x40 for b in good["result"]["raw"])))
    hang = {"ok": False, "fatal": "crash", "timeout": True, "detail": "no answer within 9s (hang?)"}
    res = _replayed(dict(hang), good, cid, tmp_path)
    assert res.verdict.status == "pass" and "flaky" in res.verdict.detail, res.verdict
    res = _replayed(dict(hang), bad, cid, tmp_path)
    assert (res.verdict.status, res.verdict.reason) == ("wrong", "values"), res.verdict
    segv = {"ok": False, "fatal": "crash", "exit": -11, "detail": "worker died: SIGSEGV"}
    res = _replayed(segv, good, cid, tmp_path)
    assert res.verdict.status == "crash" and "not when replayed alone" in res.verdict.detail, res.verdict


