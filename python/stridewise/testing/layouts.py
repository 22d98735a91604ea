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
    swapped = list(shape)
    swapped[a], swapped[b] = swapped[b], swapped[a]
    return make(swapped).transpose(a, b)


def permute(shape, make: Make, rng: random.Random) -> torch.Tensor:
    r = len(shape)
    if r < 2:
        return step_slice(shape, make, rng)
    perm = list(range(r))
    while r > 1 and perm == list(range(r)):
        rng.shuffle(perm)
    # base has shape[perm[i]] at position i; base.permute(inv) has `shape`.
    base = make([shape[p] for p in perm])
    inv = [0] * r
    for i, p in enumerate(perm):
        inv[p] = i
    return base.permute(*inv)


def step_slice(shape, make: Make, rng: random.Random) -> torch.Tensor:
    r = len(shape)
    if r == 0:
        return offset(shape, make, rng)
    d = rng.randrange(r)
    step = rng.choice([2, 3])
    big = list(shape)
    big[d] = shape[d] * step + 1
    idx = [slice(None)] * r
    idx[d] = slice(1, None, step)
    out = make(big)[tuple(idx)]
    assert list(out.shape) == list(shape)
    return out


def offset(shape, make: Make, rng: random.Random) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    k = rng.randrange(1, 8)
    flat = make([n + k])
    return flat[k:].view(*shape) if shape else flat[k]


def compound(shape, make: Make, rng: random.Random) -> torch.Tensor:
    """A step slice of a transpose of an expand, at a storage offset."""
    r = len(shape)
    if r < 2:
        return step_slice(shape, make, rng)
    a, b = rng.sample(range(r), 2)
    swapped = list(shape)
    swapped[a], swapped[b] = swapped[b], swapped[a]
    # The step slice runs on dim `a` of the transposed result (= dim b before transposing).
    stepped = list(swapped)
    stepped[b] = swapped[b] * 2 + 1
    e = rng.choice([d for d in range(r) if d != b])

    def make_expanded(s):
        small = list(s)
        small[e] = 1
        n = 1
        for x in small:
            n *= x
        base = make([n + 3])[3:].view(*small)  # storage offset 3
        return base.expand(*s)

    base = make_expanded(stepped)
    sl = [slice(None)] * r
    sl[b] = slice(1, None, 2)
    out = base[tuple(sl)].transpose(a, b)
    assert list(out.shape) == list(shape), (out.shape, shape)
    return out


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
