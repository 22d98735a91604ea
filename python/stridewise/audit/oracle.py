"""The oracle: native PyTorch on CPU (never the backend under audit) and the verdict of a case.

For each case the parent process (which never imports the backend) computes:
  R1  the case's call, native, on CPU copies in the *same layouts* -> does native raise?
  R2  the functional call, native, on *contiguous* copies -> the expected values
  R64 for floating accumulation: the functional call in float64 plus, per output element, the
      number of accumulated terms and their magnitude -> a tolerance (see Tolerance)
and compares the worker's answer (the candidate) with them.

When native CPU fails an INTERNAL ASSERT (a bug of the oracle, not an error the candidate owes),
R1/R2 are computed again on upcast copies (float16/bfloat16 -> float32, ...) and the result is
compared with the accumulation tolerance ("oracle upcast" in the verdict); without an upcast
that works the case is skipped.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from .gen import (Data, Index, bytes_to_tensor, dtype_of, flat_storage, internal_overlap, overlaps,
                  unpack)
from .specs.base import bits_eq

STATUSES = ("pass", "wrong", "crash", "bad-error", "device-assert", "known", "unsupported", "skip",
            "error", "native")  # native: passed, but the backend under audit did not run it
FAILING = ("wrong", "crash", "bad-error")  # what fails a backend ("error": an auditor bug)
_UNSUPPORTED = re.compile(r"not implemented for|not supported for|does not support|"
                          r"Could not run '|no kernel", re.I)
_INTERNAL = re.compile(r"INTERNAL ASSERT FAILED")
# ATen's wording (aten/src/ATen/MemoryOverlap.cpp) when a written-to tensor overlaps itself
_OVERLAP_REFUSED = re.compile(r"more than one element of the written-to tensor refers to a single "
                              r"memory location")
# the oracle's upcast when native CPU fails an internal assert
_UPCAST = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float64,
           torch.complex64: torch.complex128}
_CODE: dict = {}


@dataclass
class Tolerance:
    """Accumulation tolerance (floating dtypes): an element passes when
    ``|got - ref64| <= factor * eps(dtype) * (terms + 1) * magnitude + atol`` where ``terms`` is
    the number of values accumulated into it, ``magnitude`` the same reduction over absolute
    values (sum, mean) or ``|ref64|`` (prod), and ``atol`` defaults to ``factor * tiny(dtype)``.
    Data movement is always bitwise; integer accumulation is bitwise against native CPU."""
    factor: float = 2.0
    atol: Optional[float] = None
    exact_accum: bool = False  # compare floating accumulation bitwise against native CPU
    strict_errors: bool = False  # an expected error must have native's exception type

    def describe(self) -> str:
        a = "factor*tiny(dtype)" if self.atol is None else f"{self.atol:g}"
        return (f"accumulation: |got-ref64| <= {self.factor:g}*eps(dtype)*(terms+1)*magnitude + {a}"
                + ("; floating accumulation bitwise (--exact-accum)" if self.exact_accum else ""))


@dataclass
class Ref:
    error: Optional[BaseException] = None  # R1 raised (an error is expected)
    unsupported: bool = False  # native CPU has no kernel for this dtype: case skipped
    expected: Optional[torch.Tensor] = None  # R2
    mode: str = "exact"
    ref64: Optional[torch.Tensor] = None
    tol: Optional[torch.Tensor] = None
    ns: dict = field(default_factory=dict)  # contiguous inputs (for write checks)
    note: str = ""  # how the reference was obtained when not plainly (oracle upcast)
    oracle_bug: bool = False  # native failed an internal assert and no upcast worked: no reference


@dataclass
class Verdict:
    status: str
    reason: str = ""  # short class: missing-error, spurious-error, values, input-modified, ...
    detail: str = ""  # one line a person can act on
    mismatch: Any = None


def compile_call(expr: str):
    c = _CODE.get(expr)
    if c is None:
        c = _CODE[expr] = compile(expr, "<call>", "eval")
    return c


def run_call(expr: str, ns: dict):
    return eval(compile_call(expr), {"torch": torch}, ns)


def _map(t, f):
    if isinstance(t, list):
        return [None if x is None else f(x) for x in t]
    return None if t is None else f(t)


def clone_layout(t: torch.Tensor) -> torch.Tensor:
    return flat_storage(t).clone().as_strided(t.shape, t.stride(), t.storage_offset())


def namespace(built, tensors: dict) -> dict:
    ns = dict(built.scalars)
    ns.update(tensors)
    return ns


def is_unsupported(e: BaseException) -> bool:
    return isinstance(e, NotImplementedError) or bool(_UNSUPPORTED.search(str(e)))


def data_names(spec) -> list:
    return [n for n in spec.operands if n not in spec.index_operands]


class quiet_native:
    """Silence C++-side TORCH_WARN lines ("index_put_ on expanded tensors is deprecated", ...)
    that native calls print straight to fd 2 while the oracle runs."""
    _null = None

    def __enter__(self):
        try:
            sys.stderr.flush()
            if quiet_native._null is None:
                quiet_native._null = os.open(os.devnull, os.O_WRONLY)
            self._saved = os.dup(2)
            os.dup2(quiet_native._null, 2)
        except OSError:
            self._saved = None
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)
        return False


def reference(spec, built, tol: Tolerance) -> Ref:
    with quiet_native():
        return _reference(spec, built, tol)


def _reference(spec, built, tol: Tolerance) -> Ref:
    case = built.case
    same = {k: _map(v, clone_layout) for k, v in built.tensors.items()}
    try:
        run_call(spec.calls[case.variant], namespace(built, same))
    except Exception as e:  # noqa: BLE001 - any native error is the expected behaviour
        if _INTERNAL.search(str(e)):
            return _upcast_reference(spec, built, tol, e)
        return Ref(error=e, unsupported=is_unsupported(e))
    ns = namespace(built, {k: _map(v, lambda x: x.contiguous().clone())
                           for k, v in built.tensors.items() if k != "out"})
    expected = run_call(spec.calls["func"], ns)
    ref = Ref(expected=expected, mode=spec.mode(case), ns=ns)
    dt = expected.dtype
    if ref.mode in ("sum", "prod", "mean") and (dt.is_floating_point or dt.is_complex) \
            and not tol.exact_accum:
        _accum_reference(spec, built, ns, ref, tol)
    return ref


def _upcast_reference(spec, built, tol: Tolerance, bug: BaseException) -> Ref:
    """R1 and R2 on copies whose floating data operands are upcast (same layouts for R1), when
    native failed an internal assert on the case's own dtype. The expected values are cast back
    to the case dtype; floating accumulation is then compared with the tolerance (float64
    reference) even under --exact-accum, since native's own bits do not exist."""
    case = built.case
    data = set(data_names(spec)) | {"out"}
    wide = {}

    def up(t, layout):
        w = _UPCAST.get(t.dtype)
        if w is None:
            return clone_layout(t) if layout else t.contiguous().clone()
        wide[t.dtype] = w
        if layout:
            return flat_storage(t).to(w).as_strided(t.shape, t.stride(), t.storage_offset())
        return t.contiguous().to(w)

    what = f"native CPU failed an internal assert ({_msg(bug)})"
    same = {k: _map(v, (lambda x: up(x, True)) if k in data else clone_layout)
            for k, v in built.tensors.items()}
    if not wide:
        return Ref(error=bug, oracle_bug=True, note=what)
    try:
        run_call(spec.calls[case.variant], namespace(built, same))
    except Exception as e:  # noqa: BLE001
        if _INTERNAL.search(str(e)):
            return Ref(error=bug, oracle_bug=True, note=what)
        return Ref(error=e, unsupported=is_unsupported(e),
                   note=f"{what}; upcast copies raise {_msg(e)} (oracle upcast)")
    ns_up = namespace(built, {k: _map(v, (lambda x: up(x, False)) if k in data else
                                      (lambda x: x.contiguous().clone()))
                              for k, v in built.tensors.items() if k != "out"})
    ns = namespace(built, {k: _map(v, lambda x: x.contiguous().clone())
                           for k, v in built.tensors.items() if k != "out"})
    dt = dtype_of(case.dtype)
    expected = run_call(spec.calls["func"], ns_up)
    if expected.dtype in wide.values():
        expected = expected.to(dt)
    names = ", ".join(f"{str(a).replace('torch.', '')}->{str(b).replace('torch.', '')}"
                      for a, b in wide.items())
    ref = Ref(expected=expected, mode=spec.mode(case), ns=ns,
              note=f"{what}; reference computed on upcast copies ({names}) (oracle upcast)")
    if ref.mode in ("sum", "prod", "mean") and (dt.is_floating_point or dt.is_complex):
        _accum_reference(spec, built, ns, ref, tol)
    return ref


