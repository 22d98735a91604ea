"""The layout matrix: build a tensor of a given logical shape in a given memory layout.

Every generator takes ``make(shape) -> Tensor`` (a function returning *contiguous* values of
``shape``) and returns a view of the requested layout class holding values produced by
``make``. The values differ per layout (an expanded tensor must be constant along its
broadcast dims), so callers compare against a reference computed on the *same* view, never
against a separately drawn tensor.

Layout classes (``../shared/design.md``):
  contiguous, expand (stride 0 on one dim), expand_all (every dim stride 0: a scalar
  broadcast), transpose, permute, step_slice, offset (nonzero storage offset), compound
  (step slice of a transpose of an expand, with a storage offset).
"""
from __future__ import annotations

import random
from typing import Callable, Sequence

import torch

Make = Callable[[Sequence[int]], torch.Tensor]

LAYOUTS = (
    "contiguous",
    "expand",
    "expand_all",
    "transpose",
    "permute",
    "step_slice",
    "offset",
    "compound",
)


def _big_dims(shape: Sequence[int]) -> list[int]:
    return [d for d, s in enumerate(shape) if s > 1]


def _swapped(shape, a: int, b: int) -> list[int]:
    """``shape`` with dims ``a`` and ``b`` exchanged."""
    out = list(shape)
    out[a], out[b] = out[b], out[a]
    return out


def _random_permuted(shape, rng: random.Random, build: Callable[[list[int]], torch.Tensor]) -> torch.Tensor:
    """``build(pre).permute(*inv)`` for a random non-identity permutation: ``pre`` holds
    shape[perm[i]] at i, so the result has ``shape``. Needs ``len(shape) >= 2``."""
    r = len(shape)
    perm = list(range(r))
    while perm == list(range(r)):
        rng.shuffle(perm)
    inv = [0] * r
    for i, p in enumerate(perm):
        inv[p] = i
    return build([shape[p] for p in perm]).permute(*inv)


def _step_sliced_transpose(shape, make: Make, rng: random.Random,
                           build_base: Callable[[list[int], int], torch.Tensor]) -> torch.Tensor:
    """A step slice of a transpose of ``build_base(stepped, b)``, a tensor of shape ``stepped``
    (``b`` is the dim the step slice runs on before transposing)."""
    r = len(shape)
    if r < 2:
        return step_slice(shape, make, rng)
    a, b = rng.sample(range(r), 2)
    swapped = _swapped(shape, a, b)
    # The step slice runs on dim `a` of the transposed result (= dim b before transposing).
    stepped = list(swapped)
    stepped[b] = swapped[b] * 2 + 1
    base = build_base(stepped, b)
    sl = [slice(None)] * r
    sl[b] = slice(1, None, 2)
    out = base[tuple(sl)].transpose(a, b)
    assert list(out.shape) == list(shape), (out.shape, shape)
    return out


def contiguous(shape, make: Make, rng: random.Random) -> torch.Tensor:
    return make(list(shape))


def expand(shape, make: Make, rng: random.Random) -> torch.Tensor:
    dims = _big_dims(shape) or list(range(len(shape)))
    if not dims:
        return make(list(shape))
    d = rng.choice(dims)
    small = list(shape)
    small[d] = 1
    return make(small).expand(*shape)


def expand_all(shape, make: Make, rng: random.Random) -> torch.Tensor:
    return make([1] * len(shape)).reshape([1] * len(shape)).expand(*shape) if shape else make([])


def transpose(shape, make: Make, rng: random.Random) -> torch.Tensor:
    r = len(shape)
    if r < 2:
        return step_slice(shape, make, rng)
    a, b = rng.sample(range(r), 2)
    return transpose_dims(shape, make, rng, a, b)


def permute(shape, make: Make, rng: random.Random) -> torch.Tensor:
    if len(shape) < 2:
        return step_slice(shape, make, rng)
    return _random_permuted(shape, rng, make)


def step_slice(shape, make: Make, rng: random.Random) -> torch.Tensor:
    r = len(shape)
    if r == 0:
        return offset(shape, make, rng)
    d = rng.randrange(r)
    step = rng.choice([2, 3])
    out = step_slice_dim(shape, make, rng, d, step)
    assert list(out.shape) == list(shape)
    return out


def offset(shape, make: Make, rng: random.Random) -> torch.Tensor:
    return _offset_make(make, shape, rng.randrange(1, 8))


def compound(shape, make: Make, rng: random.Random) -> torch.Tensor:
    """A step slice of a transpose of an expand, at a storage offset."""

    def make_expanded(s, b):
        e = rng.choice([d for d in range(len(s)) if d != b])
        small = list(s)
        small[e] = 1
        return _offset_make(make, small, 3).expand(*s)  # storage offset 3

    return _step_sliced_transpose(shape, make, rng, make_expanded)


GENERATORS = {
    "contiguous": contiguous,
    "expand": expand,
    "expand_all": expand_all,
    "transpose": transpose,
    "permute": permute,
    "step_slice": step_slice,
    "offset": offset,
    "compound": compound,
}


