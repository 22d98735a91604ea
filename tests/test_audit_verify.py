"""--verify-repros: every finding of the report reproduces alone, and native PyTorch passes it.

For each distinct finding (a harm group of an op; each message group of its spurious errors)
the audit replays the smallest case's repro script in a fresh process with the backend (it must
reproduce: exit 1, or a signal / exit 3 for a crash) and with --native (native PyTorch on the
same device must pass it: exit 0). Planted backends on CPU:

- a flat index reader on guard pages with complex128 noise: a crash, wrong values, spurious
  errors (and missing errors on some seeds) all reproduce; native passes each script; the same
  check re-runs from the JSON report (--verify-repros-from)
- a missing error (skip_oob) and an input modified (writes_input) reproduce too; representatives
  get scripts even with --max-repros 0
- planted AUDITOR bugs are caught: a repro writer that drops an operand's storage offset (the
  script no longer reproduces), one that drops it without rebasing the storage (native fails
  the script), a tampered script -- each an exit status 1 and an "AUDITOR BUG" line
- a guard-page crash reproduces even where the index's storage outlasts its view (the scripts
  cut it to the view's extent, as the audit does: this check found that bug)
- the scripts' argv: [DEVICE] [--native] in any order, anything else is exit 2, as is an
  exception outside the call

Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import re
from collections import Counter
import subprocess
import sys
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_audit import PLANTED, SEED, _plain_env, audit, planted, why  # noqa: E402

from stridewise.audit import cli, repro, verify  # noqa: E402
from stridewise.audit.gen import DTYPE_NAME, flat_storage, storage_elems  # noqa: E402

NOISY_FLAT = f"{PLANTED}:enable(flat_index, None, complex128)"
# one op, rank 1, the function variant, two data dtypes (complex128: the noise): ~40 cases
SMALL = ("--ops", "gather", "--matrix", "quick", "--ranks", "1", "--variants", "func",
         "--dtypes", "float32,int64,complex128", "--jobs", "2")


def checks_of(rep) -> list:
    assert "repro_check" in rep, why(rep)
    return rep["repro_check"]


def show(checks) -> str:
    return f"STRIDEWISE_SEED={SEED}\n" + "\n".join(verify.text(checks))


def expected_findings(rep) -> Counter:
    """(op, class, exception or None) of every distinct finding the JSON's harm groups list."""
    out: Counter = Counter()
    for op, v in rep["ops"].items():
        for g in v["harm"]:
            if g["class"] in verify.REPLAYED:
                # each spurious message; missing errors per native message when there are several
                subs = (g["groups"] if g["class"] == "spurious-error" or len(g["groups"]) > 1
                        else [g])
                for x in subs:
                    out[op, g["class"], x.get("exception") if g["class"] == "spurious-error" else None] += 1
    return out


@pytest.fixture(scope="module")
def noisy_flat(tmp_path_factory):
    """The audit of the flat index reader on guard pages with complex128 noise, --verify-repros."""
    tmp = tmp_path_factory.mktemp("noisy_flat")
    rc, rep, repro_dir = audit(tmp, *SMALL, "--guard", "--backend", NOISY_FLAT, "--verify-repros")
    return rc, rep, repro_dir, tmp


