"""A test backend with one planted kernel bug, for "sw-compare names the op that went wrong"
(issue 25): while ``planted_bug`` is active, one ATen op returns its correct result with exactly
one element changed, on one call in one phase, below any ``TorchDispatchMode`` (so
``stridewise.dump`` records the wrong value as that op's output, as it would a real kernel bug).

    from compare_planted_backend import planted_bug

    with planted_bug("aten::index_select", "forward", call=0) as bug:
        with stridewise.dump.dump(root):
            model(x).sum().backward()
    assert bug.hits == 1 and bug.changed  # [(phase, call, linear index, old value, new value)]

What changes: the op's first tensor output (``out=`` / the in-place ``self`` for those
overloads), at its middle element in C order (linear index ``numel // 2``, whatever the strides):
floating point ``x + eps * max(1, |x|)`` (eps 1e-2 by default: wrong under every built-in
tolerance, bfloat16's 5e-3 included, and under ``bitwise``; a NaN or Inf becomes 0), complex the
same on the real part, integers ``+ 1`` (wrapping), bool negated. An empty output cannot hold the
bug: the call is counted, nothing changes, and the exit check below fails.

Which calls count: calls of the op (all overloads that have a kernel of their own, i.e. not a
CompositeImplicitAutograd decomposition) in ``phase``, numbered from 0 from the entry, like the
dump's ``call`` field (per op name and phase; the dump restarts at each step, this does not).
``phase`` is "backward" when ``torch._C._current_graph_task_id() != -1`` (the dump's rule).
A call made from inside another op's kernel (ATen's ``embedding`` runs ``index_select``) is
not an op call the dump sees, and would make the numbering disagree, so it is neither counted
nor changed: the kernel looks at the Python frame that entered the dispatcher, and when that
frame is ``OpOverload.__call__`` of a different op (how a dispatch mode such as the dump calls
an op) the call is nested. Without any dispatch mode (plain eager) the two cannot be told
apart and every call counts.

How (``key``):

- ``"BackendSelect"`` (default): ``torch.library.Library("aten", "IMPL")`` registers a Python
  kernel for each overload on the BackendSelect dispatch key, which the dispatcher runs after
  the Python key (dispatch modes: the dump) and before the backend key (CPU, CUDA). It
  redispatches to the backend kernel in force at call time (ATen's, or stridewise's while
  ``stridewise.use()`` routes the op: the keyset below BackendSelect), then changes the element.
  The backend registrations are left alone, so ``stridewise.use()`` / ``enable()`` /
  ``disable()`` may be entered or called in any order, inside or outside; any device works.
  Ops that already have a BackendSelect kernel (factory functions) are refused.
- ``"backend"``: registers the kernel on the CPU and CUDA keys themselves (where the op has a
  kernel there), replacing the routed kernel the way a backend library's own kernel would; it
  computes the correct value by calling the kernel that was in force for that key at entry
  (``torch.library.get_kernel``; not itself: no recursion). stridewise's ``enable()`` registers
  on the same keys and the latest registration wins, so here ``stridewise.use()`` must be
  entered outside ``planted_bug``: one entered inside shadows the planted kernel (the exit check
  then fails, naming this), and a ``disable()`` inside invalidates the kernel captured at entry
  (torch raises "SafeKernelFunction has been invalidated").

Both were tried on torch 2.13 (CPU); ``"backend"`` is the literal "routed op with a kernel bug",
``"BackendSelect"`` the one that does not depend on the order of context managers, hence the
default. Neither needs the planted kernel to be entered before or after the dump.

On exit (when the body raised nothing), a ``planted_bug`` whose chosen call never ran, or ran
with an empty output, raises ``PlantedBugMissed``; ``require_hit=False`` turns that off.
The registrations are removed on exit, exceptions included.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from dataclasses import dataclass, field

import torch

__all__ = ["PlantedBugMissed", "planted_bug", "changed_element"]

KEYS = ("BackendSelect", "backend")


class PlantedBugMissed(AssertionError):
    """The planted call never ran, or had nothing to change."""


@dataclass
class PlantedBug:
    op: str
    phase: str
    call: int
    eps: float
    key: str
    overloads: list = field(default_factory=list)  # "aten::index_select.out", ...
    seen: int = 0  # calls of the op in the phase so far (the dump's numbering)
    nested: int = 0  # calls from inside another op's kernel (not counted)
    hits: int = 0  # calls whose output was changed (0 or 1)
    empty: bool = False  # the chosen call had an empty output
    changed: list = field(default_factory=list)  # (phase, call, linear index, old, new)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _phase() -> str:
    return "backward" if torch._C._current_graph_task_id() != -1 else "forward"


_CALL_CODES = None


def _caller_op(frame):
    """The op whose ``OpOverload.__call__`` (or packet ``__call__``) frame this is, else None."""
    global _CALL_CODES
    if _CALL_CODES is None:
        _CALL_CODES = {torch._ops.OpOverload.__call__.__code__, torch._ops.OpOverloadPacket.__call__.__code__}
    if frame is None or frame.f_code not in _CALL_CODES:
        return None
    me = frame.f_locals.get("self")
    schema = getattr(me, "_schema", None)
    if schema is not None:
        return schema.name
    qual = getattr(me, "_qualified_op_name", None)  # a packet: "aten::index_select"
    return qual


def changed_element(t: torch.Tensor, eps: float):
    """Changes ``t``'s middle element (C order) in place; returns (linear index, old, new)."""
    flat = t.numel() // 2
    idx = []
    for s in reversed(t.shape):
        idx.append(flat % s)
        flat //= s
    idx = tuple(reversed(idx))
    with torch.no_grad():
        old = t[idx].clone()
        if t.dtype == torch.bool:
            new = ~old
        elif t.dtype.is_floating_point or t.dtype.is_complex:
            x = old.to(torch.complex128 if t.dtype.is_complex else torch.float64)
            r = x.real if t.dtype.is_complex else x
            if not torch.isfinite(r):
                r = torch.zeros_like(r)
            else:
                r = r + eps * max(1.0, abs(float(r)))
            new = (torch.complex(r, x.imag) if t.dtype.is_complex else r).to(t.dtype)
            if bool(new == old) and not t.dtype.is_complex:  # rounded back (eps too small for the dtype)
                new = torch.nextafter(old, torch.full_like(old, float("inf")))
        else:
            new = old + 1
        t[idx] = new
    return t.numel() // 2, old.item(), t[idx].item()


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            if isinstance(o, torch.Tensor):
                return o
    return None


