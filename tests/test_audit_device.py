"""The auditor on any PyTorch device (issue 24): what it does where it cannot get guard pages.

- The poisoned-margin check (``--margin``; the default on a device without guarded memory):
  every storage sits between 0xA5 margins, compared after the call. A planted backend that
  writes one byte past its target's view is found with the margin check's own reason; native
  ATen over the same cases passes (no false alarm); reads past a storage return poison.
- ``--guard`` is refused with its reason on a device that gives no guarded memory.
- Device errors are classified by exception type (torch.AcceleratorError and the device
  module's own exception classes), never by another device's wording.
- The test device (tests/privateuse1: a PrivateUse1 plug-in with host memory, loaded by torch's
  device autoload as torch_npu is) is audited with no flag but --device: its two seeded layout
  bugs are found and headed by their diagnoses, everything else passes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest
import torch

from conftest import PYDIR, ROOT, require_swdev  # noqa: E402

from stridewise import schemas  # noqa: E402
from stridewise.audit import cli, guard, worker  # noqa: E402

MARGIN_BACKEND = ROOT / "tests" / "margin_backend.py"


def audit(tmp_path, *args):
    """The CLI in-process on CPU: (exit status, JSON report)."""
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}.json"
    rc = cli.main([*map(str, args), "--json", str(out), "--no-repros", "--no-progress", "-q",
                   "--jobs", "1"])
    rep = json.loads(out.read_text()) if out.exists() else None
    assert rep is not None, f"audit exit {rc}, no report for {args}"
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out))
    return rc, rep


def failures(rep, reason=None):
    return [f for f in rep["failures"] if f["status"] in ("wrong", "crash", "bad-error", "error")
            and (reason is None or f["reason"] == reason)]


def test_margin_finds_a_write_past_the_view_and_native_passes(tmp_path):
    common = ("--device", "cpu", "--ops", "scatter_add", "--variants", "inplace", "--matrix",
              "quick", "--limit", "24", "--margin")
    rc, rep = audit(tmp_path, *common, "--backend", f"{MARGIN_BACKEND}:enable")
    assert rc == 1
    assert rep["memory"]["mode"] == "margin" and rep["memory"]["guard_pages"] is True
    hits = failures(rep, "outside-storage-written")
    assert len(hits) >= 6, [f["reason"] for f in failures(rep)]
    assert all("poisoned margin" in f["detail"] and "self" in f["detail"] for f in hits)
    rc, rep = audit(tmp_path, *common)  # the same cases natively: the margins stay intact
    assert rc == 0 and not failures(rep), failures(rep)[:3]


def test_margin_reads_return_poison(tmp_path):
    """A kernel that reads an expanded index as contiguous memory reads the margin's poison:
    an out-of-range value, so the bug shows instead of reading whatever lies there."""
    rc, rep = audit(tmp_path, "--device", "cpu", "--ops", "gather", "--variants", "func",
                    "--matrix", "quick", "--ranks", "2,3", "--margin", "--backend",
                    f"{ROOT / 'tests' / 'planted_backend'}:enable(flat_index)")
    assert rc == 1
    expanded = [f for f in failures(rep) if "expand" in f["id"].split("/")[2]]
    assert expanded and any(f["reason"] == "spurious-error" for f in expanded)


def test_margin_allocation_round_trip():
    """MarginAlloc: the storage's own bytes come back, margin bytes written are counted, and a
    storage the call replaced is not mistaken for a margin hit."""
    m = guard.MarginAlloc()
    for dtype in (torch.bool, torch.float16, torch.complex128, torch.int64):
        src = (torch.arange(7) % 2).to(dtype)
        t = m.empty(7, dtype, "cpu", reach=7)
        t.copy_(src)
        raw = t.untyped_storage().cpu()
        raw = bytes(torch.tensor(raw, dtype=torch.uint8).tolist())
        body, hit = m.split(t, raw)
        assert body == bytes(src.view(torch.uint8).tolist()) and hit == 0
        big = t.as_strided((8,), (1,), t.storage_offset())  # one element past the storage
        big[7:].fill_(1)
        raw = bytes(torch.tensor(t.untyped_storage().cpu(), dtype=torch.uint8).tolist())
        assert m.split(t, raw)[1] > 0
        assert m.split(t, raw + b"\0")[1] is None  # resized: not ours any more


def test_guard_is_refused_where_the_device_has_no_guarded_memory(monkeypatch, capsys):
    monkeypatch.setattr(guard, "GUARDED", ("cuda",))  # as if CPU had no guard-page allocator
    assert cli.main(["--device", "cpu", "--ops", "gather", "--guard", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--guard refused" in err and "'cpu' gives no guarded memory" in err
    assert "poisoned margins" in err


def test_device_errors_are_classified_by_type(monkeypatch):
    """A plug-in device's own exception class is a device fault whatever it says; another
    device's wording on an ordinary exception is not; AcceleratorError always is."""
    mod = types.ModuleType("fakedev_module")

    class FakeDevError(RuntimeError):
        pass

    FakeDevError.__module__ = "fakedev_module"
    mod.FakeDevError = FakeDevError
    monkeypatch.setattr(worker, "device_module", lambda d: mod)
    dev = torch.device("meta")  # any non-cpu, non-cuda device type torch knows
    assert worker.classify_error(FakeDevError("queue 3 stopped"), dev) == "device-fault"
    assert worker.classify_error(FakeDevError("device-side assert at op 7"), dev) == "device-assert"
    assert worker.classify_error(RuntimeError("CUDA error: an illegal memory access"), dev) is None
    accel = getattr(torch, "AcceleratorError", None)
    if accel is not None:
        try:
            raise accel("anything")
        except Exception as e:  # noqa: BLE001 - its constructor's signature differs by version
            err = e
        assert worker.classify_error(err, dev) == "device-fault"


