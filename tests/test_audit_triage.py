"""The auditor on what auditing ATen CUDA (H200, torch 2.11) taught it, runnable on CPU.

- a sticky device error met in a case's set-up belongs to the case run before it in that worker
  (device-side assert, or a fault: crash); the interrupted case gets its own verdict from a
  fresh worker, never an auditor error (tests/planted_backend/cuda_sim.py simulates the device)
- a case that hung and then answered alone in a fresh worker takes the replay's verdict; a
  worker stuck after printing a device-side assertion is killed after --assert-grace seconds
- native CPU failing an INTERNAL ASSERT (index_reduce prod on float16/bfloat16) is an oracle bug:
  the reference comes from upcast copies; native CPU itself is then a known issue
- ATen CUDA's 32-bit truncation of index values >= 2**32 is a precise known issue
- writing into a self-overlapping tensor may be refused with ATen's internal-overlap error
Each rule is also seen failing on a planted fault.

Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from conftest import PYDIR, ROOT  # noqa: E402  (the installed package or python/)
SIM = ROOT / "tests" / "planted_backend" / "cuda_sim.py"
PLANTED = ROOT / "tests" / "planted_backend"
# conftest.py stands a namespace package in for stridewise when its native library does not
# load: the auditor needs only torch

from stridewise import schemas  # noqa: E402
from stridewise.audit import backends, cli, gen, known, matrix, oracle  # noqa: E402
from stridewise.audit.caseid import parse_case_id  # noqa: E402
from stridewise.audit.runner import RunConfig, Runner, _Slot  # noqa: E402
from stridewise.audit.specs import SPECS  # noqa: E402
from stridewise.audit.worker import execute  # noqa: E402

SEED = int(os.environ.get("STRIDEWISE_SEED") or random.SystemRandom().randrange(1, 10**6)) % 10**6
CPU = torch.device("cpu")
TOL = oracle.Tolerance()


def audit(tmp_path, *args):
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    rc = cli.main([*map(str, args), "--json", str(out / "r.json"), "--no-repros", "--no-progress",
                   "-q"])
    rep = json.loads((out / "r.json").read_text())
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out / "r.json"))  # the shipped JSON Schema
    return rc, rep


def status(rep) -> dict:
    return dict(map(tuple, rep["cases"]))


def detail(rep, cid) -> str:
    return next(f["detail"] for f in rep["failures"] if f["id"] == cid)


def run_cases(cids, backend=None, device_type=None, **cfg):
    """Runner results (verdicts with reasons) for case ids, one worker."""
    cfg.setdefault("run_native", True)  # cuda_sim registers no kernel: its variants are "native"
    r = Runner(RunConfig(backend=backends.parse(backend) if backend else None, **cfg), SPECS)
    if device_type:
        r.device_type = device_type  # judge as if on that device (known issues are per device)
    return {x.case.id: x for x in r.run([parse_case_id(c) for c in cids])}


def sim(mode, *args) -> str:
    return f"{SIM}:enable({','.join([mode, *map(str, args)])})"


def each(cids) -> list:
    return [a for c in cids for a in ("--case", c)]


A = "index_select/func/contig/r2/float32/i64/oob/s{}"  # native raises: a device asserts
B = "index_select/func/contig/r2/float32/i64/rand/s{}"  # valid


def ab(seed=SEED):
    a2 = "index_add/func/contig/r3/float16/i64/oobneg/s{}".format(seed)
    return [A.format(seed), B.format(seed), a2, B.format(seed + 1)]


# --------------------------------------------------------------------------------------------
# 1. sticky device errors are attributed to the case that left them


def test_planted_late_device_assert_is_attributed_to_the_previous_case(tmp_path):
    """The device-side assert of A (whose op raised an ordinary error) surfaces only in B's
    set-up: A is the device-assert, B is replayed and passes; no auditor error (the H200 run
    reported scatter_reduce cases as auditor errors in gen.materialize)."""
    cids = ab()
    rc, rep = audit(tmp_path, "--jobs", "1", "--run-native", "--backend", sim("late"), *each(cids))
    st = status(rep)
    assert rc == 0 and rep["summary"]["error"] == 0, rep["summary"]
    # (the simulated device runs native kernels: a valid case passes natively, status "native")
    assert [st[c] for c in cids] == ["device-assert", "native", "device-assert", "native"], st
    d = detail(rep, cids[0])
    assert "surfaced only in the set-up of the next case" in d and cids[1] in d, d


def test_planted_late_device_fault_is_a_crash_of_the_previous_case(tmp_path):
    """An illegal address surfacing in B's set-up is A's crash (a fault, not an assert)."""
    cids = ab()
    rc, rep = audit(tmp_path, "--jobs", "1", "--run-native", "--backend", sim("late_fault"), *each(cids))
    st = status(rep)
    assert rc == 1 and [st[c] for c in cids] == ["crash", "native", "crash", "native"], st
    assert rep["summary"]["error"] == 0
    d = detail(rep, cids[0])
    assert "illegal memory access" in d and "attributed to this case" in d and cids[1] in d, d


def test_device_assert_on_a_valid_case_is_a_crash_confirmed_by_replay(tmp_path):
    """A device-side assert where native accepts the case is a crash, and like every crash it
    is replayed alone in a fresh worker to confirm it (on the H200, 2026-12-01, the planted
    flat reader's guard crashes surfaced as such asserts and went unconfirmed)."""
    cids = [B.format(11), B.format(12)]  # valid cases
    rc, rep = audit(tmp_path, "--jobs", "1", "--run-native", "--backend", sim("assert_valid"), *each(cids))
    assert rc == 1 and rep["summary"]["error"] == 0, rep["summary"]
    assert sorted(f["id"] for f in rep["failures"]) == sorted(cids), status(rep)
    for f in rep["failures"]:
        assert (f["status"], f["reason"]) == ("crash", "device-assert-valid"), f
        assert f.get("replay") and f["replay"]["confirmed"], f


def test_planted_assert_after_a_host_error_is_flushed_by_the_case_itself(tmp_path):
    """The worker synchronizes after an op that raised: the pending assert is the case's own."""
    cids = ab()
    rc, rep = audit(tmp_path, "--jobs", "1", "--run-native", "--backend", sim("sync"), *each(cids))
    st = status(rep)
    assert rc == 0 and [st[c] for c in cids] == ["device-assert", "native", "device-assert", "native"], st
    assert "surfaced when synchronizing after the call raised" in detail(rep, cids[0])


def test_device_error_before_any_case_is_not_blamed_on_the_case(tmp_path):
    """A fresh worker meeting a device error in set-up has no previous case: the case is tried
    again, then reported as device-unusable (an error of the run, not of the case)."""
    r = Runner(RunConfig(log_dir=str(tmp_path)), SPECS)
    s = _Slot(r, 0)
    c = parse_case_id(B.format(SEED))
    stale = {"ok": False, "stale": "device-assert", "fatal": "device-assert",
             "exc_type": "AcceleratorError", "exc_msg": "CUDA error: device-side assert triggered",
             "detail": "device error before the op ran (set-up)"}
    for _ in range(2):
        s.case, s.sent = c, time.time()
        assert r._handle(s, dict(stale)) is None and s.pending_replay == c
        s.pending_replay = None
    s.case, s.sent = c, time.time()
    res = r._handle(s, dict(stale))
    assert (res.verdict.status, res.verdict.reason) == ("error", "device-unusable"), res.verdict


def test_a_crash_as_the_first_case_of_a_fresh_worker_is_not_replayed(tmp_path):
    """A crash in a worker that ran nothing before already ran alone: confirmed without a
    replay (each replay costs a worker start: seconds with a GPU backend). A hang is replayed
    even then, and a crash after other cases is replayed."""
    cid = "gather/func/contig/r2/float32/i64/rand/s{}".format(SEED)
    segv = {"ok": False, "fatal": "crash", "exit": -11, "detail": "worker died: SIGSEGV"}
    r = Runner(RunConfig(log_dir=str(tmp_path)), SPECS)
    s = _Slot(r, 0)
    s.case, s.sent = parse_case_id(cid), time.time()
    res = r._handle(s, dict(segv))
    assert res is not None and res.verdict.status == "crash" and s.pending_replay is None, res
    assert res.replay["confirmed"] and res.replay["alone"], res.replay
    hang = {"ok": False, "fatal": "crash", "timeout": True, "detail": "no answer within 9s (hang?)"}
    s = _Slot(r, 1)
    s.case, s.sent = parse_case_id(cid), time.time()
    assert r._handle(s, hang) is None and s.pending_replay is not None


# --------------------------------------------------------------------------------------------
# 2. a hang, then an answer alone: the replay's verdict


@pytest.mark.parametrize("mode", ["hang", "hang_silent"])
def test_planted_hang_then_device_assert_takes_the_replays_verdict(tmp_path, mode):
    """index_add oob on the H200: the first attempt hung, the replay device-asserted. The case
    is a device-assert (noted flaky), not a crash; a printed assertion ends the wait early."""
    state = tmp_path / "state"
    state.mkdir()
    cids = ["index_add/func/contig/r3/float32/i64/oob/alpha=1/s{}".format(SEED), B.format(SEED)]
    t0 = time.time()
    timing = ("--timeout", "60", "--assert-grace", "1") if mode == "hang" else ("--timeout", "3")
    rc, rep = audit(tmp_path, "--jobs", "1", *timing, "--run-native", "--backend", sim(mode, state), *each(cids))
    took = time.time() - t0
    st = status(rep)
    assert rc == 0 and [st[c] for c in cids] == ["device-assert", "native"], (st, rep["failures"])
    f = next(f for f in rep["failures"] if f["id"] == cids[0])
    assert f["replay"]["flaky"] and not f["replay"]["confirmed"], f
    assert "flaky: the first attempt hung" in f["detail"], f["detail"]
    if mode == "hang":
        assert "after printing a device-side assertion" in f["detail"] and took < 30, took


def _replayed(first: dict, replay: dict, cid: str, log_dir):
    r = Runner(RunConfig(log_dir=str(log_dir)), SPECS)
    s = _Slot(r, 0)
    c = parse_case_id(cid)
    s.history.append(parse_case_id("gather/func/contig/r1/float32/i64/rand/s1"))  # it ran a case before
    s.case, s.sent = c, time.time()
    assert r._handle(s, first) is None and s.pending_replay == c
    s.case, s.sent, s.pending_replay = c, time.time(), None
    return r._handle(s, replay)


def test_a_hang_does_not_hide_a_wrong_replay_nor_does_a_lone_segfault_pass(tmp_path):
    """The replay's verdict stands after a hang even when it fails (planted: wrong values);
    a segfault that does not reproduce alone stays a crash (memory corrupted earlier)."""
    cid = "gather/func/contig/r2/float32/i64/rand/s{}".format(SEED)
    c = parse_case_id(cid)
    good = execute(SPECS["gather"], c, CPU)
    bad = dict(good, result=dict(good["result"], raw=bytes(b ^ 0x40 for b in good["result"]["raw"])))
    hang = {"ok": False, "fatal": "crash", "timeout": True, "detail": "no answer within 9s (hang?)"}
    res = _replayed(dict(hang), good, cid, tmp_path)
    assert res.verdict.status == "pass" and "flaky" in res.verdict.detail, res.verdict
    res = _replayed(dict(hang), bad, cid, tmp_path)
    assert (res.verdict.status, res.verdict.reason) == ("wrong", "values"), res.verdict
    segv = {"ok": False, "fatal": "crash", "exit": -11, "detail": "worker died: SIGSEGV"}
    res = _replayed(segv, good, cid, tmp_path)
    assert res.verdict.status == "crash" and "not when replayed alone" in res.verdict.detail, res.verdict
    # a segfault that alone is wrong values (FlagGems' index_add on the H200: the crash needed
    # the cases run before it): the case is what its repro script reproduces, the crash noted
    res = _replayed(dict(segv), bad, cid, tmp_path)
    assert (res.verdict.status, res.verdict.reason) == ("wrong", "values"), res.verdict
    assert "crashed once after other cases" in res.verdict.detail, res.verdict.detail


# --------------------------------------------------------------------------------------------
# 3. native CPU failing an internal assert: the oracle upcasts

IR = "index_reduce/func/idx=step_slice/r2/float16/i64/rand/include_self=1,reduce=prod/s0"  # H200 run


def _internal_assert_cases():
    s = SPECS["index_reduce"]
    out = []
    for c in matrix.build_matrix([s], matrix.MatrixOptions("quick", seed=SEED % 50)) + [parse_case_id(IR)]:
        if c.variant == "func" and c.kind in ("rand", "dup", "wide"):
            b = gen.build(s, c)
            if known._index_reduce_prod_scalar_slice(b):
                out.append((c, b))
    return out


def _answer(b, result):
    return {"ok": True, "result": gen.pack(result),
            "storages": {k: [gen.storage_bytes(t)] for k, t in b.tensors.items()}}


def test_oracle_upcasts_when_native_cpu_fails_an_internal_assert():
    cases = _internal_assert_cases()
    assert any(c.id == IR for c, _ in cases)
    spec = SPECS["index_reduce"]
    for c, b in cases:
        ref = oracle.reference(spec, b, TOL)
        assert ref.error is None and ref.tol is not None and "oracle upcast" in ref.note, (c.id, ref.error)
        ns = {k: (v.contiguous().float() if k in ("self", "src") else v) for k, v in ref.ns.items()}
        good = oracle.run_call(spec.calls["func"], ns).to(b.tensors["self"].dtype)  # a correct answer
        v = oracle.judge(spec, b, ref, _answer(b, good), TOL)
        assert (v.status, v.reason) == ("pass", "oracle-upcast") and "internal assert" in v.detail, (c.id, v)
        planted = good.clone()
        planted.view(-1)[0] *= 1.25  # a planted wrong product
        v = oracle.judge(spec, b, ref, _answer(b, planted), TOL)
        assert (v.status, v.reason) == ("wrong", "values") and "oracle upcast" in v.detail, (c.id, v)
        # native CPU itself (the worker's answer) raises the assert: a known ATen CPU issue
        ans = execute(spec, c, CPU)
        v = oracle.judge(spec, b, ref, ans, TOL)
        assert v.reason == "spurious-error", v
        k = known.match(c.op, "cpu", b, v.reason, f"{ans['exc_type']}: {ans['exc_msg']}")
        assert k is not None and k.name == "aten-cpu-index-reduce-prod-half-internal-assert"
        assert known.match(c.op, "cpu", b, "values", "") is None  # only that symptom
        assert known.match(c.op, "cuda", b, v.reason, ans["exc_msg"]) is None


def test_known_cpu_internal_assert_predicate_is_exact():
    """The KnownIssue's conditions hold exactly where native CPU fails the assert."""
    s = SPECS["index_reduce"]
    hits = 0
    for c in matrix.build_matrix([s], matrix.MatrixOptions("full", seed=SEED)):
        b = gen.build(s, c)
        same = {k: oracle._map(v, oracle.clone_layout) for k, v in b.tensors.items()}
        try:
            with oracle.quiet_native():
                oracle.run_call(s.calls[c.variant], oracle.namespace(b, same))
            got = False
        except Exception as e:  # noqa: BLE001
            got = "INTERNAL ASSERT" in str(e)
        pred = known._index_reduce_prod_scalar_slice(b)
        hits += got
        if c.kind in ("rand", "dup", "wide", "empty"):  # bad indices may raise before the assert
            assert pred == got, (c.id, pred, got)
        else:
            assert pred or not got, c.id
    assert hits > 0


def test_native_cpu_audit_of_the_internal_assert_case_is_known(tmp_path):
    rc, rep = audit(tmp_path, "--case", IR)
    assert rc == 0 and status(rep) == {IR: "known"}, rep["failures"]
    rc, rep = audit(tmp_path, "--case", IR, "--no-known")
    assert rc == 1 and rep["failures"][0]["reason"] == "spurious-error"


# --------------------------------------------------------------------------------------------
# 4. ATen CUDA truncates index values >= 2**32 to 32 bits: a precise known issue

H200_MISSING = [  # bad-error/missing-error in the H200 report (seed 0)
    "index_select/func/contig/r3/float16/i64/oobbig/s0",
    "index_select/out/idx=compound/r3/float16/i64/oobbig/s0",
    "index_add/inplace/idx=transpose/r3/float32/i64/oobbig/alpha=1/s0",
    "index_add/out/idx=transpose/r3/int64/i64/oobbig/alpha=1/s0",
    "index_reduce/func/contig/r3/uint8/i64/oobbig/include_self=1,reduce=amax/s0",
    "embedding/func/idx=transpose/r3/uint8/i64/oobbig/s0",
    "embedding/out/idx=expand/r3/complex128/i64/oobbig/s0"]
H200_ASSERTED = [  # device-assert there: outside the conditions
    "index_reduce/out/contig/r3/float32/i64/oobbig/include_self=0,reduce=prod/s0",  # index_fill_ first
    "embedding/out/idx=compound/r3/float16/i64/oobbig/s0"]  # 36 indices: the large-index kernel


def _built(cid):
    c = parse_case_id(cid)
    return gen.build(SPECS[c.op], c)


def test_known_cuda_index_truncation_matches_precisely():
    name = "aten-cuda-index-truncated-to-32-bits"
    for cid in H200_MISSING:
        b = _built(cid)
        assert known.match(b.case.op, "cuda", b, "missing-error").name == name, cid
        assert known.match(b.case.op, "cpu", b, "missing-error") is None, cid
        assert known.match(b.case.op, "cuda", b, "values") is None, cid
        idx = b.tensors["idx"]
        big = idx.reshape(-1) >= 2**32
        n = 2**32 + (b.tensors["self"].size(0) if b.case.op == "embedding" else
                     b.tensors["self"].size(b.scalars["dim"]))
        b.tensors["idx"] = torch.where(big, torch.full_like(idx.reshape(-1), n), idx.reshape(-1))
        assert known.match(b.case.op, "cuda", b, "missing-error") is None, cid  # wraps out of range
    for cid in H200_ASSERTED:
        b = _built(cid)
        assert known.match(b.case.op, "cuda", b, "missing-error") is None, cid
    b = _built("gather/func/contig/r3/float32/i64/oobbig/s0")
    assert known.match("gather", "cuda", b, "missing-error") is None  # gather checks int64 values


def test_planted_truncate32_is_known_on_cuda_only_for_the_listed_ops(tmp_path):
    """The planted truncate32 backend judged as a CUDA backend: its index_select oobbig misses
    become the known issue, its gather ones (gather is not affected in ATen) still fail."""
    cids = [c.id for s in ("index_select", "gather") for c in
            matrix.build_matrix([SPECS[s]], matrix.MatrixOptions("quick", seed=SEED, ranks=(1, 3)))
            if c.kind == "oobbig" and c.idx_dtype == "i64"]
    res = run_cases(cids, f"{PLANTED}:enable(truncate32)", device_type="cuda")
    for cid, r in res.items():
        want = "known" if cid.startswith("index_select") else "bad-error"
        assert r.verdict.status == want, (cid, r.verdict)
    res = run_cases(cids[:3], f"{PLANTED}:enable(truncate32)", device_type="cuda", apply_known=False)
    assert all(r.verdict.status == "bad-error" for r in res.values())


# --------------------------------------------------------------------------------------------
# 5. refusing to write into a self-overlapping tensor


def test_planted_overlap_refusal_passes_only_for_overlapping_written_tensors():
    """ATen CUDA index_put_(accumulate=True) refuses an expanded self; native CPU writes.
    Simulated by cuda_sim's refuse_overlap: every refused case has an overlapping self."""
    opt = matrix.MatrixOptions("quick", seed=SEED, variants=("inplace", "out"))
    cids = [c.id for c in matrix.build_matrix([SPECS["index_put"]], opt)]
    res = run_cases(cids, sim("refuse_overlap"))
    refused = {cid for cid, r in res.items() if r.verdict.reason == "overlap-refused"}
    ok = ("pass", "native")  # index_put.out: ATen's generic kernel, not the sim's: "native"
    assert all(r.verdict.status in ok for r in res.values()), \
        [(c, r.verdict) for c, r in res.items() if r.verdict.status not in ok][:3]
    assert refused, "no case with an overlapping self"
    for cid in refused:
        b = _built(cid)
        assert gen.internal_overlap(b.tensors[b.written]), cid


def test_overlap_refusal_needs_the_overlap_and_atens_wording():
    msg = ("unsupported operation: more than one element of the written-to tensor refers to a "
           "single memory location. Please clone() the tensor before performing the operation.")
    refuse = {"ok": False, "exc_type": "RuntimeError", "exc_msg": msg}

    def verdict(cid, ans):
        b = _built(cid)
        return oracle.judge(SPECS[b.case.op], b, oracle.reference(SPECS[b.case.op], b, TOL), ans, TOL)

    exp = next(cid for cid in ("index_put/inplace/self=expand/r2/float32/i64/rand/accumulate=1,pat=one/"
                               f"s{SEED + k}" for k in range(50))
               if gen.internal_overlap(_built(cid).tensors["self"]))  # (a size-1 dim may not overlap)
    assert verdict(exp, refuse).reason == "overlap-refused"
    planted = dict(refuse, exc_msg="index out of range in self")  # another error: still spurious
    assert verdict(exp, planted).reason == "spurious-error"
    contig = "index_put/inplace/r2/float32/i64/rand/accumulate=1,pat=one/s{}".format(SEED)
    assert verdict(contig, refuse).reason == "spurious-error"  # nothing overlaps: a bad refusal


def test_internal_overlap_is_exact():
    z = torch.zeros(12)
    assert gen.internal_overlap(z[:3].expand(2, 3))
    assert gen.internal_overlap(z.as_strided((2, 2), (1, 1)))  # no stride 0, still shared
    assert not gen.internal_overlap(z.as_strided((3, 2), (2, 3)))  # interleaved, disjoint
    assert not gen.internal_overlap(z[:1].expand(1, 1)) and not gen.internal_overlap(z.view(3, 4).t())


# --------------------------------------------------------------------------------------------
# 6. ATen CPU gather reads an expanded int32 index at twice its element width: a known issue

GX = "gather/out/idx=expand_nondim/r3/float32/i32/rand/s1009"  # found by the CI's own audit


def _random_gather_layout(rng):
    """Small random gather operands biased toward the expanded-index layout (dim 0, index
    strides in {0, 1, 2}, self sizes equal to or above the index's)."""
    r = rng.randint(1, 4)
    ish = [rng.randint(1, 4) for _ in range(r)]
    ssh = [s + rng.choice([0, 0, 1]) for s in ish]
    dim = rng.choice([0, 0, 0, rng.randrange(r)])
    ssh[dim] = rng.randint(1, 5)
    st = [rng.choice([0, 0, 1, 2]) for _ in range(r)]
    base = torch.randint(0, ssh[dim], (1 + sum((s - 1) * t for s, t in zip(ish, st)),),
                         generator=torch.Generator().manual_seed(rng.randrange(2**31)))
    x = torch.randn(ssh).to(rng.choice([torch.float32, torch.float16, torch.int32]))
    if r > 1 and rng.random() < 0.3:
        x = x.transpose(0, -1).contiguous().transpose(0, -1)
    return x, dim, base.int().as_strided(ish, st)


def test_known_gather_int32_expanded_predicate_covers_every_native_error():
    """Over random layouts: wherever native CPU gather with an int32 index differs from the same
    gather with the index as int64, the KnownIssue holds (and it does differ somewhere)."""
    rng = random.Random(SEED)
    wrong = 0
    for _ in range(4000):
        x, dim, idx = _random_gather_layout(rng)
        b = types.SimpleNamespace(tensors={"self": x, "idx": idx}, scalars={"dim": dim},
                                  case=types.SimpleNamespace(op="gather", variant="func"))
        if not torch.equal(torch.gather(x, dim, idx), torch.gather(x, dim, idx.long())):
            wrong += 1
            k = known.match("gather", "cpu", b, "values", "")
            assert k is not None and k.name == "aten-cpu-gather-expanded-int32-index", \
                (x.shape, x.stride(), x.dtype, dim, idx.shape, idx.stride())
            assert known.match("gather", "cuda", b, "values", "") is None
            assert known.match("gather", "cpu", b, "crash", "") is None  # only that symptom
    assert wrong > 0, f"STRIDEWISE_SEED={SEED}: no native error seen (is it fixed upstream?)"


def test_native_cpu_audit_of_the_gather_int32_case_is_known(tmp_path):
    rc, rep = audit(tmp_path, "--case", GX)
    assert rc == 0 and status(rep) == {GX: "known"}, rep["failures"]
    rc, rep = audit(tmp_path, "--case", GX, "--no-known")
    assert rc == 1 and rep["failures"][0]["reason"] == "values"
