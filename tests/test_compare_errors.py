"""sw-compare: corrupt and truncated inputs give exit status 2 and name the file and the reason;
report formats; standards from flags and config with visible precedence; .npy variants; the
Python wrapper; a tensor stored past 4 GiB (sparse file)."""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest


from stridewise.dump import CompareError, compare  # noqa: E402
from stridewise.dump._testing import SyntheticDump, run_compare  # noqa: E402
from stridewise.dump._writer import ShardWriter  # noqa: E402


def small_dump(root, values=(1.0, 2.0, 3.0, 4.0)):
    d = SyntheticDump(root)
    x = np.asarray(values, dtype=np.float32)
    d.op("aten::gather", [x], [x * 1])
    d.op("aten::mul", [x], [x * 2])
    d.close()
    return Path(root) / "step0" / "rank0"


def assert_named_error(rc, err, path, reason):
    assert rc == 2, err
    assert str(path) in err and reason in err, err
    assert "Failed" not in err


def test_truncated_shard(tmp_path, exe):
    small_dump(tmp_path / "a")
    rd = small_dump(tmp_path / "b")
    shard = rd / "shard_00000.safetensors"
    os.truncate(shard, shard.stat().st_size - 5)
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b")
    assert_named_error(rc, err, shard, "file truncated")
    assert "ERROR" in out  # the report is still written, with the failing entries


def test_corrupt_shard_header(tmp_path, exe):
    small_dump(tmp_path / "a")
    rd = small_dump(tmp_path / "b")
    shard = rd / "shard_00000.safetensors"
    data = bytearray(shard.read_bytes())
    data[8:12] = b"!!!!"
    shard.write_bytes(bytes(data))
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b")
    assert_named_error(rc, err, shard, "safetensors header is not valid JSON")


def test_missing_shard_and_missing_key(tmp_path, exe):
    small_dump(tmp_path / "a")
    rd = small_dump(tmp_path / "b")
    (rd / "shard_00000.safetensors").unlink()
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b")
    assert_named_error(rc, err, rd / "shard_00000.safetensors", "cannot open: No such file or directory")
    rd = small_dump(tmp_path / "c")
    lines = (rd / "index.jsonl").read_text().splitlines()
    rec = json.loads(lines[2])
    rec["key"] = "no-such-key"
    lines[2] = json.dumps(rec)
    (rd / "index.jsonl").write_text("\n".join(lines) + "\n")
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "c")
    assert_named_error(rc, err, "shard_00000.safetensors", "tensor 'no-such-key' (listed at")


def test_corrupt_index_line_is_an_error_but_a_torn_last_line_is_not(tmp_path, exe):
    small_dump(tmp_path / "a")
    rd = small_dump(tmp_path / "b")
    index = rd / "index.jsonl"
    good = index.read_text()
    lines = good.splitlines()
    lines[3] = lines[3][:20]
    index.write_text("\n".join(lines) + "\n")
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b")
    assert_named_error(rc, err, f"{index}:4", "invalid JSON record")
    # a capture killed while writing its last record: everything before it compares, and the
    # verdict is INCOMPLETE (exit 3) unless --subset B says B may hold fewer ops
    index.write_text(good + '{"kind":"tensor","op":"aten::mu')
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 3, err
    assert "INCOMPLETE: B: " in out and "an incomplete last record" in out
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b", "--subset", "B")
    assert rc == 0 and "warning: B: " in out and "an incomplete last record" in out
    lines = good.splitlines()
    del lines[2]
    lines.insert(2, '{"kind":"tensor","op":"aten::gather"}')
    index.write_text("\n".join(lines) + "\n")
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b")
    assert_named_error(rc, err, f"{index}:3", "record lacks field 'call'")


def test_bad_inputs_and_usage(tmp_path, exe):
    small_dump(tmp_path / "a")
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "nope")
    assert rc == 2 and "nope" in err
    (tmp_path / "x.npy").write_bytes(b"\x93NUMPY\x01\x00\x40\x00{'descr': '<f4', ")
    np.save(tmp_path / "y.npy", np.zeros(3, np.float32))
    rc, out, err = run_compare(exe, tmp_path / "x.npy", tmp_path / "y.npy")
    assert_named_error(rc, err, tmp_path / "x.npy", "runs past the end of the file")
    np.save(tmp_path / "t.npy", np.zeros(1000, np.float32))
    os.truncate(tmp_path / "t.npy", 1000)
    rc, out, err = run_compare(exe, tmp_path / "t.npy", tmp_path / "y.npy")
    assert_named_error(rc, err, tmp_path / "t.npy", "file truncated")
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "y.npy")
    assert rc == 2 and "cannot compare a directory" in err
    (tmp_path / "empty").mkdir()
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "empty")
    assert_named_error(rc, err, tmp_path / "empty", "not a stridewise dump")
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "a", "--format", "xml")
    assert rc == 2
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "a", "--op-standard", "gather=wobbly")
    assert rc == 2 and "unknown standard 'wobbly'" in err
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"dtypes": {"float32": "exact"}, "rtoll": 1}')
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "a", "--config", cfg)
    assert_named_error(rc, err, cfg, "unknown key 'rtoll'")