def make_layout(kind: str, shape: Sequence[int], make: Make, rng: random.Random) -> torch.Tensor:
    """A tensor of logical ``shape`` in layout ``kind`` with values from ``make``."""
    return GENERATORS[kind](list(shape), make, rng)


def describe(t: torch.Tensor) -> str:
    """Shape, strides and storage offset: enough to rebuild the view with as_strided."""
    return (
        f"shape={tuple(t.shape)} stride={tuple(t.stride())} "
        f"offset={t.storage_offset()} dtype={t.dtype} contiguous={t.is_contiguous()}"
    )


# ---------------------------------------------------------------------------------------
# Additions (tests engineer). Backwards compatible: LAYOUTS, GENERATORS, make_layout and
# describe keep their meaning; new names are only added.
#
#  - WRITABLE_LAYOUTS: the classes that never alias two elements, i.e. valid for `out=`
#    (expand / expand_all / compound put stride 0 on a dim of size > 1).
#  - "compound_writable": a step slice of a transpose of a permute, at a storage offset.
#  - "deep_compound": a permute of a step slice of a transpose of an expand, at an offset.
#  - Parametrized kinds, "NAME@ARGS", for pinning the affected dim:
#      "expand@D[,D...]"   stride 0 on the given dims (dims of size 1 stay as they are)
#      "transpose@A,B"     the view is base.transpose(A, B)
#      "step_slice@D[:S]"  step S (default 2) slice on dim D, starting at 1
#      "offset@K"          storage offset K
#  - is_writable(t): True when no two elements of t share memory (a cheap sufficient test).
# ---------------------------------------------------------------------------------------

WRITABLE_LAYOUTS = (
    "contiguous",
    "transpose",
    "permute",
    "step_slice",
    "offset",
    "compound_writable",
)


def compound_writable(shape, make: Make, rng: random.Random) -> torch.Tensor:
    """A step slice of a transpose of a permute, at a storage offset; never aliases."""

    def make_permuted(s, b):
        return permute(s, lambda s2: _offset_make(make, s2, 5), rng)

    return _step_sliced_transpose(shape, make, rng, make_permuted)


def deep_compound(shape, make: Make, rng: random.Random) -> torch.Tensor:
    """permute(step_slice(transpose(expand(base at offset)))): every trick at once."""
    if len(shape) < 3:
        return compound(shape, make, rng)
    return _random_permuted(shape, rng, lambda pre: compound(pre, make, rng))


def _offset_make(make: Make, shape, k: int) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    return make([n + k])[k:].view(*shape) if shape else make([k + 1])[k]


def expand_dims(shape, make: Make, rng: random.Random, dims=None) -> torch.Tensor:
    r = len(shape)
    if dims is None:
        dims = [rng.choice(_big_dims(shape) or list(range(r)))] if r else []
    small = list(shape)
    for d in dims:
        small[d % r] = 1
    return make(small).expand(*shape)


def transpose_dims(shape, make: Make, rng: random.Random, a=0, b=1) -> torch.Tensor:
    r = len(shape)
    a, b = a % r, b % r
    return make(_swapped(shape, a, b)).transpose(a, b)


def step_slice_dim(shape, make: Make, rng: random.Random, d=0, step=2) -> torch.Tensor:
    r = len(shape)
    d = d % r
    big = list(shape)
    big[d] = shape[d] * step + 1
    idx = [slice(None)] * r
    idx[d] = slice(1, None, step)
    return make(big)[tuple(idx)]


EXTRA_GENERATORS = {
    "compound_writable": compound_writable,
    "deep_compound": deep_compound,
}


def _parametrized(kind: str):
    name, _, args = kind.partition("@")
    if name == "expand":
        dims = [int(a) for a in args.split(",")]
        return lambda s, m, rng: expand_dims(s, m, rng, dims)
    if name == "transpose":
        a, b = (int(x) for x in args.split(","))
        return lambda s, m, rng: transpose_dims(s, m, rng, a, b)
    if name == "step_slice":
        d, _, step = args.partition(":")
        return lambda s, m, rng: step_slice_dim(s, m, rng, int(d), int(step or 2))
    if name == "offset":
        k = int(args)
        return lambda s, m, rng: _offset_make(m, s, k)
    raise KeyError(kind)


def generator_for(kind: str):
    """The generator for any kind make_layout_ex accepts."""
    if kind in GENERATORS:
        return GENERATORS[kind]
    if kind in EXTRA_GENERATORS:
        return EXTRA_GENERATORS[kind]
    if "@" in kind:
        return _parametrized(kind)
    raise KeyError(f"unknown layout kind {kind!r}")


def make_layout_ex(kind: str, shape: Sequence[int], make: Make, rng: random.Random) -> torch.Tensor:
    """make_layout, also accepting EXTRA_GENERATORS names and "NAME@ARGS" kinds."""
    return generator_for(kind)(list(shape), make, rng)


def is_writable(t: torch.Tensor) -> bool:
    """True when no two elements of ``t`` share memory (sufficient test: sort strides)."""
    dims = sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz > 1)
    if t.numel() == 0:
        return True
    span = 1  # elements covered by the dims seen so far
    for st, sz in dims:
        if st < span:
            return False
        span = st * (sz - 1) + span
    return True
