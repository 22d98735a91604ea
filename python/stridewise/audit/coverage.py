"""Coverage: which aten overloads the backend under audit really runs (torch only).

Without it, an op or variant the backend does not implement runs natively (ATen) and would
count as the backend's pass. The worker (``worker.setup``) takes a :func:`snapshot` of the
dispatcher after the ``--import`` modules and before the backend module is imported (an import
alone may register kernels), another after its enable call, and :func:`diff` says per overload
who runs it. Contract:

- :func:`overloads` -- every ``torch.ops.aten.NAME.OVERLOAD`` of a call expression (a spec's
  ``calls[variant]``), as qualified names: ``aten::NAME`` for ``default``, else
  ``aten::NAME.OVERLOAD``. Anything else in the expression (non-aten calls) is not seen.
- :func:`dispatch_keys` -- the device's backend key (``CPU``, ``CUDA``, ..., ``PrivateUse1``
  for a plug-in device such as npu) and its autograd key (``Autograd<Key>``).
- :func:`snapshot` -- per overload, the kernel the dispatcher's computed table holds for those
  two keys (the table's text: where it was registered and what kind of kernel it is) and
  whether the backend key's kernel is CompositeImplicitAutograd (it decomposes into other ops).
- :func:`trace` -- the overloads a call really dispatches to below autograd, recorded by a
  TorchDispatchMode: a CompositeImplicitAutograd op appears decomposed.
- :func:`diff` -- per overload ``ran_by``: ``backend`` (its kernel for the device key or the
  autograd key changed after the backend's import and enable), ``native`` (unchanged) or
  ``composite`` (unchanged, CompositeImplicitAutograd; ``decomposes_into`` the traced overloads
  when known, ``covered`` those of them the backend runs).
- :func:`classify` -- one call (an op's variant): ``backend`` if the backend runs any of its
  overloads; ``composite`` if it runs none of them but a composite one decomposes into an
  overload the backend runs (counted as the backend's); ``backward`` (--grad) if its forward
  runs natively but the backend runs an overload of its backward; ``native`` otherwise;
  ``unknown`` when an overload is missing from the snapshot or the call names none.

The runner (``Runner._attribute``) gives a passing case of a ``native`` call the status
``native`` (not a pass, not a failure); every other verdict stands, marked ``ran_by``.

Not seen: a backend that intercepts above the dispatcher (patched torch functions, a
TorchFunctionMode), or only inside a CompositeExplicitAutograd kernel's redispatch (ATen's
generic kernel of e.g. embedding calls index_select: embedding still counts as native).
"""
from __future__ import annotations

import re

import torch

_CALL = re.compile(r"torch\.ops\.aten\.([A-Za-z_]\w*)\.([A-Za-z_]\w*)")
_ENTRY = re.compile(r"^([A-Za-z0-9_]+): (.*)$")


def qualname(name: str, overload: str) -> str:
    return f"aten::{name}" if overload == "default" else f"aten::{name}.{overload}"


def overloads(expr: str) -> list:
    """Qualified names of every aten overload the call expression names, in order, once."""
    out: list = []
    for m in _CALL.finditer(expr or ""):
        q = qualname(m.group(1), m.group(2))
        if q not in out:
            out.append(q)
    return out


def dispatch_keys(device_type: str) -> tuple:
    """(backend key, autograd key) of a device type: ('CUDA', 'AutogradCUDA'), ..."""
    dt = device_type.split(":")[0]
    try:
        pu1 = torch._C._get_privateuse1_backend_name()
    except Exception:  # noqa: BLE001
        pu1 = "privateuseone"
    if dt in (pu1, "privateuseone"):
        key = "PrivateUse1"
    else:
        try:
            key = str(torch._C._dispatch_key_for_device(dt))
        except Exception:  # noqa: BLE001 - older torch, or a device it does not know
            key = dt.upper()
    return key, f"Autograd{key}"


def _names(key: str) -> tuple:
    """Names the dispatch table may print for ``key`` (a renamed PrivateUse1 backend too)."""
    if "PrivateUse1" not in key:
        return (key,)
    try:
        alt = key.replace("PrivateUse1", torch._C._get_privateuse1_backend_name().upper())
    except Exception:  # noqa: BLE001
        return (key,)
    return (key, alt)