def _numbers_as_tensors(args, tensor_at):
    """A Python kernel receives a wrapped number (C++'s ``tensor * 2``, ATen's deterministic
    CUDA index_add's ``source * alpha``) as a Python number, which the boxed call refuses for a
    Tensor argument ("Expected a value of type 'Tensor' for argument 'other' but instead found
    type 'int'": aten::mul on the H200, 2026-12-04). Turned back into a 0-dim CPU tensor:
    ``torch.tensor(v)`` takes the dtype a wrapped number promotes as (bool, int64, the default
    float or complex dtype); it differs from a wrapped number only against a 0-dim operand of a
    narrower floating type."""
    numbers = (bool, int, float, complex)
    if not any(i < len(args) and isinstance(args[i], numbers) for i in tensor_at):
        return args
    return tuple(torch.tensor(a) if i in tensor_at and isinstance(a, numbers) else a
                 for i, a in enumerate(args))


def _make_kernel(bug: PlantedBug, overload: torch._ops.OpOverload, original):
    """A boxed kernel (called with the dispatch keyset first): runs ``original(keyset, ...)``
    and, on the chosen call, changes one element of its output."""
    target = bug.op

    tensor_at = [i for i, a in enumerate(overload._schema.arguments) if str(a.type) == "Tensor"]

    def kernel(keyset, *args, **kwargs):
        out = original(keyset, *_numbers_as_tensors(args, tensor_at), **kwargs)
        caller = _caller_op(sys._getframe(1))
        if caller is not None and caller != target:
            with bug.lock:
                bug.nested += 1
            return out
        phase = _phase()
        if phase != bug.phase:
            return out
        with bug.lock:
            n = bug.seen
            bug.seen += 1
        if n != bug.call:
            return out
        t = _first_tensor(out)
        if t is None or t.numel() == 0:
            bug.empty = True
            return out
        where, old, new = changed_element(t, bug.eps)
        with bug.lock:
            bug.hits += 1
            bug.changed.append((phase, n, where, old, new))
        return out

    kernel.__name__ = f"planted_{overload._schema.name.split('::')[-1]}_{overload._overloadname}"
    return kernel


