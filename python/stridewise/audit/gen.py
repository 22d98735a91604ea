"""Input generation for audit cases: values, layouts, bad indices, storages.

Everything here is deterministic in the case id and uses only non-indexing torch ops
(random, arithmetic, views, copy), so it runs unchanged inside a worker whose indexing kernels
were replaced by the backend under audit.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import torch

from ..testing import layouts as L
from .caseid import IDX_DTYPES, Case
from .layout_names import ALL_LAYOUTS, EXTRA_LAYOUTS, known_layout  # noqa: F401 (re-exported)

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "complex64": torch.complex64, "complex128": torch.complex128,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "bool": torch.bool,
}
for _n in ("uint16", "uint32", "uint64"):  # shell dtypes (torch >= 2.3)
    if hasattr(torch, _n):
        DTYPES[_n] = getattr(torch, _n)
DTYPE_NAME = {v: k for k, v in DTYPES.items()}


def dtype_of(name: str) -> torch.dtype:
    if name in IDX_DTYPES:
        name = IDX_DTYPES[name]
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


@dataclass
class Data:
    """A data operand of logical ``shape``; ``values``: normal | near1 (for products)."""
    shape: list
    values: str = "normal"
    dtype: Any = None  # default: the case dtype


@dataclass
class Index:
    """An index operand whose valid values are [0, n) (and [-n, 0) where the op wraps)."""
    shape: list
    n: int
    mask: bool = False  # a bool mask (index.Tensor / index_put) instead of integer indices


@dataclass
class Plan:
    """What a spec asks for: operands (name -> Data | Index | list of Index), scalar arguments
    and the result shape (used to make the ``out=`` operand)."""
    operands: dict
    scalars: dict = field(default_factory=dict)
    out: Any = None  # Data for the out= operand (shape of the result)


# ---------------------------------------------------------------------------------------------
# Values


def random_values(shape, dtype: torch.dtype, gen: torch.Generator, values: str = "normal"):
    shape = list(shape)
    if dtype.is_complex:
        real = torch.float64 if dtype == torch.complex128 else torch.float32
        if values == "near1":
            re = 1 + 0.05 * (2 * torch.rand(shape, generator=gen, dtype=real) - 1)
            im = 0.05 * (2 * torch.rand(shape, generator=gen, dtype=real) - 1)
        else:
            re = torch.randn(shape, generator=gen, dtype=real)
            im = torch.randn(shape, generator=gen, dtype=real)
        return torch.complex(re, im).to(dtype)
    if dtype.is_floating_point:
        if values == "near1":
            v = 1 + 0.05 * (2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1)
        else:
            v = torch.randn(shape, generator=gen, dtype=torch.float64)
        return v.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
    if values == "near1":
        return torch.randint(1, 3, shape, generator=gen).to(dtype)
    if dtype == torch.uint8 or DTYPE_NAME.get(dtype, "").startswith("uint"):
        return torch.randint(1, 100, shape, generator=gen).to(dtype)
    return torch.randint(-50, 50, shape, generator=gen).to(dtype)


def index_values(shape, n: int, kind: str, dtype: torch.dtype, gen: torch.Generator, mask=False):
    shape = list(shape)
    if mask:
        return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
    hi = max(n, 1)
    if kind == "dup":
        v = torch.randint(0, min(hi, 2), shape, generator=gen)
    elif kind == "neg":
        v = torch.randint(-hi, hi, shape, generator=gen)
    else:
        v = torch.randint(0, hi, shape, generator=gen)
        if dtype == torch.int32 and hi >= 2 and v.numel() >= 2:
            # _offsets_visible: neighbours in memory differ (a walk of non-zero steps mod n), so
            # a read one element off reads another value
            steps = 1 + torch.randint(0, hi - 1, (v.numel() - 1,), generator=gen)
            walk = torch.cat([v.view(-1)[:1], v.view(-1)[:1] + torch.cumsum(steps, 0)])
            v = (walk % hi).view(shape)
    return v.to(dtype)


def bad_value(kind: str, n: int, idx_dtype: torch.dtype, rng: random.Random) -> int:
    if kind == "oob":
        return n + rng.choice([0, 0, 1, 7])
    if kind == "oobneg":
        return -n - 1 - rng.choice([0, 3])
    # oobbig: a value that 32-bit truncation turns into a valid one
    if idx_dtype == torch.int32:
        return 2**31 - 1
    return 2**32 + rng.randrange(max(n, 1))


def set_one(t: torch.Tensor, value, rng: random.Random):
    """Write ``value`` at one random logical position of ``t`` (through the view)."""
    if t.numel() == 0:
        return
    if t.dim() == 0:
        t.fill_(value)
        return
    pos = tuple(rng.randrange(s) for s in t.shape)
    t[pos].fill_(value)


# ---------------------------------------------------------------------------------------------
# Building a case


@dataclass
class Built:
    case: Case
    tensors: dict  # name -> Tensor | list[Tensor] (CPU, requested layouts)
    scalars: dict
    written: str | None  # operand written in place (self for inplace, out for out=), or None


def build(spec, case: Case) -> Built:
    """Make the CPU inputs of ``case`` in the requested layouts (deterministic in the id)."""
    dtype = dtype_of(case.dtype)
    idx_dtype = dtype_of(case.idx_dtype)
    rng = random.Random(case.int_seed("plan"))
    plan: Plan = spec.plan(case, rng)
    for k in range(64 if case.idx_dtype == "i32" else 0):
        if _offsets_visible(plan):
            break
        rng = random.Random(case.int_seed(f"plan:{k}"))
        plan = spec.plan(case, rng)
    tensors: dict = {}
    operands = dict(plan.operands)
    if case.variant == "out":
        operands["out"] = plan.out
    for name, what in operands.items():
        lay = case.layout_of(name)
        items = what if isinstance(what, list) else [what]
        made = []
        for j, it in enumerate(items):
            if it is None:  # a full slice in an index list
                made.append(None)
                continue
            key = f"{name}{j}"
            gen = torch.Generator().manual_seed(case.int_seed("values:" + key))
            lrng = random.Random(case.int_seed("layout:" + key))
            shape = it.shape(tensors) if callable(it.shape) else it.shape
            if isinstance(it, Index):
                kind = case.kind
                idt = torch.bool if it.mask else idx_dtype

                def make(s, it=it, gen=gen, kind=kind, idt=idt):
                    return index_values(s, it.n, kind, idt, gen, it.mask)
            else:
                dt = it.dtype if it.dtype is not None else dtype

                def make(s, it=it, gen=gen, dt=dt):
                    return random_values(s, dt, gen, it.values)
            t = make_layout(lay, shape, make, lrng, plan.scalars.get("dim"))
            if isinstance(it, Index) and not it.mask:
                t = _adjust_index(t, it, case, idx_dtype, lrng)
            made.append(t)
        tensors[name] = made if isinstance(what, list) else made[0]
    written = {"inplace": "self", "out": "out"}.get(case.variant)
    return Built(case, tensors, dict(plan.scalars), written)


def _offsets_visible(plan: Plan) -> bool:
    """Whether a kernel that reads an index one element off would show it: every integer index
    of the plan has two or more elements and a range of two or more values. The int32 cases are
    the int32 instantiations' only test, and the quick matrix's shapes are small: with a
    one-element index (a third of them) the read of the next element reads the same one. An
    int32 case whose plan fails it draws its plan again (up to 64 times; deterministic in its
    id; the quick matrices of 58 seeds needed at most 14 draws); :func:`index_values` then
    makes neighbours differ."""
    for what in plan.operands.values():
        for it in what if isinstance(what, list) else [what]:
            if isinstance(it, Index) and not it.mask and not callable(it.shape):
                if math.prod(it.shape) < 2 or it.n < 2:
                    return False
    return True


def make_layout(kind: str, shape, make, rng: random.Random, dim=None) -> torch.Tensor:
    """layouts.make_layout plus ``expand_nondim``: stride 0 on every dim except ``dim`` (the
    GNN pattern ``index.view(-1, 1).expand_as(src)``), and the tests' extra kinds."""
    if kind == "expand_nondim":
        shape = list(shape)
        if not shape or dim is None:
            return L.make_layout("expand_all", shape, make, rng)
        d = dim % len(shape)
        small = [s if k == d else 1 for k, s in enumerate(shape)]
        return make(small).expand(*shape)
    if kind in L.GENERATORS:
        return L.make_layout(kind, shape, make, rng)
    return L.make_layout_ex(kind, shape, make, rng)


