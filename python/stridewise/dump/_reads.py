"""Which arguments of an ATen op the op does not read: the one rule the dump applies (issue 25).

Some ops overwrite a tensor argument without looking at its old values: ``x.zero_()``,
``torch.empty(n).normal_()``, ``torch.add(a, b, out=o)``.  That argument often is uninitialized
memory (fresh from ``empty``), so recording its bytes and comparing them between two runs reports
a divergence no op caused.  The dump records such an input with ``"read": false`` and no bytes.

The rule (:func:`unread_arguments`): an argument is *not read* when the op's schema marks it
written (``alias_info.is_write``, ``Tensor(a!)``) **and** either

(a) it is an out= argument (``Argument.is_out``: a keyword-only written argument).  ATen's out=
    contract says the result of ``op.out(..., out=o)`` equals ``op(...)`` copied into ``o``
    (resized first when needed), whatever ``o`` held; functionalization relies on it, rewriting
    every out= call as the functional op, a resize and a copy into ``out``; or

(b) the op's exact overload is in :data:`OVERWRITE_ONLY`, a table of in-place overloads whose
    results do not depend on the written argument's values (fill, zero, the in-place random
    generators, copy_, set_, resize).  Each entry is checked on the running torch by
    tests/test_dump_reads.py: the overload run twice on clones holding different values (random
    data, then NaN) under the same RNG seed gives bitwise-equal results.

Names are exact qualified overloads (``aten::fill_.Scalar``), never patterns: a custom op that
happens to be called ``fill_`` and reads its argument is recorded with its bytes.  Every other
written argument (``add_``'s self, ``index_put_``'s self, ...) is read, and recorded.

resize_, resize_as_ and _resize_output_ (:data:`UNINITIALIZED_OUTPUT`) are special: their
results' *values* are not part of their contract.  Storage a resize grows is uninitialized; the
bytes it keeps are the old storage reinterpreted contiguously, whatever the old strides were
(and an unchanged size leaves the tensor as it was).  So their outputs are treated like
``empty``'s: not a function of the recorded inputs, not compared; an op that later reads the
resized tensor records it as its own input.

Not in the table: ``copy_.Tensor/.int/.float`` (TorchScript-only, no dispatcher kernel, never
reach the dump) and ``_copy_from`` / ``_copy_from_and_resize``, whose schemas (torch 2.13) do not
mark ``dst`` written, so the rule cannot apply to them (their ``.out`` forms are covered by (a)).

This module imports nothing from torch at import time (``stridewise.dump`` imports without it).
"""
from __future__ import annotations

# Qualified overload ("namespace::name.overload", the overload of a schema without one being
# "default") -> the written argument whose old values the op does not read.
OVERWRITE_ONLY = {
    "aten::fill_.Scalar": "self",
    "aten::fill_.Tensor": "self",
    "aten::zero_.default": "self",
    "aten::normal_.default": "self",
    "aten::uniform_.default": "self",
    "aten::bernoulli_.float": "self",
    "aten::bernoulli_.Tensor": "self",
    "aten::random_.default": "self",
    "aten::random_.from": "self",
    "aten::random_.to": "self",
    "aten::exponential_.default": "self",
    "aten::geometric_.default": "self",
    "aten::cauchy_.default": "self",
    "aten::log_normal_.default": "self",
    "aten::copy_.default": "self",
    "aten::set_.default": "self",
    "aten::set_.source_Storage": "self",
    "aten::set_.source_Storage_storage_offset": "self",
    "aten::set_.source_Tensor": "self",
    "aten::set_.source_Tensor_storage_offset": "self",
    "aten::resize_.default": "self",
    "aten::resize_as_.default": "self",
    "aten::_resize_output_.default": "self",
    "aten::_foreach_zero_.default": "self",   # a list: every element
    "aten::_foreach_copy_.default": "self",   # a list: every element
}

# Overloads whose output values are unspecified (see the module docstring): treat like empty's.
UNINITIALIZED_OUTPUT = frozenset({
    "aten::resize_.default", "aten::resize_as_.default", "aten::_resize_output_.default",
})

_CACHE = {}


def qualified_name(func) -> str:
    """"aten::fill_.Scalar" for torch.ops.aten.fill_.Scalar; "aten::zero_.default" for zero_."""
    return f"{func._schema.name}.{func._overloadname}"


def _is_write(arg) -> bool:
    info = arg.alias_info
    return info is not None and bool(info.is_write)


def written_arguments(func) -> frozenset:
    """Names of the schema arguments the op writes (``Tensor(a!)``, ``Tensor(a!)[]``)."""
    return frozenset(a.name for a in func._schema.arguments if _is_write(a))


def unread_arguments(func) -> frozenset:
    """Names of the arguments of OpOverload ``func`` whose values the op does not read (the rule
    of the module docstring); cached per OpOverload. Empty for almost every op."""
    got = _CACHE.get(func)
    if got is None:
        table_arg = OVERWRITE_ONLY.get(qualified_name(func))
        got = frozenset(a.name for a in func._schema.arguments
                        if _is_write(a) and (a.is_out or a.name == table_arg))
        _CACHE[func] = got
    return got
