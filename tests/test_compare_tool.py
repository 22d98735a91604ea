"""sw-compare on synthetic data: metrics against a float64 numpy reference, planted divergences,
near-zero data, mismatched step/rank/call sets, corrupt and truncated files, standards."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch


from stridewise.dump._testing import SyntheticDump, run_compare  # noqa: E402


def report(exe, a, b, *args):
    rc, out, err = run_compare(exe, a, b, "--format", "json", *args)
    assert rc in (0, 1, 3), f"exit {rc}: {err}"
    return rc, json.loads(out)


# ------------------------------------------------------------------------------------------
# float64 reference of every metric (definitions: docs/compare.md)

TINY = {"F16": 2.0 ** -14, "BF16": float(np.finfo(np.float32).tiny), "F32": float(np.finfo(np.float32).tiny),
        "F64": float(np.finfo(np.float64).tiny)}
BITS = {"F16": np.int16, "BF16": np.int16, "F32": np.int32, "F64": np.int64}


def to_f64(t: torch.Tensor) -> np.ndarray:
    return t.to(torch.float64).numpy().reshape(-1) if t.dtype != torch.bool else t.numpy().reshape(-1).astype(np.float64)


def raw_ints(t: torch.Tensor) -> np.ndarray:
    size = t.element_size()
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]).numpy().reshape(-1)


def reference(ta: torch.Tensor, tb: torch.Tensor, code: str, rtol: float, atol: float) -> dict:
    x, y = to_f64(ta), to_f64(tb)
    n = x.size
    fin = np.isfinite(x) & np.isfinite(y)
    xf, yf = x[fin], y[fin]
    d = np.abs(yf - xf)
    rel = d / np.maximum(np.abs(xf), TINY.get(code, 1.0))
    same_nf = (np.isnan(x) & np.isnan(y)) | (np.isinf(x) & np.isinf(y) & (x == y))
    nf_mismatch = int(np.sum(~fin & ~same_nf))
    aa, bb = float(np.sum(xf * xf)), float(np.sum(yf * yf))
    cos = 1.0 if aa == 0 and bb == 0 else 0.0 if aa == 0 or bb == 0 else float(np.sum(xf * yf)) / (math.sqrt(aa) * math.sqrt(bb))
    ra, rb = raw_ints(ta), raw_ints(tb)
    if code in BITS:
        def ordinal(r):
            s = r.astype(np.int64)
            lo = np.iinfo(BITS[code]).min
            return np.where(s >= 0, s, lo - s)
        ulp = int(np.max(np.abs(ordinal(ra)[fin] - ordinal(rb)[fin]), initial=0))
    else:
        ulp = int(np.max(np.abs(x - y), initial=0))
    wrong = int(np.sum((d > atol) & (rel > rtol))) + nf_mismatch
    nfin = max(int(fin.sum()), 1)
    return {"n": n, "n_finite": int(fin.sum()), "cosine": cos, "max_abs": float(d.max(initial=0)),
            "max_rel": float(rel.max(initial=0)), "mean_rel": float(rel.sum()) / nfin,
            "rmse": math.sqrt(float(np.sum(d * d)) / nfin), "max_ulp": ulp,
            "frac_rel_gt_1e-3": float(np.sum(rel > 1e-3)) / nfin, "frac_rel_gt_5e-3": float(np.sum(rel > 5e-3)) / nfin,
            "nan_a": int(np.isnan(x).sum()), "nan_b": int(np.isnan(y).sum()), "inf_a": int(np.isinf(x).sum()),
            "inf_b": int(np.isinf(y).sum()), "nonfinite_mismatch": nf_mismatch, "wrong": wrong,
            "wrong_fraction": wrong / n, "bit_mismatch": int(np.sum(ra != rb))}


EXACT = ("n", "n_finite", "max_abs", "max_rel", "max_ulp", "frac_rel_gt_1e-3", "frac_rel_gt_5e-3", "nan_a", "nan_b",
         "inf_a", "inf_b", "nonfinite_mismatch", "wrong", "wrong_fraction", "bit_mismatch")
SUMS = ("cosine", "mean_rel", "rmse")  # sums: the order of additions differs, so 1e-12 relative

DTYPES = [(torch.float32, "F32"), (torch.float16, "F16"), (torch.bfloat16, "BF16"), (torch.float64, "F64"),
          (torch.int32, "I32"), (torch.int64, "I64"), (torch.uint8, "U8"), (torch.int8, "I8"), (torch.bool, "BOOL")]


def make_pair(dtype, n, g):
    if dtype.is_floating_point:
        a = torch.randn(n, generator=g, dtype=torch.float64)
        a[: n // 10] *= 1e-6  # near zero
        b = a * (1 + 1e-3 * torch.randn(n, generator=g, dtype=torch.float64)) + 1e-7 * torch.randn(n, generator=g, dtype=torch.float64)
        a, b = a.to(dtype), b.to(dtype)
        b[n // 2: n // 2 + 20] = a[n // 2: n // 2 + 20]  # some equal
        a[5], b[5] = float("nan"), float("nan")
        a[6], b[6] = float("inf"), float("inf")
        a[7], b[7] = float("-inf"), float("inf")
        a[8], b[8] = 1.0, float("nan")
        a[9], b[9] = 0.0, -0.0  # bitwise different, 0 ULP apart
        a[10], b[10] = 0.0, 0.0
        return a, b
    if dtype == torch.bool:
        a = torch.rand(n, generator=g) > 0.5
        b = a.clone()
        b[::97] = ~b[::97]
        return a, b
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    a = torch.randint(lo, hi, (n,), generator=g, dtype=dtype)
    b = a.clone()
    b[::53] = torch.randint(lo, hi, (len(b[::53]),), generator=g, dtype=dtype)
    return a, b


def test_every_metric_equals_float64_reference(tmp_path, exe, seed):
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(seed)
    ta, tb = {}, {}
    for dtype, code in DTYPES:
        for shape in [(40003,), (7, 3, 5), ()]:
            a, b = make_pair(dtype, int(np.prod(shape)) if shape else 1, g) if shape != () else (
                torch.ones((), dtype=dtype), torch.ones((), dtype=dtype))
            name = f"{code}_{'x'.join(map(str, shape)) or 'scalar'}"
            ta[name], tb[name] = a.reshape(shape), b.reshape(shape)
        if dtype.is_floating_point:  # sign crossings: +0/-0 are 0 ULPs apart, +-denorm_min 2
            tiny = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
            ta[f"{code}_signs"] = torch.tensor([0.0, -0.0, tiny, -tiny, 0.0], dtype=dtype)
            tb[f"{code}_signs"] = torch.tensor([-0.0, 0.0, -tiny, tiny, tiny], dtype=dtype)
    save_file(ta, tmp_path / "a.safetensors")
    save_file(tb, tmp_path / "b.safetensors")
    # chunk 1 MiB and 2 threads: the reduction is split and merged; the reference is one pass.
    rc, rep = report(exe, tmp_path / "a.safetensors", tmp_path / "b.safetensors", "--chunk-mib", "1", "--threads", "2")
    entries = {e["name"]: e for e in rep["entries"]}
    assert set(entries) == set(ta)
    for name, e in entries.items():
        code = name.split("_")[0]
        std = e["standard"]
        ref = reference(ta[name], tb[name], code, std["rtol"], std["atol"])
        m = e["metrics"]
        for k in EXACT:
            assert m[k] == ref[k], f"{name} {k}: tool {m[k]} != reference {ref[k]}"
        for k in SUMS:
            assert math.isclose(m[k], ref[k], rel_tol=1e-12, abs_tol=1e-300), f"{name} {k}: {m[k]} vs {ref[k]}"
        expect_pass = ref["wrong_fraction"] <= std["max_wrong_fraction"]
        assert e["status"] == ("PASS" if expect_pass else "FAIL"), (name, e["reason"])


def test_near_zero_data_gives_no_false_failure(tmp_path, exe, seed):
    g = torch.Generator().manual_seed(seed)
    a = 1e-7 * torch.randn(100000, generator=g)
    b = a + 1e-8 * torch.randn(100000, generator=g)  # ~10% relative error, 1e-8 absolute
    np.save(tmp_path / "a.npy", a.numpy())
    np.save(tmp_path / "b.npy", b.numpy())
    for std in ("dual_thousandth", "dual_ten_thousandth"):
        rc, rep = report(exe, tmp_path / "a.npy", tmp_path / "b.npy", "--dtype-standard", f"float32={std}")
        m = rep["entries"][0]["metrics"]
        assert m["max_rel"] > 0.1 and m["frac_rel_gt_1e-3"] > 0.5  # a relative-only rule would fail ...
        assert m["wrong"] == 0 and rc == 0, rep["entries"][0]["reason"]  # ... the dual rule does not
    # the same relative error on O(1) data is a failure
    np.save(tmp_path / "a1.npy", (a * 1e7).numpy())
    np.save(tmp_path / "b1.npy", (b * 1e7).numpy())
    rc, rep = report(exe, tmp_path / "a1.npy", tmp_path / "b1.npy")
    assert rc == 1 and rep["entries"][0]["status"] == "FAIL"


# ------------------------------------------------------------------------------------------
# planted divergences in synthetic dumps

def write_chain(root, perturb=None, step=0, rank=0, seed=0, extra_call=False):
    """A small model's ops, forward then backward, written as a dump; `perturb` names an op whose
    output is changed (and everything downstream sees the changed value)."""
    rng = np.random.default_rng(seed)
    d = SyntheticDump(root, step=step, rank=rank)

    def out(name, v, eps=1e-2):
        if perturb == name:
            v = v.copy()
            v.reshape(-1)[v.size // 2] += eps * (1 + abs(v.reshape(-1)[v.size // 2]))
        return v

    w = rng.standard_normal((16, 8)).astype(np.float32)
    idx = rng.integers(0, 16, 12)
    e = out("aten::embedding", w[idx])
    d.op("aten::embedding", [w, idx], [e])
    sel = rng.integers(0, 12, 6)
    s = out("aten::index_select", e[sel])
    d.op("aten::index_select", [e, sel], [s])
    m = out("aten::mul", s * np.float32(2.0))
    d.op("aten::mul", [s], [m])
    if extra_call:
        d.op("aten::mul", [s], [m])
    gi = rng.integers(0, 8, (6, 3))
    gth = out("aten::gather", np.take_along_axis(m, gi, 1))
    d.op("aten::gather", [m, gi], [gth])
    loss = out("aten::sum", np.array(gth.sum(dtype=np.float32)))
    d.op("aten::sum", [gth], [loss])
    go = np.ones_like(gth)
    gm = np.zeros_like(m)
    np.add.at(gm, (np.arange(6)[:, None], gi), go)
    gm = out("aten::scatter_add", gm)
    d.op("aten::scatter_add", [np.zeros_like(m), gi, go], [gm], phase="backward")
    gs = out("aten::mul.bwd", gm * np.float32(2.0))
    d.op("aten::mul", [gm], [gs], phase="backward")
    ge = np.zeros_like(e)
    np.add.at(ge, sel, gs)
    ge = out("aten::index_add", ge)
    d.op("aten::index_add", [np.zeros_like(e), sel, gs], [ge], phase="backward")
    gw = np.zeros_like(w)
    np.add.at(gw, idx, ge)
    gw = out("aten::embedding_dense_backward", gw)
    d.op("aten::embedding_dense_backward", [ge, idx], [gw], phase="backward")
    d.close()


PLANTED = [("aten::embedding", "forward"), ("aten::index_select", "forward"), ("aten::mul", "forward"),
           ("aten::gather", "forward"), ("aten::scatter_add", "backward"), ("aten::mul.bwd", "backward"),
           ("aten::embedding_dense_backward", "backward")]


@pytest.mark.parametrize("planted,phase", PLANTED, ids=[p[0] for p in PLANTED])
def test_first_divergent_op_is_the_planted_one(tmp_path, exe, planted, phase):
    write_chain(tmp_path / "a")
    write_chain(tmp_path / "b", perturb=planted)
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 1
    op = planted.replace(".bwd", "")
    first = rep["first_divergent"][0]
    assert (first["op"], first["phase"]) == (op, phase), first
    assert first["inputs_diverged"] is False and any(f.startswith("out#0") for f in first["failing"])
    assert rep["introduced_by"][0]["seq"] == first["seq"]
    text = run_compare(exe, tmp_path / "a", tmp_path / "b")[1]
    assert first["kind"] == "introduced" and first["chain"][0]["op"] == op
    assert f"first divergent op (step 0 rank 0): {op} call 0 ({phase})" in text
    assert "this op made the difference" in text.split("STATUS")[0]  # the lead, before the table


def test_identical_dumps_pass(tmp_path, exe):
    write_chain(tmp_path / "a")
    write_chain(tmp_path / "b")
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 0 and rep["summary"]["fail"] == 0 and rep["first_divergent"] == []
    assert rep["summary"]["pass"] == len(rep["entries"]) > 20


def test_one_ulp_in_a_data_movement_op_fails_but_passes_in_a_float_op(tmp_path, exe):
    a = np.linspace(1, 2, 64, dtype=np.float32)
    b = a.copy()
    b[3] = np.nextafter(b[3], np.float32(3))
    for root, out in (("a", a), ("b", b)):
        d = SyntheticDump(tmp_path / root)
        d.op("aten::gather", [a], [out])
        d.op("aten::softmax", [a], [out], overload="int")
        d.close()
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    st = {(e["op"], e["io"]): (e["status"], e["standard"]["name"]) for e in rep["entries"]}
    assert st[("aten::gather", "output")] == ("FAIL", "bitwise")
    assert st[("aten::softmax", "output")] == ("PASS", "dual_ten_thousandth")
    assert rep["entries"][1]["metrics"]["max_ulp"] == 1


def test_mismatched_steps_ranks_and_calls_compare_what_matches(tmp_path, exe):
    for s in (0, 1, 2):
        for r in (0, 1):
            write_chain(tmp_path / "a", step=s, rank=r, seed=s)
    for s in (1, 2, 3):
        write_chain(tmp_path / "b", step=s, rank=0, seed=s, extra_call=(s == 2),
                    perturb="aten::gather" if s == 2 else None)
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b")
    assert rc == 1  # step 2 diverges at gather
    groups = {(e["step"], e["rank"]) for e in rep["entries"]}
    assert groups == {(1, 0), (2, 0)}
    unmatched = " | ".join(rep["unmatched_groups"])
    for s, r, side in ((0, 0, "A"), (0, 1, "A"), (1, 1, "A"), (2, 1, "A"), (3, 0, "B")):
        assert f"step {s} rank {r}: only in {side}" in unmatched
    only_b = [e for e in rep["entries"] if e["status"] == "ONLY_B"]
    assert {(e["op"], e["call"], e["step"]) for e in only_b} == {("aten::mul", 1, 2)}
    assert [(d["step"], d["op"]) for d in rep["first_divergent"]] == [(2, "aten::gather")]
    # filters; a step/rank directory on one side only makes it INCOMPLETE (exit 3) unless
    # --subset names the side allowed to hold less; --strict-unmatched makes it a divergence
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b", "--steps", "1")
    assert rc == 3 and {e["step"] for e in rep["entries"]} == {1}
    assert rep["summary"]["verdict"] == "INCOMPLETE" and "step 1 rank 1: only in A" in rep["incomplete"][0]
    rc, rep = report(exe, tmp_path / "a", tmp_path / "b", "--steps", "1", "--subset", "B")
    assert rc == 0 and rep["incomplete"] == []
    rc, _ = report(exe, tmp_path / "a", tmp_path / "b", "--steps", "1", "--subset", "A")
    assert rc == 3
    rc, _ = report(exe, tmp_path / "a", tmp_path / "b", "--steps", "1", "--strict-unmatched")
    assert rc == 1
    # rank directories given directly are compared whatever their step/rank numbers
    rc, rep = report(exe, tmp_path / "a" / "step0" / "rank1", tmp_path / "b" / "step3" / "rank0")
    assert rep["unmatched_groups"] == [] and len(rep["entries"]) > 20
