"""--large: probes for 32-bit offset overflow ("wrong above 2**31 elements"), cheap on memory.

self is a 1-D uint8 tensor of N = 2**31 + 4096 elements whose memory is never touched except
where the probe writes: on CPU an anonymous mmap (zero pages until written, so ~0 RSS), on other
devices torch.zeros. Five probe positions, three of them at element offsets >= 2**31, are
read (gather, index_select, take, index.Tensor, take_along_dim) or written (scatter,
scatter_add, index_put, put, index_copy, index_add, index_fill). The oracle is analytic: the
values at the probe positions, and zeros in windows around every position a 32-bit wrap of a
probe offset would land on (p mod 2**31, p mod 2**32, p - 2**31). Guard pages do not apply.
"""
from __future__ import annotations

import mmap
from dataclasses import dataclass, field

import torch

from .backends import literal as backend_literal
from .caseid import make_case
from .oracle import Verdict, is_unsupported, run_call

N = 2**31 + 4096
P = [N - 1, 2**31 + 7, 2**31 - 1, 5, 2**31 + 1000]
VALS = [11, 22, 33, 44, 55]
A = "torch.ops.aten."
READ = {
    "gather": A + "gather.default(self, 0, idx)",
    "index_select": A + "index_select.default(self, 0, idx)",
    "take": A + "take.default(self, idx)",
    "index.Tensor": A + "index.Tensor(self, [idx])",
    "take_along_dim": A + "take_along_dim.default(self, idx, 0)",
}
WRITE = {
    "scatter.src": (A + "scatter_.src(self, 0, idx, src)", VALS),
    "scatter_add": (A + "scatter_add_.default(self, 0, idx, src)", VALS),
    "index_put": (A + "index_put_.default(self, [idx], src, False)", VALS),
    "put": (A + "put_.default(self, idx, src, False)", VALS),
    "index_copy": (A + "index_copy_.default(self, 0, idx, src)", VALS),
    "index_add": (A + "index_add_.default(self, 0, idx, src)", VALS),
    "index_fill": (A + "index_fill_.int_Scalar(self, 0, idx, 9)", [9] * len(P)),
}
W = 64  # window half-width around each checked position


def windows() -> list:
    starts = set()
    for p in P:
        for q in (p, p % 2**31, p % 2**32, p - 2**31):
            if 0 <= q < N:
                starts.add(max(0, q - W))
    return sorted(starts)


def cases(op: str, seed: int) -> list:
    if op in READ:
        return [make_case(op, "func", {}, 1, "uint8", "i64", "large", None, seed)]
    if op in WRITE:
        return [make_case(op, "inplace", {}, 1, "uint8", "i64", "large", None, seed)]
    return []


def call_of(op: str) -> str:
    return READ[op] if op in READ else WRITE[op][0]


def big_zeros(device: torch.device) -> torch.Tensor:
    if device.type == "cpu":
        return torch.frombuffer(mmap.mmap(-1, N), dtype=torch.uint8)
    return torch.zeros(N, dtype=torch.uint8, device=device)


def execute(spec, case, device, synchronize, classify_error) -> dict:
    """Run one probe in the worker. ``synchronize`` and ``classify_error`` are the worker's
    (worker.execute passes them, as it does to grad.py): large.py sits below worker.py, and a
    simulated device (tests/planted_backend/cuda_sim.py) replaces worker.synchronize."""
    op = case.op
    self_ = big_zeros(device)
    if op in READ:
        for p, v in zip(P, VALS):
            self_[p].fill_(v)  # select + fill: no indexing kernel involved
    ns = {"self": self_, "idx": torch.tensor(P, dtype=torch.int64, device=device),
          "src": torch.tensor(WRITE.get(op, (None, VALS))[1], dtype=torch.uint8, device=device)}
    try:
        res = run_call(call_of(op), ns)
        synchronize(device)
    except Exception as e:  # noqa: BLE001
        kind = classify_error(e, device)
        ans = {"ok": False, "exc_type": type(e).__name__, "exc_msg": str(e)[:2000]}
        if kind:
            ans["fatal"] = "device-assert" if kind == "device-assert" else "crash"
            ans["detail"] = f"device fault: {type(e).__name__}: {str(e)[:300]}"
        return ans
    if op in READ:
        return {"ok": True, "values": res.reshape(-1).cpu().tolist()}
    return {"ok": True, "windows": {s: self_[s:s + 2 * W].cpu().tolist() for s in windows()}}


@dataclass
class LargeBuilt:
    case: object
    call: str
    tensors: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)
    written: object = None

    def repro_source(self, res, device, backend, diagnosis):
        return _repro(self, res, device, backend, diagnosis)