def test_every_finding_reproduces_alone_and_native_passes_it(noisy_flat):
    rc, rep, _, _ = noisy_flat
    checks = checks_of(rep)
    assert rc == 1, why(rep)
    classes = {c["class"] for c in checks}
    assert {"crash", "wrong", "spurious-error"} <= classes, (classes, show(checks), why(rep))
    # one check per distinct finding: each harm group, each message group of spurious errors
    got = Counter((c["op"], c["class"], c["message"].split(":")[0] if c["class"] == "spurious-error"
                   else None) for c in checks)
    assert got == expected_findings(rep), (got, show(checks))
    assert any(c["message"] == "KeyError: 'complex128'" for c in checks), show(checks)
    fails = {f["id"]: f for f in rep["failures"]}
    for c in checks:
        assert c["ok"] and c["outcome"] == "reproduces", show(checks)
        assert c["backend"]["reproduces"] and c["native"]["passes"], show(checks)
        assert c["native"]["exit"] == 0 and "--native: native PyTorch" in c["native"]["stdout_tail"], show(checks)
        f = fails[c["example"]]  # the representative: a failing case of the group, with its script
        assert f["repro"] == c["script"] and Path(c["script"]).exists(), (c, f)
        if c["class"] == "crash":
            assert c["backend"]["exit"] < 0, show(checks)  # a signal on CPU (guard page)
            assert f.get("replay", {}).get("confirmed"), f
        else:
            assert c["backend"]["exit"] == 1 and "FAIL (reproduced)" in c["backend"]["stdout_tail"], show(checks)
    # the smallest case of the group stands for it
    sizes = {f["id"]: sum(_numel(o) for o in f.get("operands", {}).values()) for f in rep["failures"]}
    wrong = next(c for c in checks if c["class"] == "wrong")
    same = [f["id"] for f in rep["failures"] if f["status"] == "wrong" and f["reason"] != "input-modified"]
    assert sizes[wrong["example"]] == min(sizes[i] for i in same), (wrong["example"], sizes)
    assert rep["summary"]["exit_status"] == 1


def _numel(o):
    if isinstance(o, list):
        return sum(_numel(x) for x in o if x is not None)
    n = 1
    for s in o["shape"]:
        n *= s
    return n


