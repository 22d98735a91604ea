"""The audit's time profile, its kernel-affinity schedule and its warm spares (CPU, ~30 s).

- every report says where the time went: JSON "timing" has every part, each >= 0, the worker
  slots' parts add up to jobs x wall and the parent's to the wall; the text report has the
  "Where the time went" section
- a call much slower than its op's median is reported as a likely JIT compile, with its case id
  (tests/slow_backend.py sleeps on the first call of each (op, variant, dtype) in a process)
- affinity scheduling: each (op, variant, dtype) bucket is run by one worker unless split; the
  scheduler hands out every case exactly once
- with a warm spare, a crashing backend (planted flat reader under --guard) still gives every
  case exactly one result, its crashes confirmed on replay in a fresh worker taken from the spare

Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import os
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from conftest import PYDIR, ROOT  # noqa: E402  (the installed package or python/)
PLANTED = ROOT / "tests" / "planted_backend"
SLOW = ROOT / "tests" / "slow_backend.py"
# conftest.py stands a namespace package in for stridewise when its native library does not
# load: the auditor needs only torch

from stridewise import schemas  # noqa: E402
from stridewise.audit import cli, schedule, timing  # noqa: E402
from stridewise.audit.caseid import make_case  # noqa: E402

SEED = int(os.environ.get("STRIDEWISE_SEED") or random.SystemRandom().randrange(1, 10**6)) % 10**6


def audit(tmp_path, *args, capsys=None):
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    argv = [*map(str, args), "--json", str(out / "r.json"), "--repro-dir", str(out / "repro"),
            "--no-progress", "--seed", str(SEED)]
    rc = cli.main(argv)
    text = capsys.readouterr().out if capsys else ""
    assert (out / "r.json").exists(), f"STRIDEWISE_SEED={SEED}: no report (exit {rc}) for {argv}"
    rep = json.loads((out / "r.json").read_text())
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out / "r.json"))  # the shipped JSON Schema
    return rc, rep, text


def listed(*args) -> list:
    """The case ids an audit with these arguments runs, in order."""
    from stridewise.audit import matrix
    from stridewise.audit.specs import SPECS

    p = cli.build_parser().parse_args([*map(str, args), "--seed", str(SEED)])
    opt = matrix.MatrixOptions(p.matrix, p.seed, cli._csv(p.dtypes),
                               tuple(int(r) for r in cli._csv(p.ranks)) if p.ranks else None,
                               cli._csv(p.variants), False)
    return [c.id for c in matrix.build_matrix([SPECS[o] for o in cli._csv(p.ops)], opt)]


def key(cid: str) -> tuple:
    t = cid.split("/")
    return (t[0], t[1], t[4])  # op, variant, dtype (canonical ids)


def check_profile(t: dict):
    """Every part present and >= 0; the slots' parts add up to jobs x wall, the parent's to wall."""
    assert set(t["parts"]) == set(timing.SLOT_PARTS), t["parts"]
    assert set(t["parent"]) == set(timing.PARENT_PARTS), t["parent"]
    assert set(t["startups"]["parts"]) == set(timing.START_PARTS), t["startups"]
    for k in ("wall_s", "jobs", "capacity_s", "shares", "largest", "startups", "restarts", "spares",
              "replays", "parent_busy", "jit", "slowest", "case_worker", "schedule"):
        assert k in t, k
    bad = {k: v for d in (t["parts"], t["parent"], t["startups"]["parts"]) for k, v in d.items() if v < 0}
    assert not bad, bad
    cap = t["jobs"] * t["wall_s"]
    assert abs(t["capacity_s"] - cap) < 0.01
    total = sum(t["parts"].values())
    assert abs(total - cap) <= 0.03 * cap + 0.05, (total, cap, t["parts"])
    assert abs(sum(t["parent"].values()) - t["wall_s"]) <= 0.03 * t["wall_s"] + 0.05, t["parent"]
    assert t["startups"]["count"] >= 1 and t["parts"]["startup"] > 0
    assert t["parts"]["call"] > 0 and t["parts"]["build"] > 0
    assert t["largest"] == max(t["parts"], key=t["parts"].get)
    assert 0.0 <= t["parent_busy"] <= 1.0


# --------------------------------------------------------------------------------------------


SLOW_RUN = ("--ops", "gather,take", "--matrix", "quick", "--dtypes", "float32,float16")


def test_time_profile_adds_up_and_names_the_likely_jit_compiles(tmp_path, capsys):
    """The slow backend sleeps 0.3 s on the first call of each (op, variant, dtype) in each
    worker: exactly those calls are the likely JIT compiles, by case id; every part adds up."""
    ids = listed(*SLOW_RUN)
    # --run-native: the slow backend patches the worker and registers no kernel (coverage:
    # every variant native, which by default is not run)
    rc, rep, text = audit(tmp_path, *SLOW_RUN, "--jobs", "2", "--run-native",
                          "--backend", f"{SLOW}:enable(0.3)",
                          capsys=capsys)
    assert rc == 0, rep["summary"]
    t = rep["timing"]
    check_profile(t)
    assert sorted(t["case_worker"]) == sorted(ids)
    # the first case each worker process ran of each kernel: its first in case-list order (a
    # worker runs a bucket, or the part of one it split off, in order)
    order = {c: i for i, c in enumerate(ids)}
    first: dict = {}
    for cid, (slot, pid) in ((c, w.split("/")) for c, w in t["case_worker"].items()):
        k = (pid, key(cid))
        if k not in first or order[cid] < order[first[k]]:
            first[k] = cid
    expected = set(first.values())
    jit = t["jit"]
    got = {cid for cid, _ in jit["cases"]}
    assert expected <= got, (f"STRIDEWISE_SEED={SEED}: first calls not reported as likely JIT "
                             f"compiles: {sorted(expected - got)}")
    assert len(got - expected) <= 2, sorted(got - expected)  # a call preempted > 50 ms, at most
    assert jit["count"] == len(got) and jit["seconds"] >= 0.29 * len(expected)
    assert len(jit["top"]) == 5 and all(cid in expected and s >= 0.29 for cid, s in jit["top"]), jit["top"]
    assert t["parts"]["call"] >= 0.29 * len(expected)
    # the text report's section names them too
    assert "Where the time went" in text and "likely JIT compiles" in text
    assert jit["top"][0][0] in text
    section = text[text.index("Where the time went"):]
    for p in timing.SLOT_PARTS:
        assert timing.LABEL[p] in section, p


def test_affinity_runs_each_kernel_bucket_in_one_worker(tmp_path):
    """With --jobs 2, each (op, variant, dtype) bucket is run by one worker unless it was split
    (a free worker with no unclaimed bucket left takes the second half of the largest one)."""
    args = ("--ops", "gather,index_select", "--matrix", "quick", "--dtypes", "float32,float16,int64",
            "--jobs", "2")
    rc, rep, _ = audit(tmp_path, *args)
    assert rc == 0, rep["summary"]
    t = rep["timing"]
    check_profile(t)
    sch = t["schedule"]
    assert sch["policy"] == "affinity" and sch["buckets"] == 12, sch
    slots = defaultdict(set)
    for cid, (slot, pid) in ((c, w.split("/")) for c, w in t["case_worker"].items()):
        slots[key(cid)].add(slot)
    assert len(slots) == 12
    shared = [k for k, v in slots.items() if len(v) > 1]
    assert len(shared) <= sch["splits"], (shared, sch)
    assert len(shared) <= 2, (f"STRIDEWISE_SEED={SEED}: buckets run by both workers: {shared}; "
                              f"{sch}")
    assert Counter(c for c, _ in rep["cases"]) == Counter(listed(*args[:6]))  # each case once


def test_scheduler_hands_out_every_case_once_and_splits_only_at_the_end():
    sizes = random.Random(SEED)
    cases = [make_case(op, v, {}, r, dt, "i64", "rand", {}, s)
             for op in ("gather", "take") for v in ("func", "out") for dt in ("float32", "int8", "bool")
             for r in (1, 2) for s in range(sizes.randrange(1, 12))]
    random.Random(SEED).shuffle(cases)
    rng = random.Random(SEED + 1)
    for jobs in (1, 2, 3, 5):
        q = schedule.make(cases, jobs)
        assert isinstance(q, schedule.Affinity if jobs > 1 else schedule.InOrder)
        got: list = []
        ran = defaultdict(list)  # slot -> keys in the order it ran them
        stuck = 0
        while q:
            slot = rng.randrange(jobs)
            unclaimed, splits = len(getattr(q, "unclaimed", ())), q.splits
            c = q.next(slot)
            assert q.splits == splits or unclaimed == 0  # a split only once all are claimed
            if c is None:  # the rest is owned by other slots, one case each: theirs to run
                stuck += 1
                assert stuck < 10000 and jobs > 1
                continue
            got.append(c)
            ran[slot].append(schedule.kernel_key(c))
        assert q.next(0) is None and len(q) == 0
        assert Counter(c.id for c in got) == Counter(c.id for c in cases), jobs  # once each
        if jobs == 1:
            assert got == cases  # one worker keeps the case order
            continue
        # within a bucket, the case order is kept
        pos = {c.id: i for i, c in enumerate(cases)}
        per_key = defaultdict(list)
        for c in got:
            per_key[schedule.kernel_key(c)].append(pos[c.id])
        # a slot runs a bucket in one stretch (it leaves it only when it is empty)
        for slot, keys in ran.items():
            stretches = [k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k]
            extra = len(stretches) - len(set(stretches))
            assert extra <= q.splits, (slot, stretches)
        shared = [k for k in per_key if sum(k in set(v) for v in ran.values()) > 1]
        assert len(shared) <= q.splits


def test_warm_spare_keeps_every_case_once_through_crashes(tmp_path):
    """The planted flat reader crashes under --guard: every crash costs a fresh worker (the
    replay, alone) and another after it; with a warm spare those restarts adopt the spare. Every
    case still has exactly one result, each crash confirmed on replay."""
    args = ("--ops", "gather", "--matrix", "quick", "--ranks", "1,2,3", "--variants", "func")
    ids = listed(*args)
    rc, rep, _ = audit(tmp_path, *args, "--guard", "--backend", f"{PLANTED}:enable(flat_index)",
                       "--jobs", "2", "--spares", "1", "-q")
    assert rc == 1 and rep["summary"]["error"] == 0, rep["summary"]
    assert Counter(c for c, _ in rep["cases"]) == Counter(ids)  # exactly one result each
    crashes = [f for f in rep["failures"] if f["status"] == "crash"]
    assert crashes and all(f["replay"]["confirmed"] for f in crashes), crashes[:2]
    t = rep["timing"]
    check_profile(t)
    rs = t["restarts"]
    # the crash and its replay each cost a fresh worker (but for the last ones: no work left),
    # except a crash that was its fresh worker's first case: it ran alone already (no replay)
    alone = [f for f in crashes if f["replay"].get("alone")]
    assert rs["by_cause"].get("crash", 0) >= 2 * len(crashes) - len(alone) - 2, rs
    sp = t["spares"]
    assert rs["from_spare"] >= 1 and sp["adopted"] == rs["from_spare"] and not sp["disabled"], (rs, sp)
    assert t["replays"]["count"] == len(crashes) - len(alone) and t["parts"]["crashed"] > 0
    for f in crashes:
        assert f["worker"][0] in (0, 1) and f["worker"][1] > 0, f


def test_deadline_reports_the_cases_not_run_as_skipped(tmp_path):
    """--deadline: after it no case is handed out; the rest are reported as skip (deadline), so
    a run cut short by device time still gives a report, with every case exactly once."""
    args = ("--ops", "gather,take", "--matrix", "quick", "--ranks", "1,3")
    ids = listed(*args)
    rc, rep, _ = audit(tmp_path, *args, "--jobs", "2", "--run-native", "--deadline", "0.000001",
                       "--backend", f"{SLOW}:enable(0.2)")
    assert Counter(c for c, _ in rep["cases"]) == Counter(ids)
    st = Counter(s for _, s in rep["cases"])
    assert st["skip"] >= len(ids) - 4, st  # at most the first ones were sent
    fail = [f for f in rep["failures"] if f["reason"] == "deadline"]
    assert not fail, fail[:2]  # skipped, never failed
    assert rc == 0 and rep["summary"]["failed"] == 0, rep["summary"]
    rc, rep, _ = audit(tmp_path, *args, "--jobs", "2")  # no deadline: nothing skipped for it
    assert Counter(s for _, s in rep["cases"])["skip"] < len(ids) // 10, rep["summary"]
