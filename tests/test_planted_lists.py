"""The planted-fault lists (tests/planted/*.json) stay runnable: every fault's text occurs once
in its file, and the tests or gtest filters (the emulation's, the CPU core's) it names exist. scripts/plant_faults.py runs them."""
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LISTS = sorted((ROOT / "tests/planted").glob("*.json"))


def _tool():
    spec = importlib.util.spec_from_file_location("plant_faults", ROOT / "scripts/plant_faults.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_there_are_lists():
    # a list may be added (the docs must then name it: test_the_docs_counts_are_true), none lost
    assert {"entry.json", "index_fill.json", "index_k_cuda.json"} <= {p.name for p in LISTS}


@pytest.mark.parametrize("path", LISTS, ids=lambda p: p.name)
def test_each_fault_applies_once_and_names_real_tests(path):
    faults = _tool().load(path)  # raises when a text no longer occurs exactly once
    assert len({f["name"] for f in faults}) == len(faults), "names must be unique"
    gtests = {"filter": "\n".join(p.read_text() for p in (ROOT / "core/tests/cuda").glob("*.cpp")),
              "core_filter": "\n".join(p.read_text() for p in (ROOT / "core/tests").glob("*.cpp"))}
    for f in faults:
        for sel in f.get("tests", []):
            file, _, name = sel.partition("::")
            assert (ROOT / file).is_file(), sel
            base = name.split("[")[0]
            assert not base or re.search(rf"def {re.escape(base)}\(", (ROOT / file).read_text()), sel
        for kind, sources in gtests.items():  # a gtest filter: patterns joined by ':'
            for one in f.get(kind, "").split(":") if kind in f else []:
                suite, _, test = one.partition(".")
                pat = re.escape(test).replace(r"\*", r"\w*")
                assert re.search(rf"TEST\({suite},\s*{pat}\)", sources), (kind, one)


def test_a_stale_fault_is_refused(tmp_path):
    bad = tmp_path / "stale.json"
    bad.write_text(json.dumps({"about": "", "faults": [
        {"name": "gone", "file": "scripts/plant_faults.py", "old": "no such text \x00", "new": "",
         "filter": "X.Y"}]}))
    with pytest.raises(SystemExit, match="occurs 0 times"):
        _tool().load(bad)


def test_the_docs_counts_are_true():
    """docs/index_ops.md names each list with its count of faults."""
    doc = (ROOT / "docs/index_ops.md").read_text()
    named = dict(re.findall(r"`tests/planted/([\w.]+\.json)` \((\d+) faults", doc))
    assert sorted(named) == [p.name for p in LISTS], named
    for p in LISTS:
        assert int(named[p.name]) == len(json.loads(p.read_text())["faults"]), p.name
