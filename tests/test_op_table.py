"""The op table (core/include/stridewise/ops.def) is the one list of ops: the library built from
it, supported_ops(), stats() and the routing all agree with the file, row for row."""
import pytest
import torch

import stridewise as sw
from conftest import op_table_rows

FAMILIES = {"Gather": "gather", "Scatter": "scatter", "IndexDim": "index_dim", "IndexK": "index_k"}


def file_rows():
    rows = op_table_rows()
    assert rows, "ops.def: no SW_OP rows read"
    return rows


def test_the_library_holds_the_files_table():
    rows = file_rows()
    assert [int(r[1]) for r in rows] == list(range(1, len(rows) + 1))
    want = [" ".join([key, FAMILIES[fam], packets]) for _, _, key, _, fam, packets in rows]
    assert list(torch.ops.stridewise._op_table()) == want


def test_supported_ops_and_stats_keys_are_the_tables():
    keys = [r[2] for r in file_rows()]
    assert sw.supported_ops() == keys
    assert list(sw.stats()) == keys


@pytest.mark.parametrize("key", [r[2] for r in file_rows()])
def test_each_row_routes_its_packets_on_the_cpu(key):
    rows = {r[2]: r[5].split() for r in file_rows()}
    with sw.use(include=[key]):
        assert sw.enabled() == [key]
        for packet in rows[key]:
            ops = getattr(torch.ops.aten, packet)
            ours = [ov for ov in ops.overloads()
                    if "/adapter/" in _cpu_kernel(f"aten::{packet}" + (f".{ov}" if ov != "default" else ""))]
            assert ours, f"{key}: no overload of aten::{packet} has stridewise's CPU kernel"
    for packet in rows[key]:  # disabled again: ATen's kernels
        for ov in getattr(torch.ops.aten, packet).overloads():
            name = f"aten::{packet}" + (f".{ov}" if ov != "default" else "")
            assert "/adapter/" not in _cpu_kernel(name), name


def _cpu_kernel(name: str) -> str:
    for line in torch._C._dispatch_dump(name).splitlines():
        if line.startswith("CPU:"):
            return line
    return ""