def _adjust_index(t, it: Index, case: Case, idx_dtype, rng):
    kind = case.kind
    if kind == "neg" and t.numel() and not bool((t < 0).any()):
        set_one(t, -rng.randrange(1, it.n + 1) if it.n else -1, rng)
    elif kind in ("oob", "oobneg", "oobbig") and t.numel():
        set_one(t, bad_value(kind, it.n, idx_dtype, rng), rng)
    return t


# ---------------------------------------------------------------------------------------------
# Storages


def storage_elems(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // t.element_size()


def extent(t: torch.Tensor) -> int:
    """Elements of storage the view needs: the tight storage a guarded copy gets."""
    if t.numel() == 0:
        return 0
    return t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1


def flat_storage(t: torch.Tensor, n: int | None = None) -> torch.Tensor:
    """A 1-D view of the first ``n`` elements of ``t``'s storage (default: all of it)."""
    n = storage_elems(t) if n is None else n
    return t.as_strided((n,), (1,), 0)


def materialize(t: torch.Tensor, device: torch.device, alloc=None) -> torch.Tensor:
    """The same view (sizes, strides, storage offset, storage contents) on ``device``.
    With a guard allocator the storage is cut to the view's extent and ends at a guard page;
    with the margin allocator (guard.MarginAlloc) the whole storage sits between poisoned
    margins, at a storage offset of the allocation (the view's offset is shifted by it)."""
    if alloc is None and t.device == device:
        return t
    margin = hasattr(alloc, "split")
    n = extent(t) if alloc is not None and not margin else storage_elems(t)
    src = flat_storage(t, n)
    if margin:
        dst = alloc.empty(n, t.dtype, device, reach=t.numel())
    elif alloc is not None:
        dst = alloc.empty(n, t.dtype, device)
    else:
        dst = torch.empty(n, dtype=t.dtype, device=device)
    if n:
        dst.copy_(src)
    return dst.as_strided(t.shape, t.stride(), dst.storage_offset() + t.storage_offset())


def storage_bytes(t: torch.Tensor) -> bytes:
    """The bytes of the whole storage behind ``t`` (on any device)."""
    n = t.untyped_storage().nbytes()
    if n == 0:
        return b""
    u = torch.empty(0, dtype=torch.uint8, device=t.device)
    u = u.set_(t.untyped_storage(), 0, (n,), (1,))
    return u.cpu().numpy().tobytes() if _HAVE_NUMPY else bytes(u.cpu().tolist())


def pack(t: torch.Tensor) -> dict:
    """A tensor's logical values as plain data (picklable without torch's shared memory)."""
    c = t.detach().cpu()
    flat = torch.empty(c.numel(), dtype=c.dtype)
    raw = b""
    if c.numel():
        flat.copy_(c.reshape(-1))
        u = flat.view(torch.uint8)
        raw = u.numpy().tobytes() if _HAVE_NUMPY else bytes(u.tolist())
    return {"dtype": DTYPE_NAME.get(c.dtype, str(c.dtype)), "shape": list(c.shape), "raw": raw}


def overlaps(t: torch.Tensor) -> bool:
    """True when two elements of ``t`` may share memory (sort strides; sufficient test)."""
    if t.numel() <= 1:
        return False
    span = 1
    for st, sz in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz > 1):
        if st < span:
            return True
        span = st * (sz - 1) + span
    return False


def internal_overlap(t: torch.Tensor) -> bool:
    """True when two elements of ``t`` do share memory (exact: ``overlaps`` screens, then the
    element offsets are compared). ATen itself only detects a stride 0 on a dim of size > 1."""
    if not overlaps(t):
        return False
    off = torch.full((), t.storage_offset(), dtype=torch.long)
    for k, (sz, st) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[k] = sz
        off = off + (torch.arange(sz) * st).reshape(shape)
    return off.reshape(-1).unique().numel() < t.numel()


def unpack(p: dict) -> torch.Tensor:
    dt = dtype_of(p["dtype"])
    if not p["raw"]:
        return torch.empty(p["shape"], dtype=dt)
    u = torch.frombuffer(bytearray(p["raw"]), dtype=torch.uint8)
    return u.view(dt).reshape(p["shape"])


def bytes_to_tensor(raw: bytes, dtype: torch.dtype) -> torch.Tensor:
    if not raw:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype)


try:  # numpy only speeds up byte transfers
    import numpy  # noqa: F401

    _HAVE_NUMPY = True
except Exception:  # pragma: no cover
    _HAVE_NUMPY = False
