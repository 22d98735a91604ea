"""``stridewise audit --junit-xml PATH`` (issue 39), read back with junitparser as a CI would: one
test case per finding group (failing with its diagnosis) and per failing case (name = case id,
failing with its diagnosis, the repro script's path in its text), one passing test case per op;
a clean audit writes no failure at all. On the CPU (the planted backends of test_audit.py)."""
from __future__ import annotations

import pytest

from test_audit import audit, planted, why

junitparser = pytest.importorskip("junitparser")  # requirements.txt pins it; the device carries it


def _suites(path):
    xml = junitparser.JUnitXml.fromfile(str(path))
    return {s.name: s for s in xml}


def _failure(tc):
    res = [r for r in tc.result if isinstance(r, (junitparser.Failure, junitparser.Error))]
    return res[0] if res else None


def test_findings_and_failing_cases_are_junit_test_cases(tmp_path):
    path = tmp_path / "audit.xml"
    rc, rep, _ = audit(tmp_path, "--ops", "gather", "--matrix", "quick", "--ranks", "1,2,3",
                       "--backend", planted("flat_index"), "--junit-xml", path)
    assert rc == 1 and rep["summary"]["failed"] > 0, why(rep)
    suites = _suites(path)
    assert set(suites) == {"stridewise.audit.gather"}
    cases = list(suites["stridewise.audit.gather"])
    by_name = {tc.name: tc for tc in cases}
    # one case per failing case: its id, its diagnosis as the message, the repro script's path
    failing = {f["id"]: f for f in rep["failures"]}
    assert failing.keys() <= by_name.keys()
    texts = {d["text"] for d in rep["ops"]["gather"]["diagnosis"]}
    for cid, f in failing.items():
        fail = _failure(by_name[cid])
        assert fail is not None, cid
        assert fail.message, cid
        assert f"repro: {f['repro']}" in fail.text, (cid, fail.text)
    # one case per finding group, failing with the group's diagnosis and listing its cases, each
    # of which fails with that same diagnosis; the op's leading diagnosis is one of them
    groups = [tc for tc in cases if tc.classname == "gather.findings"]
    assert len(groups) == sum(max(1, len(g["groups"])) if g["class"] == "spurious-error" or len(g["groups"]) > 1
                              else 1 for g in rep["ops"]["gather"]["harm"])
    assert rep["ops"]["gather"]["diagnosis"][0]["text"] in {_failure(g).message for g in groups}
    assert any(_failure(g).message in texts for g in groups)
    listed = []
    for g in groups:
        ids = _failure(g).text.splitlines()[1:]
        assert ids and all(_failure(by_name[cid]).message == _failure(g).message for cid in ids), g.name
        listed += ids
    assert sorted(listed) == sorted(failing)
    # the passing cases, once
    passing = [tc for tc in cases if _failure(tc) is None]
    assert len(passing) == 1 and passing[0].name == f"gather: {rep['summary']['pass']} case(s) pass"
    suite = suites["stridewise.audit.gather"]
    assert suite.failures == len(failing) + len(groups) and suite.errors == 0


def test_a_clean_audit_writes_no_failure(tmp_path):
    path = tmp_path / "audit.xml"
    rc, rep, _ = audit(tmp_path, "--ops", "gather,index_select", "--matrix", "quick", "--ranks", "1,2",
                       "--junit-xml", path)
    assert rc == 0, why(rep)
    suites = _suites(path)
    assert set(suites) == {"stridewise.audit.gather", "stridewise.audit.index_select"}
    for name, s in suites.items():
        assert s.failures == 0 and s.errors == 0, name
        assert [tc.name for tc in s] == [f"{name.rsplit('.', 1)[1]}: "
                                         f"{rep['ops'][name.rsplit('.', 1)[1]]['counts']['pass']} case(s) pass"]