def _overloads(op: str):
    """(op name, the OpOverloads of it that have a kernel of their own)."""
    name = op if "::" in op else f"aten::{op}"
    ns, _, rest = name.partition("::")
    base, _, only = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), base)
    names = [only or "default"] if only else packet.overloads()
    out = []
    for o in names:
        qual = f"{ns}::{base}" + ("" if o == "default" else f".{o}")
        try:
            ov = getattr(packet, o)
            implicit = torch._C._dispatch_has_kernel_for_dispatch_key(qual, "CompositeImplicitAutograd")
        except (AttributeError, RuntimeError):
            if only:
                raise
            continue  # a TorchScript-only overload (aten::mul.left_t): not in the dispatcher
        if implicit:
            continue  # decomposes above the dispatch modes: never seen as itself
        out.append((qual, ov))
    if not out:
        raise ValueError(f"planted_bug: {name} has no overload with a kernel of its own "
                         f"(CompositeImplicitAutograd ops decompose before any backend)")
    return f"{ns}::{base}", out


@contextlib.contextmanager
def planted_bug(op: str, phase: str = "forward", call: int = 0, eps: float = 1e-2, key: str = "BackendSelect",
                require_hit: bool = True):
    """While active, call number ``call`` of ATen op ``op`` ("aten::index_select", or
    "aten::index_select.out" for one overload) in ``phase`` ("forward" / "backward") returns its
    correct output with its middle element changed. Yields the PlantedBug record (``hits``,
    ``changed``, ``seen``, ``nested``). See the module docstring for ``key``."""
    if phase not in ("forward", "backward"):
        raise ValueError(f"phase must be 'forward' or 'backward', got {phase!r}")
    if key not in KEYS:
        raise ValueError(f"key must be one of {KEYS}, got {key!r}")
    name, overloads = _overloads(op)
    bug = PlantedBug(name, phase, int(call), float(eps), key)
    lib = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
            for qual, ov in overloads:
                short = qual.split("::", 1)[1]
                if key == "BackendSelect":
                    if torch._C._dispatch_has_kernel_for_dispatch_key(qual, "BackendSelect"):
                        raise ValueError(f"planted_bug: {qual} has a BackendSelect kernel of its own "
                                         f"(a factory function); use key='backend'")
                    below = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.BackendSelect)

                    def original(keyset, *args, _ov=ov, _below=below, **kwargs):
                        return _ov.redispatch(keyset & _below, *args, **kwargs)

                    lib.impl(short, _make_kernel(bug, ov, original), "BackendSelect", with_keyset=True)
                    bug.overloads.append(qual)
                    continue
                for dk in ("CPU", "CUDA"):
                    if not torch._C._dispatch_has_computed_kernel_for_dispatch_key(qual, dk):
                        continue
                    k = torch.library.get_kernel(qual, dk)
                    lib.impl(short, _make_kernel(bug, ov, k.call_boxed), dk, with_keyset=True)
                    bug.overloads.append(f"{qual} [{dk}]")
        if not bug.overloads:
            raise ValueError(f"planted_bug: {name} has no CPU or CUDA kernel to replace")
        yield bug
    except BaseException:
        lib._destroy()
        raise
    lib._destroy()
    if require_hit and bug.hits != 1:
        why = (f"its output was empty" if bug.empty else
               f"only {bug.seen} {phase} call(s) of {name} reached the planted kernel "
               f"({bug.nested} nested call(s) from other ops' kernels not counted)")
        hint = (" With key='backend', a stridewise.use()/enable() entered inside planted_bug "
                "registers its kernels over the planted one." if key == "backend" else "")
        raise PlantedBugMissed(f"planted bug in {name} {phase} call {call} never fired: {why}.{hint}")