def _table(qualname_: str) -> dict:
    """The computed dispatch table of an overload: {key: 'registered at ... [kind]'}."""
    out = {}
    for line in torch._C._dispatch_dump_table(qualname_).splitlines():
        m = _ENTRY.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def _is_composite(qualname_: str, entry) -> bool:
    if entry and entry.endswith("]"):
        return entry.endswith("[math kernel]")  # the table's word for CompositeImplicitAutograd
    try:  # a table without kinds: a CompositeImplicitAutograd kernel and nothing more specific
        has = torch._C._dispatch_has_kernel_for_dispatch_key
        return bool(has(qualname_, "CompositeImplicitAutograd")) and not any(
            has(qualname_, k) for k in ("CompositeExplicitAutograd",
                                        "CompositeExplicitAutogradNonFunctional"))
    except Exception:  # noqa: BLE001
        return False


def snapshot(qualnames, device_type: str) -> dict:
    """{qualname: {"kernel": entry or None, "autograd": entry or None, "composite": bool}};
    an overload this torch does not know gets {"error": message}."""
    key, akey = dispatch_keys(device_type)
    out = {}
    for q in qualnames:
        try:
            t = _table(q)
        except Exception as e:  # noqa: BLE001 - e.g. an overload this torch version lacks
            out[q] = {"kernel": None, "autograd": None, "composite": False,
                      "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
            continue
        kern = next((t[k] for k in _names(key) if k in t), None)
        auto = next((t[k] for k in _names(akey) if k in t), None)
        out[q] = {"kernel": kern, "autograd": auto, "composite": _is_composite(q, kern)}
    return out


def trace(fn, seen: list | None = None) -> list:
    """Run ``fn()`` and return the qualified names of the overloads (any namespace) it
    dispatched to below autograd (CompositeImplicitAutograd ones decomposed), in order, once
    each. With ``seen`` given, names are appended to it as they run: it keeps what ran before
    an exception (grad.py names the ops of a backward that raised)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = [] if seen is None else seen

    class _Record(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls):  # torch >= 2.12 would wrap the hook (imports dynamo: 1 s)
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ov = func._overloadname
            q = func._schema.name + ("" if ov in ("default", "") else f".{ov}")
            if q not in seen:
                seen.append(q)
            return func(*args, **(kwargs or {}))

    with _Record():
        fn()
    return seen


def diff(before: dict, after: dict, decomposed=None) -> dict:
    """Per overload of ``before``: {"ran_by": "backend" | "native" | "composite", "kernel": the
    kernel after}; composite ones also get "decomposes_into" (``decomposed[q]``, when traced)
    and "covered" (those of them whose kernel changed)."""
    def changed(q):
        b, a = before.get(q), after.get(q)
        if b is None or a is None or b.get("error") or a.get("error"):
            return False
        return (a.get("kernel"), a.get("autograd")) != (b.get("kernel"), b.get("autograd"))

    out = {}
    for q, b in before.items():
        a = after.get(q, b)
        ent = {"kernel": a.get("kernel")}
        if b.get("error"):
            ent.update(ran_by="unknown", error=b["error"])
        elif changed(q):
            ent["ran_by"] = "backend"
        elif b.get("composite"):
            ent["ran_by"] = "composite"
            into = (decomposed or {}).get(q)
            if into is not None:
                ent["decomposes_into"] = list(into)
                ent["covered"] = [x for x in into if changed(x)]
        else:
            ent["ran_by"] = "native"
        out[q] = ent
    return out


def classify(expr: str, per_overload: dict, backward=None) -> dict:
    """Who runs a call: {"ran_by": "backend" | "composite" | "backward" | "native" | "unknown",
    "overloads": [...], "via": [overloads the backend runs through a composite, if any]}.
    ``backward`` (--grad, a func variant): the overloads its backward runs; the entry then gets
    "backward": {"overloads": those known here, "backend": those the backend runs}, and a call
    whose forward runs natively but whose backward the backend runs is ``backward``: its
    differentiable cases are the backend's (a backend that registers only a backward kernel)."""
    qs = overloads(expr)
    ents = [per_overload.get(q) for q in qs]
    if not qs or any(e is None or e.get("ran_by") == "unknown" for e in ents):
        out = {"ran_by": "unknown", "overloads": qs}
    elif any(e["ran_by"] == "backend" for e in ents):
        out = {"ran_by": "backend", "overloads": qs}
    else:
        via = [x for e in ents if e["ran_by"] == "composite" for x in e.get("covered", [])]
        out = ({"ran_by": "composite", "overloads": qs, "via": sorted(set(via))} if via
               else {"ran_by": "native", "overloads": qs})
    if backward is not None:
        known = [q for q in backward if q in per_overload and per_overload[q].get("ran_by") != "unknown"]
        mine = [q for q in known if per_overload[q]["ran_by"] == "backend"]
        out["backward"] = {"overloads": known, "backend": mine}
        if mine and out["ran_by"] == "native":
            out["ran_by"] = "backward"
    return out


__all__ = ["overloads", "dispatch_keys", "snapshot", "trace", "diff", "classify", "qualname"]