# ---------------------------------------------------------------------------------------------
# The test device, audited as a user of a real plug-in device would: `stridewise audit
# --device swdev`, the device loaded by torch's autoload from its entry point (no --import).

DEV_ROOT = ROOT / "tests" / "privateuse1"
SEED = int(os.environ.get("STRIDEWISE_SEED") or 0) or int.from_bytes(os.urandom(3), "little")
SEEDED = ("gather", "scatter_add", "index_select")  # the two buggy kernels and a correct one


@pytest.fixture(scope="module")
def dev_env(tmp_path_factory):
    """The environment of a process that gets swdev from a plain ``import torch``."""
    require_swdev()
    import importlib.util

    spec = importlib.util.spec_from_file_location("_swdev_autoload",
                                                  DEV_ROOT / "sw_testdev_autoload.py")
    autoload = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(autoload)
    base = {k: v for k, v in os.environ.items() if k != "SW_TESTDEV_BUGS"}
    base["PYTHONPATH"] = str(PYDIR)
    return autoload.autoload_env(tmp_path_factory.mktemp("swdev_dist"), base)


def device_audit(tmp_path, env, *args, bugs=None):
    """(exit status, JSON report or None, stdout, stderr) of ``stridewise audit --device swdev``."""
    out = tmp_path / f"d{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    run_env = dict(env, **({"SW_TESTDEV_BUGS": bugs} if bugs is not None else {}))
    p = subprocess.run([sys.executable, "-m", "stridewise", "audit", "--device", "swdev",
                        "--matrix", "quick", "--seed", str(SEED), "--jobs", "2", "--no-progress",
                        "--json", str(out / "r.json"), "--repro-dir", str(out / "repro"), *args],
                       env=run_env, capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    rep = json.loads((out / "r.json").read_text()) if (out / "r.json").exists() else None
    if rep is not None:
        schemas.validate(rep, schemas.AUDIT_REPORT, str(out / "r.json"))
    return p.returncode, rep, p.stdout, p.stderr


def harm_of(rep, op):
    return {g["class"]: g for g in rep["ops"][op]["harm"]}


def test_device_audit_finds_the_two_seeded_bugs(tmp_path, dev_env):
    rc, rep, out, err = device_audit(tmp_path, dev_env, "--ops", ",".join(SEEDED))
    why = f"STRIDEWISE_SEED={SEED}: exit {rc}\n{out[-4000:]}\n{err[-2000:]}"
    assert rc == 1 and rep is not None, why
    # what the run could see, said in the header and the JSON
    assert rep["memory"]["mode"] == "margin" and rep["memory"]["guard_pages"] is False, why
    assert "'swdev' gives no guarded memory" in rep["memory"]["why_no_guard"]
    assert rep["oracle"].startswith("native PyTorch") and "on CPU" in rep["oracle"]
    assert "memory: poisoned margins" in out and "oracle: native PyTorch" in out, why
    assert rep["device_name"] == "stridewise test device (host memory)"
    # bug (a): gather reads its index as contiguous memory. Headed by the layout diagnosis:
    # wrong values for a strided index, poison (out of range) read past an expanded one
    g = harm_of(rep, "gather")
    # the diagnosis may narrow it further where every failing case shares more (seed 9509119:
    # "idx.noncontig&kind=rand": every failing case of that run had random index values)
    pred = g["wrong"]["predicate"].split("&")
    assert pred[0] in ("idx.noncontig", "layout:idx=transpose") and all(
        p.startswith("kind=") for p in pred[1:]), (g["wrong"], why)
    assert "the index is read as contiguous memory" in g["wrong"]["why"], why
    spurious = [x for x in g["spurious-error"]["groups"] if x["predicate"] == "idx.stride0"]
    assert spurious and "out of bounds" in spurious[0]["message"], (g["spurious-error"], why)
    # bug (b): scatter_add_ / scatter_add.out ignore the written tensor's storage offset
    s = harm_of(rep, "scatter_add")
    assert list(s) == ["wrong"] and s["wrong"]["predicate"] in ("written.offset", "self.offset"), why
    assert "storage offset" in s["wrong"]["why"], why
    failing = [f for f in failures(rep) if f["op"] == "scatter_add"]
    assert failing and {f["variant"] for f in failing} <= {"inplace", "out"}, why
    # everything else passes: the correct kernel and the other kernels' unaffected cases
    assert rep["ops"]["index_select"]["counts"]["failed"] == 0, why
    # a finding's repro script reproduces on the device alone (same poisoned margins) and
    # passes with the bug switched off
    script = failing[0]["repro"]
    assert "ALLOC = MarginAlloc()" in open(script).read()
    p = subprocess.run([sys.executable, script], env=dev_env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and "FAIL (reproduced)" in p.stdout, (p.stdout, p.stderr)
    p = subprocess.run([sys.executable, script], env=dict(dev_env, SW_TESTDEV_BUGS="none"),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr)


def test_device_audit_passes_with_its_bugs_off(tmp_path, dev_env):
    """No false alarm: the same device with both bugs switched off passes every case it runs,
    backward included; the ops it has no kernel for are 'unsupported', not failures."""
    rc, rep, out, err = device_audit(tmp_path, dev_env, "--ops", "gather,scatter_add,scatter,"
                                     "index_select,take_along_dim,embedding", "--grad", "-q",
                                     bugs="none")
    assert rc == 0 and rep["summary"]["failed"] == 0, f"STRIDEWISE_SEED={SEED}\n{out}\n{err[-3000:]}"
    assert rep["summary"]["pass"] > 1000
    judged = [c for c in rep["cases"] if c[1] == "pass"]
    assert len(judged) == rep["summary"]["pass"]


def test_device_guard_is_refused_with_the_reason(tmp_path, dev_env):
    rc, rep, out, err = device_audit(tmp_path, dev_env, "--ops", "gather", "--guard")
    assert rc == 2 and rep is None
    assert "--guard refused: 'swdev' gives no guarded memory" in err, err
