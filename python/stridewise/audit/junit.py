"""``--junit-xml PATH``: the audit's findings in JUnit XML, the format CI systems read (pytest's
--junitxml, GitLab's and Jenkins' test reports).

One ``<testsuite>`` per op audited (name ``stridewise.audit.<op>``), holding:
  - one ``<testcase>`` per finding group (harm.groups: a harm class, or one message of a class
    split by message), classname ``<op>.findings``, name ``<op>: <class title>[: <message>]``,
    failing with the group's diagnosis as its message and the group's case ids in its text;
  - one ``<testcase>`` per failing case (an auditor error: an ``<error>``, not a ``<failure>``),
    classname ``<op>``, name = the case id, failing with
    the case's diagnosis (its group's, else the verdict's reason) as its message, and in its text
    the verdict's detail and the repro script's path (``repro: <path>``, when one was written);
  - one passing ``<testcase>`` ``<op>: N case(s) pass`` for the cases that passed, so an op with
    no finding shows up green rather than missing.
Skipped, unsupported and native-run cases are counted in the suite's ``skipped``. The XML is
written with the standard library; tests read it back with junitparser.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from . import oracle
from .report import by_op


def _groups(op_info: dict) -> list:
    """(name suffix, diagnosis text, results) per finding group of one op, most harmful first."""
    out = []
    for g in op_info.get("harm") or []:
        subs = g["groups"] if g["groups"] and (g["class"] == "spurious-error" or len(g["groups"]) > 1) else [g]
        for x in subs:
            d = x.get("diagnosis")
            label = g["title"] + (f": {x['message']}" if x is not g and x.get("message") else "")
            out.append((label, d.text if d is not None else g["title"], x["results"]))
    return out


def _case_diagnosis(groups: list) -> dict:
    return {r.case.id: text for _, text, rs in groups for r in rs}


def _failure(parent, message: str, text: str, kind: str = "failure"):
    f = ET.SubElement(parent, kind, message=message[:2000], type="stridewise.audit")
    f.text = text
    return f


def document(results, info: dict, meta: dict) -> ET.ElementTree:
    root = ET.Element("testsuites", name="stridewise audit", time=f"{meta.get('seconds', 0.0):.3f}")
    for op, rs in by_op(results).items():
        groups = _groups(info["ops"].get(op, {}))
        diag = _case_diagnosis(groups)
        failing = [r for r in rs if r.verdict.status in oracle.FAILING or r.verdict.status == "error"]
        errors = sum(r.verdict.status == "error" for r in failing)
        passing = [r for r in rs if r.verdict.status == "pass"]
        skipped = len(rs) - len(failing) - len(passing)
        suite = ET.SubElement(root, "testsuite", name=f"stridewise.audit.{op}",
                              tests=str(len(groups) + len(failing) + 1),
                              failures=str(len(groups) + len(failing) - errors), errors=str(errors),
                              skipped=str(skipped), time=f"{sum(r.seconds for r in rs):.3f}")
        props = ET.SubElement(suite, "properties")
        for k in ("device", "backend", "matrix", "seed"):
            ET.SubElement(props, "property", name=k, value=str(meta.get(k)))
        for label, text, grs in groups:
            tc = ET.SubElement(suite, "testcase", classname=f"{op}.findings", name=f"{op}: {label}", time="0")
            _failure(tc, text, f"{len(grs)} case(s):\n" + "\n".join(r.case.id for r in grs))
        for r in failing:
            tc = ET.SubElement(suite, "testcase", classname=op, name=r.case.id, time=f"{r.seconds:.4f}")
            v = r.verdict
            lines = [f"verdict: {v.status} ({v.reason})"]
            if v.detail:
                lines.append(str(v.detail)[:4000])
            if r.repro:
                lines.append(f"repro: {r.repro}")
            _failure(tc, diag.get(r.case.id) or v.reason or v.status, "\n".join(lines),
                     "error" if v.status == "error" else "failure")
        ET.SubElement(suite, "testcase", classname=op, name=f"{op}: {len(passing)} case(s) pass",
                      time=f"{sum(r.seconds for r in passing):.3f}")
    return ET.ElementTree(root)


def write(path: str, results, info: dict, meta: dict) -> None:
    tree = document(results, info, meta)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
