"""sw-compare's verdict on runs that differ in what they recorded (issue 25), on synthetic dumps:
inputs an op does not read, an op present in one run only, where a difference came from (an
op of one run, outside the dump, uninitialized memory), the chain it reached, and INCOMPLETE
(exit 3) for one-sided, cut-short and damaged indexes. Fresh random data every run."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from conftest import PYDIR  # noqa: F401  (puts the package on the path)

from stridewise.dump._testing import SyntheticDump, compare_binary, run_compare

SEED = random.SystemRandom().randrange(1 << 30)


@pytest.fixture(scope="module")
def exe():
    return compare_binary()


@pytest.fixture
def rng():
    print(f"seed {SEED}")
    return np.random.default_rng(SEED)


def report(exe, a, b, *args):
    rc, out, err = run_compare(exe, a, b, "--format", "json", *args)
    assert rc in (0, 1, 3), f"exit {rc}: {err}"
    return rc, json.loads(out)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


W = 1 << 20  # a weight's address in both runs; activations live elsewhere


def model(root, rng_values, *, perturb=None, extra_fill=False, garbage=None, read_self=False,
          planted=None, cut=None):
    """A two-layer forward: fill_ (an overwrite-only op: its self is not read) of a buffer,
    t(weight), addmm, relu, and gather. perturb: B adds it to the weight first, by an add_ that
    A never runs. garbage: the uninitialized bytes fill_ overwrites. read_self: fill_'s self is
    recorded as read (an op that reads what it overwrites is not ignored). planted: op whose
    output gets one element changed."""
    w, x, b, idx = rng_values
    d = SyntheticDump(root)
    g = garbage if garbage is not None else np.full(8, np.nan, np.float32)
    if extra_fill:
        d.op("aten::zero_", [g], [np.zeros(8, np.float32)], overload="default",
             in_fields=[{"read": False, "alias": "written", "addr": [5 << 20, (5 << 20) + 32]}],
             out_fields=[{"alias": "written", "addr": [5 << 20, (5 << 20) + 32]}])
    d.op("aten::fill_", [g], [np.ones(8, np.float32)], overload="Scalar",
         in_fields=[{"read": read_self, "alias": "written", "addr": [4 << 20, (4 << 20) + 32]}],
         out_fields=[{"alias": "written", "addr": [4 << 20, (4 << 20) + 32]}])
    if perturb is not None:
        d.op("aten::add_", [w], [w + perturb], overload="Tensor",
             in_fields=[{"alias": "written", "addr": [W, W + w.nbytes]}],
             out_fields=[{"alias": "written", "addr": [W, W + w.nbytes]}])
        w = w + perturb
    wt = np.ascontiguousarray(w.T)
    d.op("aten::t", [w], [wt], in_fields=[{"addr": [W, W + w.nbytes]}],
         out_fields=[{"alias": "view", "addr": [W, W + w.nbytes]}])
    y = (x @ wt + b).astype(np.float32)
    if planted == "addmm":
        y = y.copy()
        y.flat[y.size // 2] = abs(y.flat[y.size // 2]) + 10  # positive: relu passes it on
    A1 = 2 << 20
    d.op("aten::addmm", [b, x, wt], [y],
         in_fields=[{"addr": [3 << 20, (3 << 20) + b.nbytes]}, {"addr": [6 << 20, (6 << 20) + x.nbytes]},
                    {"addr": [W, W + w.nbytes]}],
         out_fields=[{"alias": "new", "addr": [A1, A1 + y.nbytes]}])
    r = np.maximum(y, 0)
    A2 = 7 << 20
    d.op("aten::relu", [y], [r], in_fields=[{"addr": [A1, A1 + y.nbytes]}],
         out_fields=[{"alias": "new", "addr": [A2, A2 + r.nbytes]}])
    gth = np.take_along_axis(r, idx, 1)
    d.op("aten::gather", [r, idx], [gth], in_fields=[{"addr": [A2, A2 + r.nbytes]}, {"addr": [8 << 20, (8 << 20) + idx.nbytes]}],
         out_fields=[{"alias": "new", "addr": [9 << 20, (9 << 20) + gth.nbytes]}])
    d.close()
    return Path(root) / "step0" / "rank0"


def values(rng):
    return f32(rng, 6, 6), f32(rng, 4, 6), f32(rng, 6), rng.integers(0, 6, (4, 3))


def test_inputs_not_read_are_not_differences(tmp_path, exe, rng):
    v = values(rng)
    model(tmp_path / "a", v, garbage=f32(rng, 8))
    model(tmp_path / "b", v, garbage=f32(rng, 8))
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 0, rep["summary"]
    rows = [e for e in rep["entries"] if e["op"] == "aten::fill_" and e["io"] == "input"]
    assert [e["status"] for e in rows] == ["NOT_READ"] and rep["summary"]["not_read"] == 1
    assert rep["first_divergent"] == [] and rep["incomplete"] == []


def test_an_op_that_reads_what_it_overwrites_is_compared(tmp_path, exe, rng):
    v = values(rng)
    model(tmp_path / "a", v, garbage=f32(rng, 8), read_self=True)
    model(tmp_path / "b", v, garbage=f32(rng, 8), read_self=True)
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 1
    first = rep["first_divergent"][0]
    assert (first["op"], first["kind"]) == ("aten::fill_", "outside"), first
    assert first["failing"] == ["in#0(input0)"]


def test_perturbed_weight_is_traced_to_the_one_sided_add(tmp_path, exe, rng):
    v = values(rng)
    model(tmp_path / "a", v)
    model(tmp_path / "b", v, perturb=np.float32(1e-3))
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 1
    first = rep["first_divergent"][0]
    assert (first["op"], first["kind"]) == ("aten::t", "one_sided"), first
    assert (first["writer"]["op"], first["writer"]["side"]) == ("aten::add_", "B")
    assert [c["op"] for c in first["chain"]] == ["aten::t", "aten::addmm", "aten::relu", "aten::gather"]
    assert len(rep["origins"]) == 1  # addmm, relu and gather descend from it
    assert "1 op calls ran in B only" in rep["incomplete"][0]
    # the text report leads with it, then the chain, then the table
    text = run_compare(exe, tmp_path / "a", tmp_path / "b")[1]
    lead = text.split("STATUS")[0]
    assert lead.index("first divergent op (step 0 rank 0): aten::t call 0") < lead.index(
        "which ran in B only") < lead.index("reached 4 ops: aten::t[0] -> aten::addmm[0]")


def test_planted_op_is_named_and_later_ops_descend_from_it(tmp_path, exe, rng):
    v = values(rng)
    model(tmp_path / "a", v)
    model(tmp_path / "b", v, planted="addmm")
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    first = rep["first_divergent"][0]
    assert rc == 1 and (first["op"], first["kind"]) == ("aten::addmm", "introduced")
    chain = [c["op"] for c in first["chain"]]  # gather joins when its index picks the element
    assert chain[:2] == ["aten::addmm", "aten::relu"] and set(chain) <= {"aten::addmm", "aten::relu", "aten::gather"}
    assert [o["op"] for o in rep["origins"]] == ["aten::addmm"]


def test_an_extra_op_in_one_run_does_not_shift_the_pairing(tmp_path, exe, rng):
    v = values(rng)
    model(tmp_path / "a", v)
    model(tmp_path / "b", v, extra_fill=True)
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 3 and rep["summary"]["fail"] == 0 and rep["summary"]["only_b_ops"] == 1
    assert rep["summary"]["verdict"] == "INCOMPLETE"
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b", "--subset", "A")
    assert rc == 0 and rep["summary"]["only_b_ops"] == 1
    rc, _ = report(exe, tmp_path / "a", tmp_path / "b", "--subset", "B")
    assert rc == 3


def test_uninitialized_memory_read_is_named(tmp_path, exe, rng):
    x = f32(rng, 16)
    for root in ("a", "b"):
        d = SyntheticDump(tmp_path / root)
        e = f32(rng, 16)  # what empty returned: different garbage per run
        d.op("aten::empty", [], [e], overload="memory_format", out_fields=[{"alias": "new", "addr": [100, 164]}])
        d.op("aten::add", [e, x], [e + x], overload="Tensor",
             in_fields=[{"addr": [100, 164]}, {"addr": [200, 264]}], out_fields=[{"alias": "new", "addr": [300, 364]}])
        d.close()
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    first = rep["first_divergent"][0]
    assert rc == 1 and (first["op"], first["kind"]) == ("aten::add", "uninitialized"), first
    assert first["writer"]["op"] == "aten::empty"


def _lines(rd):
    return (rd / "index.jsonl").read_text().splitlines()


def test_missing_and_duplicated_records_are_incomplete(tmp_path, exe, rng):
    v = values(rng)
    model(tmp_path / "a", v)
    rd = model(tmp_path / "b", v)
    full = _lines(rd)
    # cut short after a few records: INCOMPLETE, led by the count, never PASS
    (rd / "index.jsonl").write_text("\n".join(full[:5]) + "\n")
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 3, out
    summary = out[out.index("\nsummary: "):]
    assert summary.startswith("\nsummary: INCOMPLETE (3 reasons: 3 op calls ran in A only"), summary
    assert "no end record" in out and "result: INCOMPLETE (exit 3)" in out
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b", "--subset", "B")
    # --subset B forgives B's missing ops and end record, not the op record whose inputs are lost
    assert rc == 3 and rep["summary"]["only_a_ops"] == 3
    assert [m.split(":")[0] for m in rep["incomplete"]] == ["B"] and "lists 1 tensor inputs" in rep["incomplete"][0]
    (rd / "index.jsonl").write_text("\n".join(full[:4]) + "\n")  # cut at an op boundary
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b", "--subset", "B")
    assert rc == 0 and rep["summary"]["only_a_ops"] == 4, rep["incomplete"]
    # one duplicated line: damaged, even with --subset
    lines = list(full)
    k = next(i for i, line in enumerate(lines) if '"kind":"tensor"' in line.replace(" ", ""))
    lines.insert(k + 1, lines[k])
    (rd / "index.jsonl").write_text("\n".join(lines) + "\n")
    for extra in ((), ("--subset", "B"), ("--subset", "A")):
        rc, rep = report(exe, tmp_path / "a", tmp_path / "b", *extra)
        assert rc == 3 and any("damaged index" in m and "a second record" in m for m in rep["incomplete"]), rep
    # one tensor line deleted: the op record's input count and the end record say so
    lines = list(full)
    del lines[k]
    (rd / "index.jsonl").write_text("\n".join(lines) + "\n")
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b", "--subset", "B")
    assert rc == 3 and any("the end record counts" in m for m in rep["incomplete"]), rep
