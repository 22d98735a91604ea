"""Findings that do not reproduce alone (audit/sequence.py): replayed after the cases that ran
before them in their worker, shrunk to the smallest sequence that fails.

- planted ``after_neg`` (tests/planted_backend): take is right alone, but after a call that
  wrapped a negative index every float16 take is wrong. With --verify-repros its script does
  not reproduce alone; the audit names the one earlier case that breaks it (of six), says the
  finding holds (not an auditor bug), and its replay command reproduces it;
- planted ``after_neg_crash``: the same as a crash its replay alone does not confirm: found
  without --verify-repros;
- the search itself (ddmin) over random predecessor lists and culprit sets: the culprits and
  nothing else, in order, 1-minimal, within the trial budget; a budget too small says so; a
  finding that passes after every predecessor is "not reproduced".

Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys

from conftest import PYDIR, ROOT  # noqa: E402
from stridewise import schemas  # noqa: E402
from stridewise.audit import cli, sequence  # noqa: E402

SEED = int(os.environ.get("STRIDEWISE_SEED") or random.SystemRandom().randrange(1, 10**6)) % 10**6
NEG = "take/func/contig/r3/float32/i64/neg/s0"  # wraps negative indices: leaves the scar
TARGET = "take/func/self=offset/r1/float16/i64/rand/s0"
OTHERS = ["take/func/contig/r1/float32/i64/rand/s0", "take/func/self=step_slice/r1/float32/i64/rand/s0",
          "take/func/idx=transpose/r1/float32/i64/rand/s0", "take/func/contig/r0/float32/i64/rand/s0",
          "take/func/self=step_slice/r0/float32/i64/rand/s0"]


def _order():
    """The five harmless cases and NEG in a random order, NEG never among the last four (so the
    suffix wave alone cannot find it and the shrinking has to), then the target."""
    rng = random.Random(SEED)
    others = OTHERS[:]
    rng.shuffle(others)
    return others[:1] + [NEG] + others[1:] + [TARGET]


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "tests"), str(PYDIR)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))


def _audit(tmp_path, kind, *extra):
    out = tmp_path / f"{kind}.json"
    argv = ["--backend", f"planted_backend:enable({kind},take)", "--jobs", "1", "--schedule", "order",
            "--spares", "0", "--json", str(out), "--repro-dir", str(tmp_path / "repro"), "--no-progress", "-q",
            *extra]
    for c in _order():
        argv += ["--case", c]
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        rc = cli.main(argv)
    finally:
        sys.path.remove(str(ROOT / "tests"))
    rep = json.loads(out.read_text())
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out))
    return rc, rep


def _replays(cmd: str, tmp_path, status: str):
    """Run a record's replay command; the finding's case gets ``status`` again."""
    argv = shlex.split(cmd)
    assert argv[:4] == ["python3", "-m", "stridewise", "audit"], cmd
    out = tmp_path / "replay.json"
    r = subprocess.run([sys.executable, *argv[1:], "--json", str(out), "--no-repros", "-q"],
                       capture_output=True, text=True, timeout=300, env=_env(), cwd=str(tmp_path))
    assert r.returncode == 1 and out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    got = dict(json.loads(out.read_text())["cases"])
    assert got[TARGET] == status, (cmd, got)


def test_a_wrong_value_after_an_earlier_case_is_named_with_its_sequence(tmp_path):
    rc, rep = _audit(tmp_path, "after_neg", "--verify-repros")
    where = f"STRIDEWISE_SEED={SEED} order={_order()} sequences={rep.get('sequences')}"
    assert rc == 1 and rep["summary"]["wrong"] == 1, where
    (rec,) = rep["sequences"]
    assert rec["example"] == TARGET and rec["class"] == "wrong", where
    assert rec["sequence"] == [NEG, TARGET] and rec["predecessors"] == 6, where
    assert rec["reproduced"] and rec["minimal"] and 0 < rec["trials"] <= sequence.TRIALS, where
    (chk,) = rep["repro_check"]  # the script alone does not reproduce: the sequence settles it
    assert chk["ok"] and chk["outcome"] == "reproduces after 1 earlier case(s)", chk
    assert chk["backend"]["reproduces"] is False, chk
    _replays(rec["command"], tmp_path, "wrong")


def test_a_crash_after_an_earlier_case_is_named_without_verify_repros(tmp_path):
    rc, rep = _audit(tmp_path, "after_neg_crash")
    where = f"STRIDEWISE_SEED={SEED} order={_order()} sequences={rep.get('sequences')}"
    assert rc == 1 and rep["summary"]["crash"] == 1, where
    (rec,) = rep["sequences"]
    assert rec["class"] == "crash" and rec["sequence"] == [NEG, TARGET] and rec["minimal"], where
    _replays(rec["command"], tmp_path, "crash")
    rc, rep = _audit(tmp_path, "after_neg_crash", "--sequence-trials", "0")
    assert "sequences" not in rep, rep.get("sequences")  # off: the finding stands, no search


class _Fake(sequence._Search):
    """The search with a predicate instead of workers: fails iff every culprit is in the
    sequence, in order."""

    def __init__(self, pre, culprits, budget):
        class _Res:
            verdict = type("V", (), {"status": "wrong"})()
            case = type("C", (), {"id": "T", "op": "x"})()
            before = (pre + ["T"], len(pre))

        super().__init__(None, _Res(), budget, [])
        self.culprits = culprits

    def fails(self, seqs):
        def ok(s):
            it = iter(s)
            return bool(self.culprits) and all(c in it for c in self.culprits)
        return [ok(s) for s in seqs]

    def record(self, pre, seq, reproduced, minimal):
        return {"sequence": list(seq), "reproduced": reproduced, "minimal": minimal, "trials": self.trials}


def test_the_search_finds_exactly_the_culprits_in_order():
    rng = random.Random(SEED)
    for _ in range(200):
        n = rng.randint(1, 80)
        pre = [f"c{k}" for k in range(n)]
        culprits = sorted(rng.sample(pre, rng.randint(1, min(3, n))), key=pre.index)
        got = _Fake(pre, culprits, 10**6).run()
        assert got["sequence"] == culprits and got["reproduced"] and got["minimal"], (SEED, n, culprits, got)
    pre = [f"c{k}" for k in range(64)]
    got = _Fake(pre, [], 10**6).run()  # passes even after all of them
    assert not got["reproduced"] and got["trials"] == 8, got  # alone, all, 6 suffixes: one wave
    got = _Fake(pre, ["c3", "c40"], 10).run()  # the budget ends the shrinking: said, not hidden
    assert got["reproduced"] and not got["minimal"] and got["trials"] <= 10, got
    assert ["c3", "c40"] == [c for c in got["sequence"] if c in ("c3", "c40")], got