def prepare(spec, case):
    b = LargeBuilt(case, call_of(case.op))
    feats = {"kind": "large", "variant": case.variant, "rank": 1, "dtype": "uint8",
             "idx_dtype": "i64", "expects_error": False, "bad_index": False}
    return b, None, feats, None


def judge(spec, built, ref, ans, tol) -> Verdict:
    op = built.case.op
    if ans.get("fatal") == "device-assert":
        return Verdict("crash", "device-assert-valid", "device-side assert on a valid >2**31 probe: "
                       + ans.get("exc_msg", "")[:200])
    if ans.get("fatal"):
        return Verdict("crash", "large", ans.get("detail", "crash"))
    if not ans.get("ok"):
        msg = f"{ans['exc_type']}: {ans['exc_msg'][:300]}"
        if is_unsupported(RuntimeError(ans["exc_msg"])) or ans["exc_type"] == "NotImplementedError":
            return Verdict("unsupported", "unsupported", msg)
        return Verdict("bad-error", "spurious-error", "raised on a valid >2**31-element probe: " + msg)
    if op in READ:
        got = ans["values"]
        if got != VALS:
            return Verdict("wrong", "values", f"read at element offsets {P} (3 of them >= 2**31): "
                           f"expected {VALS}, got {got}")
        return Verdict("pass")
    vals = dict(zip(P, WRITE[op][1]))
    for s, got in sorted(ans["windows"].items()):
        exp = [vals.get(i, 0) for i in range(s, min(N, s + 2 * W))]
        if got != exp:
            bad = [s + i for i, (a, b) in enumerate(zip(exp, got)) if a != b]
            return Verdict("wrong", "values", f"after writing at offsets {P} (3 of them >= 2**31): "
                           f"{len(bad)} wrong byte(s) near {bad[:4]} (expected "
                           f"{[vals.get(i, 0) for i in bad[:4]]}, got {[got[i - s] for i in bad[:4]]})")
    return Verdict("pass")


def _repro(b, res, device, backend, diagnosis) -> str:
    op = b.case.op
    write = op in WRITE
    vals = WRITE[op][1] if write else VALS
    return f'''#!/usr/bin/env python3
"""stridewise audit repro: {b.case.id}  (>2**31-element probe)

status: {res.verdict.status} ({res.verdict.reason})
detail: {res.verdict.detail[:500]}
diagnosis ({op}): {diagnosis}
Run: python3 <this file> [DEVICE]    exit 1: the failure reproduces
     python3 <this file> [DEVICE] --native    without the backend: native PyTorch, exit 0 expected
"""
import mmap
import sys

import torch

ARGS = [a for a in sys.argv[1:] if a != "--native"]
NATIVE = len(ARGS) < len(sys.argv) - 1  # --native: the backend is not enabled
if len(ARGS) > 1 or any(a.startswith("-") for a in ARGS):
    print(f"usage: python3 {{sys.argv[0]}} [DEVICE] [--native]", file=sys.stderr)
    sys.exit(2)
DEVICE = torch.device(ARGS[0] if ARGS else {device!r})
BACKEND = {backend_literal(backend)}
N = {N}
P = {P}
VALS = {vals}
if DEVICE.type == "cpu":
    self = torch.frombuffer(mmap.mmap(-1, N), dtype=torch.uint8)  # zero pages: ~no memory
else:
    self = torch.zeros(N, dtype=torch.uint8, device=DEVICE)
if {not write}:
    for p, v in zip(P, VALS):
        self[p].fill_(v)
idx = torch.tensor(P, dtype=torch.int64, device=DEVICE)
src = torch.tensor(VALS, dtype=torch.uint8, device=DEVICE)
if BACKEND and not NATIVE:
    import importlib
    if BACKEND["path"]:
        sys.path.insert(0, BACKEND["path"])
    fn = importlib.import_module(BACKEND["module"])
    for part in BACKEND["call"].split("."):
        fn = getattr(fn, part)
    fn(*BACKEND["args"])
FAILED = "FAIL (native PyTorch fails this script)" if NATIVE else "FAIL (reproduced)"
try:
    result = {b.call}
    if DEVICE.type != "cpu":
        getattr(torch, DEVICE.type).synchronize()
except Exception as e:  # a spurious error (native PyTorch computes these probes)
    print(f"{{FAILED}}: raised {{type(e).__name__}}: {{e}}".splitlines()[0])
    sys.exit(1)
if {not write}:
    got = result.reshape(-1).cpu().tolist()
    ok = got == VALS
    print("read at", P, "expected", VALS, "got", got)
else:
    ok = all(self[p].item() == v for p, v in zip(P, VALS))
    print("values at", P, [self[p].item() for p in P], "expected", VALS)
print("OK" if ok else FAILED)
sys.exit(0 if ok else 1)
'''