def _accum_reference(spec, built, ns, ref: Ref, tol: Tolerance):
    dt = ref.expected.dtype
    wide = torch.complex128 if dt.is_complex else torch.float64
    data = data_names(spec)

    def with_data(f, scal=None):
        m = dict(ns)
        for n in data:
            m[n] = _map(ns[n], f)
        for s in spec.value_scalars:
            if s in m and not isinstance(m[s], bool):
                m[s] = scal(m[s]) if scal else m[s]
        return m

    ref.ref64 = run_call(spec.calls["func"], with_data(lambda t: t.to(wide)))
    counts = run_call(spec.count_call, with_data(lambda t: torch.ones(t.shape, dtype=torch.float64),
                                                 lambda v: 1)).real.to(torch.float64)
    if ref.mode == "prod":
        mag = ref.ref64.abs()
    else:
        mag = run_call(spec.calls["func"], with_data(lambda t: t.abs().to(torch.float64),
                                                     lambda v: abs(v))).abs()
    fi = torch.finfo(dt)
    atol = tol.factor * fi.tiny if tol.atol is None else tol.atol
    ref.tol = tol.factor * fi.eps * (counts + 1) * mag.to(torch.float64) + atol


# ---------------------------------------------------------------------------------------------
# The verdict


def judge(spec, built, ref: Ref, cand: dict, tol: Tolerance) -> Verdict:
    v = _judge(spec, built, ref, cand, tol)
    if ref.note and v.status != "skip":
        v.detail = f"{v.detail} [{ref.note}]" if v.detail else ref.note
        v.reason = v.reason or "oracle-upcast"
    return v


