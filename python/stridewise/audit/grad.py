"""--grad: the backward of every differentiable case, judged against native PyTorch on CPU.

A case is differentiable when its variant is the functional one, its dtype is floating or
complex and native computes its forward (an expected error has no backward). After a forward
that returned a result, the worker (:func:`run`, hooked at the end of ``worker.execute``)
builds the same call again with its floating data operands (never an index) as leaves that
require grad, in the case's own layouts on the device, and runs ``torch.autograd.grad`` with an
upstream gradient of the output's shape: fresh random values (seeded from the case id) in a
layout chosen from the case id among contiguous, non-contiguous (transposed or step-sliced)
and expanded (stride 0) (:func:`upstream`). It records the aten ops the backward dispatched to
(``coverage.trace``), synchronizes, and answers the input gradients (``gen.pack``) or the
exception. A device fault or assert in backward ends the worker as in the forward.

The parent (:func:`reference`, :func:`judge`) runs the same backward natively on CPU copies in
the same layouts with the same upstream gradient. Autograd says which inputs are
differentiable: a leaf whose native gradient is None is not compared (a candidate gradient for
it must be all zeros). Values: an element that gets at most one upstream term of a data-movement
backward (gather's scatter_add, index's index_put accumulate, ...) is compared bitwise; other
elements with the accumulation rule of the forward, ``|got - ref64| <= F*eps*(terms+1)*magnitude
+ atol``, where ref64 is the float64 backward, terms the float64 backward of an all-ones upstream
(how many upstream elements each gradient element sums) and magnitude the float64 backward of
``|upstream|``. Reductions whose backward depends on the data (prod, mean, amax, amin, multiply)
are compared with the rule everywhere, their terms raised by the forward's term count.

The verdict: ``Verdict`` with reasons ``backward-values`` | ``backward-missing`` (no gradient
where native has one, or a result not connected to the graph) | ``backward-extra`` (a non-zero
gradient where native has none) | ``backward-shape`` (status wrong), ``backward-error`` (raised
where native does not: bad-error), ``backward-crash`` (crash; set by the runner from the
worker's fatal answer). harm.py gives them their own class, ``backward``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from . import gen
from .oracle import _UNSUPPORTED, Verdict, _map, clone_layout, data_names, quiet_native, run_call
from .specs.base import bits_eq

UPSTREAM_LAYOUTS = ("contiguous", "noncontig", "expand")
# reductions whose backward depends on the data (not pure data movement or sums): no element is
# compared bitwise
NONLINEAR = ("prod", "mean", "amax", "amin", "multiply")
# ops a backward runs that only allocate, fill or view: left out of the report's "backward ran"
# (kept in the JSON)
PLUMBING = {"aten::" + n for n in (
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones_like", "full", "fill_", "zero_", "detach", "alias", "view", "_unsafe_view",
    "as_strided", "expand", "reshape", "_reshape_alias", "t", "transpose", "permute", "unsqueeze",
    "squeeze", "squeeze.dim", "unsqueeze_", "clone", "copy_", "_to_copy", "contiguous", "slice.Tensor",
    "select.int", "lift_fresh", "view.dtype", "resolve_conj", "resolve_neg", "conj",
    "_conj", "expand_as", "view_as", "sym_size.int", "sym_stride.int")}


def differentiable(spec, case) -> bool:
    """Whether --grad runs the backward of ``case`` (native must also compute its forward:
    the runner checks that)."""
    return (case.variant == "func" and case.kind != "large" and "func" in spec.calls
            and (case.dtype.startswith(("float", "bfloat", "complex"))))


def leaf_names(spec, tensors: dict) -> list:
    """The data operands (not indices, not out=) that become leaves: floating or complex ones."""
    out = []
    for n in data_names(spec):
        t = tensors.get(n)
        if isinstance(t, torch.Tensor) and (t.dtype.is_floating_point or t.dtype.is_complex):
            out.append(n)
    return out


def nonlinear(case) -> bool:
    return case.param("reduce") in NONLINEAR


# ---------------------------------------------------------------------------------------------
# The upstream gradient (the same in the worker and in the parent: a function of the case id)


def upstream_layout(case, shape) -> str:
    """contiguous | transpose | step_slice | expand for an output of ``shape``: chosen from the
    case id among contiguous / non-contiguous / expanded; a shape that cannot carry the choice
    (rank 0, one element, no dim of size > 1) gets the nearest it can."""
    pick = UPSTREAM_LAYOUTS[case.int_seed("grad:layout") % len(UPSTREAM_LAYOUTS)]
    big = [k for k, s in enumerate(shape) if s > 1]
    if pick == "contiguous" or not shape or not big:
        return "contiguous"
    if pick == "expand":
        return "expand"
    return "transpose" if len(big) >= 2 else "step_slice"


def upstream(case, shape, dtype: torch.dtype) -> torch.Tensor:
    """The upstream gradient of ``case`` (CPU), values fresh from the case id, in
    :func:`upstream_layout`."""
    shape = list(shape)
    lay = upstream_layout(case, shape)
    g = torch.Generator().manual_seed(case.int_seed("grad:values"))
    big = [k for k, s in enumerate(shape) if s > 1]
    if lay == "expand":  # stride 0 on the first dim of size > 1
        small = list(shape)
        small[big[0]] = 1
        return gen.random_values(small, dtype, g).expand(shape)
    if lay == "transpose":  # the first two dims of size > 1 swapped in memory
        a, b = big[0], big[1]
        mem = list(shape)
        mem[a], mem[b] = mem[b], mem[a]
        return gen.random_values(mem, dtype, g).transpose(a, b)
    if lay == "step_slice":  # every other element of a dim twice as long
        k = big[0]
        mem = list(shape)
        mem[k] *= 2
        return torch.ops.aten.slice.Tensor(gen.random_values(mem, dtype, g), k, 0, mem[k], 2)
    return gen.random_values(shape, dtype, g)


# ---------------------------------------------------------------------------------------------
# Worker side


def run(spec, case, built, dev: dict, device, alloc, synchronize, classify_error) -> dict:
    """The backward of a case whose forward returned (worker side). Returns {"upstream": layout,
    "ops": [aten ops the backward ran], "grads": {name: packed gradient or None}} or, when it
    raised, {"exc_type", "exc_msg", "ops"} and "per_leaf": {name: {"grad": packed or None} |
    {"exc_type", "exc_msg"}}, the backward again with each leaf alone (native's backward refuses
    some operand, e.g. scatter's src larger than the index: the other one is still compared);
    plus "fatal" (device-assert | crash) after a device fault: the worker's answer then carries
    it and the worker exits."""
    names = leaf_names(spec, built.tensors)
    if not names:
        return {"none": "no floating data operand"}
    ans: dict = {"ops": []}
    one = _attempt(spec, case, built, dev, names, device, alloc, synchronize, classify_error, ans)
    if "exc_type" not in one:
        ans.update(one)
        return ans
    ans.update(exc_type=one["exc_type"], exc_msg=one["exc_msg"])
    if one.get("fatal"):
        ans["fatal"] = one["fatal"]
        return ans
    if len(names) > 1:
        ans["per_leaf"] = {}
        for n in names:
            r = _attempt(spec, case, built, dev, [n], device, alloc, synchronize, classify_error, ans)
            if r.get("fatal"):
                ans.update(fatal=r["fatal"], exc_type=r["exc_type"], exc_msg=r["exc_msg"])
                return ans
            ans["per_leaf"][n] = ({"grad": r["grads"][n]} if "grads" in r else
                                  {"exc_type": r["exc_type"], "exc_msg": r["exc_msg"]})
    return ans


def _attempt(spec, case, built, dev, names, device, alloc, synchronize, classify_error, ans) -> dict:
    """One backward with ``names`` as the leaves: {"grads": ...} | {"no_graph": True, ...} |
    {"exc_type", "exc_msg"[, "fatal"]}; the ops it ran are added to ans["ops"]."""
    got: dict = {}
    try:
        leaves = {n: dev[n].detach().requires_grad_(True) for n in names}
        ns = dict(built.scalars)
        ns.update(dev)
        ns.update(leaves)
        with torch.enable_grad():
            out = run_call(spec.calls["func"], ns)
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return {"no_graph": True, "grads": {n: None for n in names}}
        ans["upstream"] = upstream_layout(case, list(out.shape))
        g = gen.materialize(upstream(case, out.shape, out.dtype), device, alloc)

        def back():
            got["grads"] = torch.autograd.grad(out, [leaves[n] for n in names], g, allow_unused=True)

        seen: list = []
        try:
            trace(back, seen)
        finally:  # what ran up to an exception too: the report names the op that raised
            ans["ops"] = list(dict.fromkeys(ans["ops"] + seen))
        synchronize(device)
        res = {"grads": {n: (None if x is None else gen.pack(x)) for n, x in zip(names, got["grads"])}}
        synchronize(device)
        return res
    except Exception as e:  # noqa: BLE001 - the backend's backward failed: the parent judges it
        kind = classify_error(e, device)
        if kind is None:  # a host-side error may follow an asserting kernel: flush it out now
            try:
                synchronize(device)
            except Exception as e2:  # noqa: BLE001
                if classify_error(e2, device):
                    kind, e = classify_error(e2, device), e2
        res = {"exc_type": type(e).__name__, "exc_msg": str(e)[:2000]}
        if kind:
            res["fatal"] = "device-assert" if kind == "device-assert" else "crash"
        return res


def trace(fn, seen: list):
    """Run ``fn()``, appending to ``seen`` the overloads it dispatches to as they run
    (coverage.trace)."""
    from .coverage import trace as _trace

    _trace(fn, seen)


# ---------------------------------------------------------------------------------------------
# Parent side: the native reference and the verdict


@dataclass
class GradRef:
    upstream: str = "contiguous"  # its layout
    error: Optional[BaseException] = None  # native's backward (every leaf at once) raised
    leaf_errors: dict = field(default_factory=dict)  # ... then: name -> its error with it alone
    grads: dict = field(default_factory=dict)  # name -> native gradient (case dtype) or None
    ref64: dict = field(default_factory=dict)  # name -> float64 (complex128) gradient
    tol: dict = field(default_factory=dict)  # name -> per-element tolerance
    exact: dict = field(default_factory=dict)  # name -> bool mask: compared bitwise
    repeats: bool = False  # some gradient element sums several upstream terms
    ops: list = field(default_factory=list)  # aten ops native's backward ran


def _backward(spec, built, names, leaves_of, g, seen=None):
    ns = dict(built.scalars)
    for k, v in built.tensors.items():
        if k != "out":
            ns[k] = v
    leaves = {n: leaves_of(built.tensors[n]).requires_grad_(True) for n in names}
    ns.update(leaves)
    with torch.enable_grad():
        out = run_call(spec.calls["func"], ns)
    box: dict = {}

    def back():
        box["g"] = torch.autograd.grad(out, [leaves[n] for n in names], g(out), allow_unused=True)

    if seen is not None:
        trace(back, seen)
    else:
        back()
    return dict(zip(names, box["g"]))


def reference(spec, built, expected, tol) -> GradRef:
    """Native CPU's backward of the case (whose forward gave ``expected``) on contiguous copies
    of its operands and of the upstream gradient (as the forward oracle's R2), with the float64
    backward, the term counts and magnitudes for the rule. Not in the case's own layouts:
    native's CPU kernels are not layout-proof either (ATen's scatter_add through an index
    expanded at rank 10, gather's backward, writes elements outside the index's extent: found
    by the audit on 2026-12-06, tests/test_audit_grad.py), and the reference must not inherit
    such a bug as the truth."""
    with quiet_native():
        flat = gen.Built(built.case, {k: _map(v, lambda x: x.contiguous().clone())
                                      for k, v in built.tensors.items()}, built.scalars, None)
        return _reference(spec, flat, expected, tol)


def _reference(spec, built, expected, tol) -> GradRef:
    case = built.case
    names = leaf_names(spec, built.tensors)
    shape = list(expected.shape)
    gr = GradRef(upstream=upstream_layout(case, shape))
    up = upstream(case, shape, expected.dtype).contiguous()
    try:
        gr.grads = _backward(spec, built, names, clone_layout, lambda out: up, gr.ops)
    except Exception as e:  # noqa: BLE001 - native's backward raises: the candidate may too
        gr.error = e
        if len(names) < 2:
            return gr
        for n in names:  # each leaf alone (the worker does the same when its backward raised)
            try:
                gr.grads.update(_backward(spec, built, [n], clone_layout, lambda out: up, gr.ops))
            except Exception as e1:  # noqa: BLE001
                gr.leaf_errors[n] = e1
    compared = [n for n in gr.grads if gr.grads[n] is not None]
    if not compared:
        return gr
    wide = torch.complex128 if expected.dtype.is_complex else torch.float64

    def up64(t):  # a float64 copy in the same layout
        return gen.flat_storage(t).to(wide if t.dtype.is_complex else torch.float64).as_strided(
            t.shape, t.stride(), t.storage_offset())

    b64 = gen.Built(case, {k: (up64(v) if k in names else v) for k, v in built.tensors.items()},
                    built.scalars, None)

    def grads64(g):
        out: dict = {}
        for group in ([compared] if gr.error is None else [[n] for n in compared]):
            out.update(_backward(spec, b64, group, lambda t: t, g))
        return out

    gr.ref64 = grads64(lambda out: up.to(out.dtype))
    counts = grads64(lambda out: torch.ones(out.shape, dtype=out.dtype))
    mags = grads64(lambda out: up.abs().to(out.dtype))
    extra = 0
    if nonlinear(case):  # the backward reuses the forward's accumulated result
        extra = 2 + _forward_terms(spec, built)
    for n in compared:
        if counts[n] is None:
            continue
        c = counts[n].abs().real.to(torch.float64)
        gr.repeats = gr.repeats or bool((c > 1).any())
        fi = torch.finfo(gr.grads[n].dtype)
        atol = tol.factor * fi.tiny if tol.atol is None else tol.atol
        m = mags[n].abs().to(torch.float64)
        gr.tol[n] = tol.factor * fi.eps * (c + extra + 1) * m + atol
        if tol.exact_accum:  # --exact-accum: a deterministic backend matches native's bits
            gr.exact[n] = torch.ones_like(c, dtype=torch.bool)
        else:
            gr.exact[n] = (c <= 1) if not nonlinear(case) else torch.zeros_like(c, dtype=torch.bool)
    return gr


def _forward_terms(spec, built) -> int:
    """The most terms the forward accumulates into one output element (its count call)."""
    if not spec.count_call:
        return 1
    ns = dict(built.scalars)
    for k, v in built.tensors.items():
        if k == "out":
            continue
        ns[k] = v if k in spec.index_operands else (
            None if v is None else torch.ones(v.shape, dtype=torch.float64))
    for s in spec.value_scalars:
        if s in ns and not isinstance(ns[s], bool):
            ns[s] = 1
    try:
        c = run_call(spec.count_call, ns)
        return int(c.abs().max()) if c.numel() else 1
    except Exception:  # noqa: BLE001 - e.g. a count call native refuses: assume a long chain
        return 64


def judge_case(spec, built, ref, ans: dict, v: Verdict, feats: dict, tol, clock=None):
    """(the case's verdict, its backward record or None) once the worker ran the backward
    (runner.finish). A forward that did not pass is judged alone (its backward is not judged);
    a failing backward becomes the case's verdict (reason backward-*, harm class backward), and
    its record keeps native's backward under "_ref" (the runner moves it to ``grad_ref``, for
    the repro script). ``clock``: the runner's time profile (the reference is oracle time)."""
    from . import features, oracle, timing

    g = ans["grad"]
    if g.get("fatal"):  # the worker died in backward: oracle.judge made it a crash ...
        fwd = oracle.judge(spec, built, ref, {k: x for k, x in ans.items() if k not in (
            "fatal", "detail", "exc_type", "exc_msg")}, tol)
        if fwd.status != "pass":  # ... but a failing forward is judged on its forward
            return fwd, None
        v.reason, v.detail = "backward-crash", f"crashed in backward: {v.detail}"
        return v, {"status": "crash", "reason": "backward-crash", "upstream": g.get("upstream"),
                   "ops": g.get("ops", []), "detail": v.detail}
    if v.status != "pass" or v.reason or ref is None or ref.expected is None or g.get("none"):
        return v, None  # not differentiable here, or the forward already failed
    t0 = timing.now()
    gr = reference(spec, built, ref.expected, tol)
    if clock is not None:
        clock.parent["oracle"] += timing.now() - t0
    gv = judge(gr, g, tol)
    rec = {"status": gv.status, "reason": gv.reason or "", "detail": gv.detail,
           "upstream": gr.upstream, "ops": g.get("ops", []), "native_ops": gr.ops}
    if gv.status != "skip":  # the backward's own features (diagnosis): its upstream layout
        feats.update(features.grad_features(gr.upstream, gr.repeats))
    if gv.status in oracle.FAILING:
        rec["_ref"] = gr
        return Verdict(gv.status, gv.reason, f"forward passed; backward: {gv.detail}",
                       gv.mismatch), rec
    return v, rec


def shown_ops(ops) -> list:
    """The backward's ops worth naming (not allocation, fills or views)."""
    return [q for q in ops if q not in PLUMBING] or list(ops)


def judge(gr: GradRef, cand: dict, tol) -> Verdict:
    """The backward verdict: pass, skip (native's backward raises, the candidate's does not:
    nothing to compare), or a failing one (reasons above). When native's backward raises with
    every leaf at once, the leaves native differentiates alone are compared with the
    candidate's (its backward with every leaf, or with that leaf alone when it raised too)."""
    ran = f" [backward ran {', '.join(shown_ops(cand.get('ops') or [])) or 'no aten op'}]"
    raised = "exc_type" in cand
    err = (f"backward raised where native CPU does not: {cand.get('exc_type')}: "
           f"{cand.get('exc_msg', '')[:300]}{ran}")
    if gr.error is None and raised and (cand.get("exc_type") == "NotImplementedError"
                                       or _UNSUPPORTED.search(cand.get("exc_msg", ""))):
        # the forward's rule (oracle._judge): a kernel the device/backend lacks is unsupported,
        # not wrong (a plug-in device without index_add has no index_select backward)
        return Verdict("unsupported", "backward-unsupported", err.replace(
            "backward raised where native CPU does not", "backward not supported here"))
    if gr.error is None and raised:
        return Verdict("bad-error", "backward-error", err)
    if gr.error is not None and not any(v is not None for v in gr.grads.values()):
        if raised:
            return Verdict("pass", "backward-expected-error")
        return Verdict("skip", "backward-native-raises", "native CPU's backward raises "
                       f"{type(gr.error).__name__}: {str(gr.error).splitlines()[0][:200]}; the "
                       f"candidate's did not (not compared)")
    if cand.get("no_graph"):
        if any(v is not None for v in gr.grads.values()):
            return Verdict("wrong", "backward-missing", "the result is not connected to the "
                           "autograd graph (no grad_fn) where native computes gradients for "
                           + ", ".join(n for n, v in gr.grads.items() if v is not None))
        return Verdict("pass", "backward-none")
    for n, exp in gr.grads.items():
        if not raised:
            p = (cand.get("grads") or {}).get(n)
        else:  # native differentiates n alone: so must the candidate
            alone = (cand.get("per_leaf") or {}).get(n) or {}
            if "grad" not in alone:
                what = (f"{alone['exc_type']}: {alone.get('exc_msg', '')[:300]}" if alone else
                        f"{cand.get('exc_type')}: {cand.get('exc_msg', '')[:300]}")
                return Verdict("bad-error", "backward-error", f"backward for {n} alone raised where "
                               f"native CPU's does not: {what}{ran}")
            p = alone["grad"]
        v = _compare(n, exp, p, gr, tol, ran)
        if v is not None:
            return v
    return Verdict("pass")


def _compare(n, exp, p, gr: GradRef, tol, ran):
    """None when the candidate's gradient ``p`` (packed) of ``n`` matches native's ``exp``."""
    got = None if p is None else gen.unpack(p)
    if exp is None:
        if got is not None and bool((got != 0).any()):
            return Verdict("wrong", "backward-extra", f"a non-zero gradient for {n}, which "
                           f"native's backward leaves without one{ran}")
        return None
    if got is None:
        return Verdict("wrong", "backward-missing", f"no gradient for {n} (native has one){ran}")
    if list(got.shape) != list(exp.shape) or got.dtype != exp.dtype:
        return Verdict("wrong", "backward-shape", f"gradient of {n}: {tuple(got.shape)} "
                       f"{got.dtype}, expected {tuple(exp.shape)} {exp.dtype}{ran}")
    ok = _ok(n, got, exp, gr)
    if bool(ok.all()):
        return None
    bad = (~ok).nonzero().tolist() if ok.dim() else [[]]
    p0 = tuple(bad[0])
    ref = gr.ref64[n][p0].item() if n in gr.tol else exp[p0].item()
    exact = bool(gr.exact[n][p0]) if n in gr.exact else True
    how = "bitwise (at most one term)" if exact else tol.describe()
    return Verdict("wrong", "backward-values", f"gradient of {n}: {len(bad)} of {got.numel()} "
                   f"elements differ ({how}); first at {list(p0)}: expected {ref!r}, got "
                   f"{got[p0].item()!r} (upstream gradient {gr.upstream}){ran}",
                   mismatch={"operand": n, "count": len(bad), "numel": got.numel(),
                             "first": [{"at": list(p0), "expected": _py(ref),
                                        "got": _py(got[p0].item())}]})


def _ok(n, got, exp, gr: GradRef):
    same = bits_eq(got, exp)
    if n not in gr.tol:
        return same
    r = gr.ref64[n]
    w = got.to(r.dtype)
    close = ((w - r).abs() <= gr.tol[n]) | (~torch.isfinite(r) & bits_eq(w, r))
    ex = gr.exact[n]
    return torch.where(ex, same, close | same)


def _py(v):
    return [v.real, v.imag] if isinstance(v, complex) else v


__all__ = ["differentiable", "upstream", "upstream_layout", "run", "reference", "judge", "GradRef"]