def test_the_report_prints_each_finding_replayed_alone(noisy_flat, capsys):
    """--verify-repros-from re-runs the check from the JSON report: the same section, exit 0."""
    _, rep, _, tmp = noisy_flat
    path = tmp / "report.json"
    path.write_text(json.dumps(rep))
    assert cli.main(["--verify-repros-from", str(path), "--jobs", "2"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert verify.TITLE in out and "AUDITOR BUG" not in out, out
    lines = [l for l in out.splitlines() if l.startswith("  gather  ")]
    assert len(lines) == len(rep["repro_check"]), out
    for l, c in zip(lines, rep["repro_check"]):
        assert c["class"] in l and c["example"] in l and c["script"] in l, (l, c)
        assert "with backend: reproduces" in l and "native: passes" in l, l
    assert out.strip().splitlines()[-1].startswith("PASS:"), out
    # a tampered script (the backend dropped): the re-run says it does not reproduce, exit 1
    wrong = next(c for c in rep["repro_check"] if c["class"] == "wrong")
    one = tmp / "one.json"
    one.write_text(json.dumps(dict(rep, repro_check=[wrong])))
    s = Path(wrong["script"])
    text = s.read_text()
    try:
        s.write_text(re.sub(r"^BACKEND = .*$", "BACKEND = None", text, flags=re.M))
        assert cli.main(["--verify-repros-from", str(one), "--jobs", "2"]) == 1
        out = capsys.readouterr().out
        bad = [l for l in out.splitlines() if wrong["example"] in l]
        assert bad and "NOT reproduced" in bad[0] and "native: passes" in bad[0], out
        assert "AUDITOR BUG: 1 of" in out and out.strip().splitlines()[-1].startswith("FAIL:"), out
    finally:
        s.write_text(text)
    # a report written without --verify-repros records no representatives: exit 2, said why
    path.write_text(json.dumps({k: v for k, v in rep.items() if k != "repro_check"}))
    assert cli.main(["--verify-repros-from", str(path)]) == 2
    assert "--verify-repros" in capsys.readouterr().err


def test_a_malformed_report_is_refused_naming_the_field(noisy_flat, capsys):
    """--verify-repros-from checks the report against the shipped JSON Schema
    (stridewise/schemas/audit_report.schema.json) before re-running anything: a malformed report
    is exit 2, and the message names the file, the JSON path of the bad value and the rule."""
    _, rep, _, tmp = noisy_flat
    faults = [  # (the fault, the path named, words of the message)
        (lambda d: d["repro_check"][0].pop("script"), "$.repro_check[0]", "'script' is a required property"),
        (lambda d: d["repro_check"][0].update(cases="two"), "$.repro_check[0].cases",
         "'two' is not of type 'integer'"),
        (lambda d: d["repro_check"][0].update({"class": "slow"}), "$.repro_check[0].class", "'slow' is not one of"),
        (lambda d: d["repro_check"].__setitem__(0, "gather crash"), "$.repro_check[0]", "is not of type 'object'"),
        (lambda d: d.update(repro_check={"gather": 1}), "$.repro_check", "is not of type 'array'"),
        (lambda d: d.update(schema="something-else/1"), "$.schema", "'stridewise-audit/1' was expected"),
    ]
    for k, (fault, path, words) in enumerate(faults):
        bad = json.loads(json.dumps(rep))
        fault(bad)
        f = tmp / f"bad{k}.json"
        f.write_text(json.dumps(bad))
        capsys.readouterr()
        assert cli.main(["--verify-repros-from", str(f)]) == 2, (path, capsys.readouterr())
        out, err = capsys.readouterr()
        assert f"{f}: {path}: " in err and words in err and "audit_report.schema.json" in err, (path, err)
        assert verify.TITLE not in out, out  # nothing was re-run
    # not JSON at all: exit 2 too, said why
    (tmp / "torn.json").write_text(json.dumps(rep)[:200])
    assert cli.main(["--verify-repros-from", str(tmp / "torn.json")]) == 2
    assert "JSONDecodeError" in capsys.readouterr().err


def test_repro_script_argv_device_and_native(noisy_flat):
    """python3 script.py [DEVICE] [--native]: --native anywhere; anything else is exit 2."""
    _, rep, _, _ = noisy_flat
    c = next(c for c in rep["repro_check"] if c["class"] == "spurious-error")
    s = c["script"]
    text = Path(s).read_text()
    assert "[DEVICE] --native" in text and "Run:" in text

    def run(*argv):
        r = subprocess.run([sys.executable, s, *argv], capture_output=True, text=True, timeout=120,
                           env=_plain_env())
        return r.returncode, r.stdout + r.stderr

    # (the audit's check ran "script.py cpu" and "script.py cpu --native")
    for argv in (("--native",), ("--native", "cpu")):
        rc, out = run(*argv)
        assert rc == 0 and "--native: native PyTorch on cpu" in out, (argv, rc, out[-800:])
    rc, out = run()
    assert rc == 1 and "FAIL (reproduced)" in out and "KeyError" in out, (rc, out[-800:])
    for argv in (("cpu", "cpu"), ("--nativ",)):
        rc, out = run(*argv)
        assert rc == 2 and "usage:" in out, (argv, rc, out[-800:])
    # an exception outside the call is the script's own failure: exit 2, never 1 ("reproduced")
    rc, out = run("nosuchdevice")
    assert rc == 2 and "ERROR: this script failed" in out and "FAIL" not in out, (rc, out[-800:])


@pytest.mark.parametrize("kind, op, cls", [("skip_oob", "take", "missing-error"),
                                           ("writes_input", "scatter_add", "input-modified")])
def test_missing_error_and_input_modified_findings_reproduce(tmp_path, kind, op, cls):
    """Also with --max-repros 0: each finding's candidate cases (verify.candidates: its
    representative, then up to two more, tried only if it does not hold up) still get their
    scripts, and nothing else does."""
    rc, rep, repro_dir = audit(tmp_path, "--ops", op, "--matrix", "quick", "--ranks", "1",
                               "--dtypes", "float32", "--jobs", "2", "--backend", planted(kind),
                               "--verify-repros", "--max-repros", "0")
    checks = checks_of(rep)
    assert rc == 1 and cls in {c["class"] for c in checks}, (show(checks), why(rep))
    assert all(c["ok"] for c in checks), show(checks)
    scripts = sorted(str(p) for p in Path(repro_dir).rglob("*.py"))
    cands = sorted(x["script"] for c in checks for x in c["scripts"])
    assert scripts == cands and {c["script"] for c in checks} <= set(cands), (scripts, show(checks))
    assert all(c["script"] == c["scripts"][0]["script"] for c in checks), show(checks)  # 1st held


def test_without_findings_or_option_nothing_changes(tmp_path):
    args = ("--ops", "take", "--matrix", "quick", "--ranks", "1", "--dtypes", "float32",
            "--backend", planted("none"))
    rc, rep, _ = audit(tmp_path, *args)
    assert rc == 0 and "repro_check" not in rep, why(rep)
    rc, rep, _ = audit(tmp_path, *args, "--verify-repros")
    assert rc == 0 and rep["repro_check"] == [], why(rep)
    assert cli.main([*args, "--verify-repros", "--no-repros", "-q"]) == 2


# --------------------------------------------------------------------------------------------
# planted auditor bugs: the check must catch them


def _rebased(t, guard=False):
    """A repro writer that drops the storage offset: the storage from the view's first element
    on, offset 0. The same view -- but not the operand the audit ran."""
    flat = flat_storage(t, storage_elems(t))[t.storage_offset():]
    return (f"place(storage({repro._lit(flat)}, torch.{DTYPE_NAME[t.dtype]}), {tuple(t.shape)}, "
            f"{tuple(t.stride())}, 0)")


def _offset_lost(t, guard=False):
    """A repro writer that forgets the storage offset: another view of the same storage."""
    flat = flat_storage(t, storage_elems(t))
    return (f"place(storage({repro._lit(flat)}, torch.{DTYPE_NAME[t.dtype]}), {tuple(t.shape)}, "
            f"{tuple(t.stride())}, 0)")


@pytest.mark.parametrize("writer, outcome", [(_rebased, "does not reproduce"),
                                             (_offset_lost, "native fails")])
def test_a_repro_writer_that_drops_the_storage_offset_is_caught(tmp_path, monkeypatch, capsys,
                                                                writer, outcome):
    """The planted kernel ignores self's storage offset; a repro writer that drops the offset
    writes a script the kernel passes (rebased storage) or native fails (offset lost): either
    way the finding does not hold up alone, the report says AUDITOR BUG and the audit exits 1."""
    monkeypatch.setattr(repro, "_tensor_expr", writer)
    rc, rep, _ = audit(tmp_path, "--ops", "take", "--matrix", "quick", "--ranks", "1",
                       "--dtypes", "float32", "--jobs", "2", "--backend", planted("offset_ignored"),
                       "--verify-repros")
    checks = checks_of(rep)
    assert rc == 1 and rep["summary"]["exit_status"] == 1, why(rep)
    wrong = [c for c in checks if c["class"] == "wrong"]
    assert wrong and all(not c["ok"] and outcome in c["outcome"] for c in wrong), show(checks)
    last = capsys.readouterr().out.strip().splitlines()[-1]  # -q: the verdict line alone
    assert "AUDITOR BUG" in last, last
    lines = verify.text(checks)
    assert any(l.startswith("  AUDITOR BUG") for l in lines), lines
    if outcome == "does not reproduce":
        assert all("NOT reproduced (exit 0)" in l for l in lines if "take  wrong" in l), lines
    else:
        assert all("native: FAILS (exit 1)" in l for l in lines if "take  wrong" in l), lines


def test_a_guard_page_crash_reproduces_when_the_storage_outlasts_the_view(tmp_path):
    """Found by this check: an index whose storage runs past its view (offset 4, 2 elements
    read flat from a 6-element storage whose view ends at element 4). The audit's guard pages cut
    the storage to the view's extent, so the flat reader faults; a script that kept the whole
    storage read element 5 harmlessly and passed."""
    cid = "gather/func/idx=compound/r2/float32/i64/oobneg/s0"
    rc, rep, _ = audit(tmp_path, "--case", cid, "--guard", "--backend", planted("flat_index"),
                       "--verify-repros")
    checks = checks_of(rep)
    assert rc == 1 and [c["class"] for c in checks] == ["crash"], (show(checks), why(rep))
    assert checks[0]["ok"] and checks[0]["backend"]["exit"] < 0, show(checks)
    text = Path(checks[0]["script"]).read_text()
    assert "idx = place(storage([0, 0, 0, 0, -2], torch.int64), (1, 2), (2, 0), 4)" in text, text[:3000]


def test_a_finding_is_tried_with_its_next_cases_when_the_first_does_not_hold_up(tmp_path):
    """A finding's smallest case may meet a limit of native PyTorch on the device (ATen CUDA
    has no complex multiply reduction for scatter_; its index_select misses index values >=
    2**32): the check then tries the finding's next case (up to verify.CANDIDATES) and keeps the
    first that reproduces with the backend and passes natively, listing what it tried."""
    from stridewise.audit import verify

    def script(name, native_rc):
        p = tmp_path / f"{name}.py"
        p.write_text("import sys\n"
                     "native = '--native' in sys.argv\n"
                     f"print('OK' if native and {native_rc} == 0 else 'FAIL (reproduced)')\n"
                     f"sys.exit({native_rc} if native else 1)\n")
        return str(p)

    shared, good = script("shared", 1), script("good", 0)
    item = {"op": "scatter.reduce", "class": "spurious-error", "message": "KeyError: 'complex128'",
            "cases": 2, "device": "cpu", "example": "a", "script": shared,
            "scripts": [{"script": shared, "example": "a"}, {"script": good, "example": "b"}]}
    (c,) = verify.check([item], jobs=2)
    assert c["ok"] and c["example"] == "b" and c["script"] == good, c
    assert [t["outcome"] for t in c["tried"]] == ["native fails", "reproduces"], c["tried"]
    (c,) = verify.check([dict(item, scripts=item["scripts"][:1])], jobs=2)  # nothing else to try
    assert not c["ok"] and c["outcome"] == "native fails" and c["example"] == "a", c


def test_a_crash_that_needed_earlier_cases_is_not_called_an_auditor_bug(tmp_path):
    """FlagGems' index_add on the H200: a crash after other cases of its worker, whose replay
    alone passed (the report says "NOT reproduced on replay"). Its script cannot show it: the
    check says so ("as reported") instead of calling the report wrong. A crash the audit did
    confirm alone still must reproduce."""
    from stridewise.audit import verify

    p = tmp_path / "passes.py"
    p.write_text("import sys\nprint('OK')\nsys.exit(0)\n")
    item = {"op": "index_add", "class": "crash", "message": "crashed once but not when replayed "
            "alone", "cases": 1, "device": "cpu", "example": "a", "script": str(p),
            "after_others": True}
    (c,) = verify.check([item])
    assert c["ok"] and c["outcome"] == "crashed only after other cases", c
    assert "not reproduced, as reported" in "\n".join(verify.text([c])), verify.text([c])
    (c,) = verify.check([dict(item, after_others=False)])
    assert not c["ok"] and c["outcome"] == "does not reproduce", c


def test_findings_mark_a_crash_no_case_of_which_crashed_alone():
    from stridewise.audit import verify
    from stridewise.audit.caseid import parse_case_id
    from stridewise.audit.oracle import Verdict

    def res(cid, confirmed):
        return types.SimpleNamespace(case=parse_case_id(cid), built=types.SimpleNamespace(tensors={}),
                                     replay={"confirmed": confirmed},
                                     verdict=Verdict("crash", "", "worker died"))

    ids = ("index_add/inplace/contig/r1/float32/i64/rand/alpha=1/s1",
           "index_add/inplace/contig/r2/float32/i64/rand/alpha=1/s1")
    for conf, after in (((False, False), True), ((False, True), False)):
        rs = [res(c, k) for c, k in zip(ids, conf)]
        info = {"ops": {"index_add": {"harm": [{"class": "crash", "title": "crashes", "groups": [],
                                                "results": rs}]}}}
        (f,) = verify.findings(info)
        assert f["after_others"] is after, (conf, f)