def _judge(spec, built, ref: Ref, cand: dict, tol: Tolerance) -> Verdict:
    if ref.unsupported:
        return Verdict("skip", "oracle-unsupported", f"native CPU: {_msg(ref.error)}")
    if ref.oracle_bug:
        return Verdict("skip", "oracle-internal-assert", f"{ref.note}; no upcast avoids it: no reference")
    fatal = cand.get("fatal")
    if fatal == "device-assert":
        extra = f"; {cand['detail']}" if cand.get("detail") else ""
        if ref.error is not None:
            return Verdict("device-assert", "device-assert",
                           f"device-side assert (native CPU raises {_msg(ref.error)}){extra}")
        return Verdict("crash", "device-assert-valid", "device-side assert on a valid case: "
                       + cand.get("exc_msg", "")[:300] + extra)
    if fatal:
        return Verdict("crash", fatal, cand.get("detail", fatal))
    if ref.error is not None:
        if cand["ok"]:
            return Verdict("bad-error", "missing-error",
                           f"no error raised; native CPU raises {_msg(ref.error)}")
        if tol.strict_errors and cand["exc_type"] != type(ref.error).__name__:
            return Verdict("bad-error", "error-type",
                           f"raised {cand['exc_type']}, native raises {type(ref.error).__name__}")
        return Verdict("pass", "expected-error")
    if not cand["ok"]:
        msg = f"{cand['exc_type']}: {cand['exc_msg'][:300]}"
        if cand["exc_type"] == "NotImplementedError" or _UNSUPPORTED.search(cand["exc_msg"]):
            return Verdict("unsupported", "unsupported", msg)
        w = built.written
        if w and _OVERLAP_REFUSED.search(cand["exc_msg"]) and internal_overlap(built.tensors[w]):
            # writing into a self-overlapping tensor: native CPU writes (order-dependent values,
            # not compared: overlap-unchecked), ATen CUDA refuses; both answers are legitimate
            return Verdict("pass", "overlap-refused", f"{w} overlaps itself and the call refused to "
                           f"write into it with ATen's internal-overlap error (native CPU writes, "
                           f"values unspecified): {msg[:160]}")
        return Verdict("bad-error", "spurious-error", "raised where native CPU does not: " + msg)
    return _judge_values(spec, built, ref, cand, tol)