def test_precedence_flag_over_config_over_builtin_is_reported(tmp_path, exe):
    small_dump(tmp_path / "a")
    small_dump(tmp_path / "b", values=(1.0, 2.0, 3.003, 4.0))  # gather: 1 of 4 wrong at 1e-3; mul too
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b", "--format", "json")
    rep = json.loads(out)
    by_op = {(e["op"], e["io"]): e for e in rep["entries"]}
    assert by_op[("aten::gather", "output")]["standard"]["why"] == "op rule 'aten::gather' [built-in]"
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"standards": {"loose": {"rtol": 0.01, "atol": 0.01, "max_wrong_fraction": 0}},
                               "ops": {"gather": "loose"}, "dtypes": {"float32": "loose"}}))
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b", "--config", cfg, "--format", "json")
    assert rc == 0, out
    rep = json.loads(out)
    assert all(e["standard"]["name"] == "loose" and f"[config {cfg}]" in e["standard"]["why"] for e in rep["entries"])
    assert rep["standards"]["standards"]["loose"]["source"] == f"config {cfg}"
    rc, out, err = run_compare(exe, tmp_path / "a", tmp_path / "b", "--config", cfg, "--rtol", "1e-4", "--op-standard",
                       "aten::gather=bitwise")
    assert rc == 1
    assert "rtol=0.0001 [flag --rtol]" in out  # header shows the override and where it came from
    assert "ops -> bitwise [flag --op-standard]: aten::gather" in out
    assert f"ops -> loose [config {cfg}]: gather" in out
    assert "precedence: flag > config > built-in" in out


def test_formats_and_exit_codes(tmp_path, exe):
    small_dump(tmp_path / "a")
    small_dump(tmp_path / "b", values=(1.0, 2.0, 3.5, 4.0))
    rc, out, _ = run_compare(exe, tmp_path / "a", tmp_path / "b", "--format", "csv")
    assert rc == 1
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 4 and {r["status"] for r in rows} == {"FAIL"}
    fail = [r for r in rows if r["status"] == "FAIL"][0]
    assert fail["standard_source"] and fail["rtol"] != "" and "first at [2]" in fail["reason"]
    rc, out, _ = run_compare(exe, tmp_path / "a", tmp_path / "a", "--format", "csv", "-o", tmp_path / "r.csv")
    assert rc == 0 and out == "" and (tmp_path / "r.csv").read_text().startswith("status,step,rank")
    rc, out, _ = run_compare(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 1 and "result: DIVERGED (exit 1)" in out and out.count("FAIL ") == 4
    rc, out, _ = run_compare(exe, tmp_path / "a", tmp_path / "a")
    assert rc == 0 and "result: PASS (exit 0)" in out and "PASS " not in out.split("STATUS")[1].split("summary")[0]
    rc, out, _ = run_compare(exe, tmp_path / "a", tmp_path / "a", "--show", "all")
    assert rc == 0 and out.count("\nPASS ") == 4


def test_npy_orders_endianness_and_versions(tmp_path, exe, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((5, 7, 3)).astype(np.float64)
    np.save(tmp_path / "c.npy", a)
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    np.save(tmp_path / "be.npy", a.astype(">f8"))
    np.lib.format.write_array(open(tmp_path / "v2.npy", "wb"), a, version=(2, 0))
    for other in ("f.npy", "be.npy", "v2.npy"):
        rc, out, err = run_compare(exe, tmp_path / "c.npy", tmp_path / other, "--dtype-standard", "float64=bitwise")
        assert rc == 0, (other, out, err)
    b = a.copy()
    b[2, 4, 1] += 1
    np.save(tmp_path / "bf.npy", np.asfortranarray(b).astype(">f8"))
    rc, out, err = run_compare(exe, tmp_path / "c.npy", tmp_path / "bf.npy", "--format", "json")
    e = json.loads(out)["entries"][0]
    assert rc == 1 and "first at [2, 4, 1]" in e["reason"] and e["metrics"]["first_wrong_index"] == (2 * 7 + 4) * 3 + 1


def test_python_wrapper(tmp_path, exe):
    small_dump(tmp_path / "a")
    small_dump(tmp_path / "b", values=(1.0, 2.0, 3.5, 4.0))
    r = compare(tmp_path / "a", tmp_path / "b")
    assert not r.passed and r.returncode == 1
    assert r.first_divergent["op"] == "aten::gather"
    assert {e["op"] for e in r.failing()} == {"aten::gather", "aten::mul"}
    assert compare(tmp_path / "a", tmp_path / "b", op_standards={"*": "ignore"}).passed
    with pytest.raises(CompareError, match="not a stridewise dump"):
        (tmp_path / "e").mkdir()
        compare(tmp_path / "a", tmp_path / "e")


def test_tensor_past_4gib_in_a_sparse_shard(tmp_path, exe):
    """The writer's offsets past 4 GiB, read back by the safetensors library and by sw-compare
    (the first 5 GiB of the shard are a hole: nothing is allocated or written)."""
    from safetensors import safe_open
    big = (5 << 30) + 8
    got = {}
    for name, val in (("a", 1.0), ("b", 2.0)):
        (tmp_path / name).mkdir()
        w = ShardWriter(str(tmp_path / name), shard_bytes=1 << 40, fsync="never", _first_data_offset=big)
        x = np.arange(6, dtype=np.float32) * val
        fname, offset, nbytes = w.append("x", "F32", [2, 3], x.view(np.uint8))
        w.close()
        assert offset == w.data_start + big > (1 << 32) and nbytes == 24
        with safe_open(str(tmp_path / name / fname), framework="np") as f:
            got[name] = f.get_tensor("x")
        np.testing.assert_array_equal(got[name], x.reshape(2, 3))
    shard = "shard_00000.safetensors"
    rc, out, err = run_compare(exe, tmp_path / "a" / shard, tmp_path / "b" / shard, "--tensor", "x", "--format", "json")
    e = json.loads(out)["entries"]
    assert rc == 1 and len(e) == 1 and e[0]["name"] == "x" and e[0]["metrics"]["max_abs"] == 5.0
