"""int32 coverage of the quick matrix (issue 39): an int32-only bug is diagnosed "int32".

The planted backend's ``int32_contig`` fault reads a contiguous int32 index one element on (a
fast path's int32 instantiation with its offset arithmetic wrong); int64 indices and other
int32 layouts are right. Before the quick matrix ran int32 at three ranks per index layout, the
fault failed 2 of 368 index_select cases: "too few to tell what they share". On the CPU; fresh
seeds (test_audit's STRIDEWISE_SEED)."""
from __future__ import annotations

import pytest
import torch

from test_audit import PLANTED, audit, why
from stridewise.audit import explain, matrix
from stridewise.audit.specs import SPECS

OPS = ("index_select", "gather", "index_add", "scatter_add")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("kind", ["int32_contig", "int32_next"])
def test_an_int32_only_bug_is_diagnosed_int32_from_the_quick_matrix(tmp_path, op, kind):
    rc, rep, _ = audit(tmp_path, "--ops", op, "--matrix", "quick", "--jobs", "2", "--no-repros",
                       "--backend", f"{PLANTED}:enable({kind}, {op})")
    v = rep["ops"][op]
    assert rc == 1 and v["counts"]["failed"] >= explain.MIN_GROUP, why(rep)
    head = v["diagnosis"][0]
    assert "idx_dtype=i32" in head["predicate"].split("&"), why(rep)
    assert "int32 indices" in head["text"] and head["explained"] == head["failing"], why(rep)
    failing = [f for f in rep["failures"] if f["op"] == op and f["status"] in ("wrong", "crash")]
    assert failing and all("/i32/" in f["id"] for f in failing), why(rep)


@pytest.mark.parametrize("name", [n for n in SPECS if n in OPS or n == "index_copy"])
def test_every_index_layout_has_three_int32_cases_in_the_quick_matrix(name):
    spec = SPECS[name]
    for variant in spec.variants:
        cases = matrix.cases_for(spec, variant, matrix.MatrixOptions(matrix="quick"))
        per_layout: dict = {}
        for c in cases:
            if c.idx_dtype == "i32" and c.kind == "rand":
                lay = dict(c.layouts).get("idx", "contiguous")
                per_layout.setdefault(lay, set()).add(c.rank)
        assert per_layout and all(len(r) >= explain.MIN_GROUP for r in per_layout.values()), \
            (name, variant, per_layout)


def test_every_int32_case_would_show_an_index_read_one_element_off():
    """The quick matrix's shapes are small: a one-element index, or neighbours of equal value,
    hide a read one element off (index_select failed 2 of its 6 contiguous int32 cases with
    seed 397628, 3 of 12 seeds below the diagnosis's minimum). Every int32 rand case's integer
    index has two or more elements and its neighbours in memory differ wherever its range has
    two values (gen._offsets_visible, gen.index_values); fresh seeds."""
    from test_audit import SEED
    from stridewise.audit import gen

    seen = 0
    for name, spec in SPECS.items():
        for c in matrix.build_matrix([spec], matrix.MatrixOptions(matrix="quick", seed=SEED)):
            if c.idx_dtype != "i32" or c.kind != "rand":
                continue
            b = gen.build(spec, c)
            for t in b.tensors.values():
                for x in t if isinstance(t, list) else [t]:
                    if not isinstance(x, torch.Tensor) or x.dtype != torch.int32:
                        continue
                    seen += 1
                    mem = gen.flat_storage(x)[x.storage_offset():x.storage_offset() + gen.extent(x)]
                    assert x.numel() >= 2, (c.id, tuple(x.shape))
                    if gen.extent(x) > 1:
                        assert bool((mem[1:] != mem[:-1]).all()), (c.id, mem.tolist())
    assert seen >= 100, seen