def _msg(e) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _judge_values(spec, built, ref, cand, tol) -> Verdict:
    case, written = built.case, built.written
    got = None
    overlap_unchecked = False
    for name, val in built.tensors.items():
        items = val if isinstance(val, list) else [val]
        after_all = cand["storages"][name]
        for j, t in enumerate(items):
            if t is None:
                continue
            after = bytes_to_tensor(after_all[j], t.dtype)
            label = name if len(items) == 1 else f"{name}[{j}]"
            hit = (cand.get("margins") or {}).get(name, [None] * len(items))[j]
            if hit:  # guard.MarginAlloc: a device without guard pages
                return Verdict("wrong", "outside-storage-written",
                               f"{label}: {hit} byte(s) of the poisoned margin around its storage "
                               f"were written: a write past the tensor's storage, which a guard "
                               f"page would have stopped (this device has none)")
            if after.numel() > flat_storage(t).numel():
                return Verdict("wrong", "storage-resized", f"{label}: its storage grew from "
                               f"{flat_storage(t).numel()} to {after.numel()} elements (resized "
                               f"although it had the right shape)")
            orig = flat_storage(t)[: after.numel()]
            if name == written:
                view = after.as_strided(t.shape, t.stride(), t.storage_offset())
                outside = _outside_changed(t, orig, after)
                if outside:
                    return Verdict("wrong", "outside-view-written",
                                   f"{label}: {outside} storage element(s) outside the view were "
                                   f"written (strides/offset of {label} ignored?)")
                got = view.clone()
                if overlaps(t):  # native accepts a self-overlapping target: values unspecified
                    overlap_unchecked = True
            elif not bool(bits_eq(orig, after).all()):
                n = int((~bits_eq(orig, after)).sum())
                return Verdict("wrong", "input-modified", f"input {label} was modified "
                               f"({n} of {orig.numel()} storage elements changed)")
    if overlap_unchecked and cand.get("alias", True):
        return Verdict("pass", "overlap-unchecked", f"{written} overlaps itself (stride 0) and "
                       "native accepts it: the values written are unspecified, not compared")
    if written is None:
        got = unpack(cand["result"])
    elif not cand.get("alias", True):
        return Verdict("wrong", "not-aliased", f"the {case.variant} variant returned a tensor "
                       f"that is not {written}")
    exp = ref.expected
    if list(got.shape) != list(exp.shape) or got.dtype != exp.dtype:
        return Verdict("wrong", "shape", f"result {tuple(got.shape)} {got.dtype}, "
                       f"expected {tuple(exp.shape)} {exp.dtype}")
    if ref.mode == "write":
        ok, _ = spec.write_check(ref.ns, got, exp)
        what = "bitwise (any of the values written to an element)"
    elif ref.tol is not None:
        diff = (got.to(ref.ref64.dtype) - ref.ref64).abs()
        fin = torch.isfinite(ref.ref64)
        same_nonfinite = ~fin & bits_eq(got.to(ref.ref64.dtype), ref.ref64)
        ok = (diff <= ref.tol) | same_nonfinite
        what = tol.describe()
    else:
        ok = bits_eq(got, exp)
        what = "bitwise"
    if bool(ok.all()):
        return Verdict("pass")
    return Verdict("wrong", "values", _mismatch_text(got, exp, ok, ref, what),
                   mismatch=_mismatch(got, exp, ok, ref))


def covered(t, n):
    """Mask over the first ``n`` storage elements: True where ``t``'s view reaches.
    (Also inlined into the repro scripts, so it uses nothing but torch.)"""
    mask = torch.zeros(n, dtype=torch.bool)
    if t.numel():
        off = torch.full((), t.storage_offset(), dtype=torch.long)
        for k, (s, st) in enumerate(zip(t.shape, t.stride())):
            shape = [1] * t.dim()
            shape[k] = s
            off = off + (torch.arange(s) * st).reshape(shape)
        mask[off.reshape(-1)] = True
    return mask


def _outside_changed(t, orig, after) -> int:
    """Storage elements outside ``t``'s view whose bits changed."""
    n = orig.numel()
    if n == 0:
        return 0
    changed = ~bits_eq(orig, after)
    return int((changed & ~covered(t, n)).sum())


def _mismatch(got, exp, ok, ref, k=3):
    bad = (~ok).nonzero().tolist() if ok.dim() else [[]]
    out = []
    for pos in bad[:k]:
        p = tuple(pos)
        e = ref.ref64[p].item() if ref.tol is not None else exp[p].item()
        out.append({"at": list(p), "expected": _py(e), "got": _py(got[p].item()),
                    **({"tol": float(ref.tol[p])} if ref.tol is not None else {})})
    return {"count": len(bad), "numel": got.numel(), "first": out}


def _py(v):
    if isinstance(v, complex):
        return [v.real, v.imag]
    return v


def _mismatch_text(got, exp, ok, ref, what) -> str:
    m = _mismatch(got, exp, ok, ref, 1)
    f = m["first"][0] if m["first"] else {}
    return (f"{m['count']} of {m['numel']} elements differ ({what}); first at {f.get('at')}: "
            f"expected {f.get('expected')!r}, got {f.get('got')!r}")


__all__ = ["Tolerance", "Ref", "Verdict", "reference", "judge", "run_call", "STATUSES", "FAILING",
           "Data", "Index"]
