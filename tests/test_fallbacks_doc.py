"""docs/fallbacks.md is what scripts/fallbacks_doc.py writes from the runs of PyTorch's own test
files (bench/results/pytorch_suite*.json), so every count it names is the JSON's; it names every
fallback rule the library can report and no other; and the JSON is consistent (a call's rules add
up to its fallback total). docs/index_ops.md, advanced_indexing.md and scatter.md link to it.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "fallbacks.md"


def test_doc_is_the_scripts_output():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "fallbacks_doc.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_doc_names_every_rule(sw):
    names = set(sw._ops._fallback_rules())
    rows = re.findall(r"^\| `[a-z_]+` \| `([a-z_]+)` \|", DOC.read_text(), re.M)
    explained = set(re.findall(r"^- `([a-z_]+)` \(", DOC.read_text(), re.M))
    assert set(rows) == names, (sorted(names - set(rows)), sorted(set(rows) - names))
    assert explained == names, (sorted(names - explained), sorted(explained - names))


def test_runs_are_consistent():
    for name in ("pytorch_suite_before.json", "pytorch_suite.json"):
        run = json.loads((ROOT / "bench" / "results" / name).read_text())
        for f, e in run["files"].items():
            for mode in ("on", "off"):
                r = e[f"routing_{mode}"]
                assert sum(r["outcomes"].values()) > 100, (name, f, mode)
                for op, s in r["ops"].items():
                    assert sum(s["fallback_reasons"].values()) == s["fallback"], (name, f, op)
                    assert s["fallback"] <= s["calls"], (name, f, op)
            assert not e["routing_off"]["ops"], "routing off counted stridewise calls"


def test_linked_from_the_op_docs():
    for doc in ("index_ops.md", "advanced_indexing.md", "scatter.md"):
        assert "fallbacks.md" in (ROOT / "docs" / doc).read_text(), doc
