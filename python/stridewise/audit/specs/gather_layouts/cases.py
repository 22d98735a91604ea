"""What a gather check builds: ``GatherCase``, ``build_inputs``, and the case sets shared by
the pytest matrix, the auditor and the benchmarks (seed matrix, layout cross products, ranks,
dtypes, edges, large)."""
from __future__ import annotations

import dataclasses
import math
import random
import zlib
from typing import Callable, Iterable, Optional

import torch

from ....testing import layouts
from .values import CORE_DTYPES, INDEX_DTYPES, _gen, dtype_name, poison, random_index, random_values

# ---------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GatherCase:
    self_shape: tuple
    index_shape: tuple
    dim: int
    dtype: torch.dtype = torch.float32
    index_dtype: torch.dtype = torch.int64
    self_layout: str = "contiguous"
    index_layout: str = "contiguous"
    out_layout: Optional[str] = None  # None: functional form
    index_values: str = "random"      # random | dup | max | min
    seed: int = 0
    name: str = ""

    @property
    def id(self) -> str:
        if self.name:
            return self.name
        out = f"-out={self.out_layout}" if self.out_layout else ""
        return (f"r{len(self.self_shape)}-dim{self.dim}-{dtype_name(self.dtype)}-"
                f"{dtype_name(self.index_dtype)}-self={self.self_layout}-"
                f"index={self.index_layout}{out}")

    def with_seed(self, seed: int) -> "GatherCase":
        return dataclasses.replace(self, seed=seed)

    def replace(self, **kw) -> "GatherCase":
        return dataclasses.replace(self, **kw)


def case_seed(base: int, *parts) -> int:
    """A per-test seed derived from a base seed and names (stable across runs)."""
    return zlib.crc32(repr((base,) + tuple(parts)).encode()) ^ (base & 0xFFFF_FFFF)


def _sub(seed: int, what: str) -> int:
    return zlib.crc32(f"{seed}:{what}".encode())


def build_inputs(case: GatherCase, device="cpu", place: Optional[Callable] = None) -> dict:
    """self, index and (for out= cases) a poisoned out, as views of the case's layouts.
    Deterministic in ``case`` (the device only changes where the tensors live).

    ``place(t) -> Tensor``, when given, receives every contiguous CPU buffer the layouts are
    carved from and returns the tensor to carve from instead (same shape, dtype and values),
    e.g. a copy in guarded memory whose storage ends at an inaccessible page."""
    dim_size = case.self_shape[case.dim] if case.self_shape else 1

    def maker(fn, what):
        g = _gen(_sub(case.seed, what + "/values"))
        if place is not None:
            return lambda shape: place(fn(list(shape), g))
        return lambda shape: fn(list(shape), g).to(device)

    rng = random.Random(_sub(case.seed, "layout"))
    self_ = layouts.make_layout_ex(
        case.self_layout, case.self_shape,
        maker(lambda s, g: random_values(s, case.dtype, g), "self"), rng)
    index = layouts.make_layout_ex(
        case.index_layout, case.index_shape,
        maker(lambda s, g: random_index(s, dim_size, case.index_dtype, g, case.index_values), "index"),
        rng)
    inputs = {"self": self_, "index": index, "dim": case.dim}
    if case.out_layout is not None:
        inputs["out"] = layouts.make_layout_ex(
            case.out_layout, case.index_shape,
            (lambda s: place(poison(s, case.dtype))) if place is not None
            else (lambda s: poison(s, case.dtype).to(device)), rng)
    return inputs


def describe_inputs(inputs: dict) -> str:
    parts = [f"dim={inputs['dim']}"]
    for k in ("self", "index", "out"):
        if k in inputs:
            parts.append(f"{k}: {layouts.describe(inputs[k])}")
    return " | ".join(parts)


# ---------------------------------------------------------------------------------------
# case sets (shared by the pytest matrix, the auditor and the benchmarks)
# ---------------------------------------------------------------------------------------

SEED_REPRO = GatherCase((4, 16, 384), (4, 1, 384), 1, torch.float16, torch.int64,
                        "contiguous", "expand@2", index_values="max", name="seed-repro")


def seed_matrix() -> list:
    """The seed's 9 cases: index made non-contiguous by expand / transpose / slice, gather
    along dim 0 / 1 / 2 (x (4,16,384) fp16), plus the repro and the contiguous fast path."""
    cases = [SEED_REPRO]
    base = (4, 16, 384)
    for d in range(3):
        other = 2 if d != 2 else 1
        ishape = list(base)
        ishape[d] = 3
        cases.append(GatherCase(base, tuple(ishape), d, torch.float16, index_layout=f"expand@{d}",
                                name=f"seed-expand-dim{d}"))
        ishape_t = list(base)
        ishape_t[other] = 8  # index smaller than self on a non-gather dim
        cases.append(GatherCase(base, tuple(ishape_t), d, torch.float16,
                                index_layout=f"transpose@{d},{other}", name=f"seed-transpose-dim{d}"))
        cases.append(GatherCase(base, tuple(ishape), d, torch.float16, index_layout=f"step_slice@{d}:2",
                                name=f"seed-slice-dim{d}"))
    cases.append(GatherCase(base, (4, 5, 384), 1, torch.float16, name="seed-contiguous-fast-path"))
    return cases


def layout_cross_cases(out: bool = False) -> list:
    """Every layout class for self x index (functional); with ``out``: x every writable out."""
    cases = []
    self_shape, index_shape = (5, 6, 7), (4, 9, 6)
    for sl in layouts.LAYOUTS:
        for il in layouts.LAYOUTS:
            if not out:
                cases.append(GatherCase(self_shape, index_shape, 1, torch.float32,
                                        self_layout=sl, index_layout=il))
            else:
                for ol in layouts.WRITABLE_LAYOUTS:
                    cases.append(GatherCase(self_shape, index_shape, -2, torch.float32,
                                            self_layout=sl, index_layout=il, out_layout=ol))
    return cases


RANKS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 25)


def rank_shapes(rank: int, rng: random.Random) -> tuple:
    """(self_shape, index_shape, dim) for ``rank``: small sizes, index no larger than self
    on non-gather dims (and smaller on some), rank 25 mostly size-1 dims."""
    if rank == 0:
        return (), (), 0
    if rank >= 16:
        s = [1] * rank
        for d in rng.sample(range(rank), 4):
            s[d] = rng.choice([2, 3])
    else:
        budget = 4096
        s = []
        for _ in range(rank):
            v = rng.choice([1, 2, 3, 4, 5] if rank <= 4 else [1, 2, 2, 3])
            s.append(v)
        while math.prod(s) > budget:
            s[s.index(max(s))] -= 1
    big = [d for d in range(rank) if s[d] > 1]
    dim = rng.choice(big) if big else rank - 1
    idx = list(s)
    for d in range(rank):
        if d != dim and idx[d] > 1 and rng.random() < 0.4:
            idx[d] -= 1
    idx[dim] = rng.choice([1, 2, s[dim] + 1])
    return tuple(s), tuple(idx), dim


def rank_cases(base_seed: int = 0) -> list:
    """Ranks 0..8, 10 and 25; per rank each layout class on self, on index and on out (the
    other operands contiguous), plus deep compound views on all three at once."""
    cases = []
    for r in RANKS:
        rng = random.Random(1000 + r)
        ss, ishape, dim = rank_shapes(r, rng)
        ndim = dim - r if r and (r % 2 == 1) else dim  # negative dim on odd ranks
        mk = lambda **kw: GatherCase(ss, ishape, ndim, torch.float32, **kw)
        for l in layouts.LAYOUTS:
            cases.append(mk(self_layout=l, name=f"rank{r}-self={l}"))
            cases.append(mk(index_layout=l, name=f"rank{r}-index={l}"))
        for l in layouts.WRITABLE_LAYOUTS:
            cases.append(mk(out_layout=l, name=f"rank{r}-out={l}"))
        if r >= 2:
            cases.append(mk(self_layout="deep_compound", index_layout="deep_compound",
                            out_layout="compound_writable", name=f"rank{r}-all=compound"))
    return cases


def dtype_cases(dtypes: Iterable = CORE_DTYPES) -> list:
    """Every dtype x index dtype on: the contiguous fast path, an expanded-index (vector
    friendly) layout with a ragged tail, transposed self and a compound view."""
    cases = []
    for dt in dtypes:
        for it in INDEX_DTYPES:
            n = f"{dtype_name(dt)}-{dtype_name(it)}"
            cases.append(GatherCase((4, 16, 64), (4, 3, 64), 1, dt, it, name=f"{n}-contiguous"))
            cases.append(GatherCase((3, 7, 37), (3, 2, 37), 1, dt, it, index_layout="expand@2",
                                    name=f"{n}-expanded-index"))
            cases.append(GatherCase((6, 5, 4), (6, 5, 4), -1, dt, it, self_layout="transpose",
                                    index_layout="permute", out_layout="step_slice",
                                    name=f"{n}-transposed-out"))
            cases.append(GatherCase((6, 5, 4), (5, 5, 3), 0, dt, it, self_layout="compound",
                                    index_layout="compound", out_layout="compound_writable",
                                    name=f"{n}-compound"))
    return cases


def edge_cases() -> list:
    """0-dim, empty, size-1, duplicates, index larger than self along dim, negative dims."""
    f = torch.float32
    return [
        GatherCase((), (), 0, f, name="0dim-dim0"),
        GatherCase((), (), -1, f, name="0dim-dim-1"),
        GatherCase((), (), 0, f, out_layout="contiguous", name="0dim-out"),
        GatherCase((3, 0), (3, 0), 1, f, name="empty-self-empty-index"),
        GatherCase((3, 4), (0, 2), 1, f, name="empty-index"),
        GatherCase((3, 4), (3, 0), 1, f, out_layout="contiguous", name="empty-index-out"),
        GatherCase((0, 4), (0, 2), 1, f, name="empty-self-rows"),
        GatherCase((3, 4), (3, 0), 0, f, index_layout="transpose", name="empty-index-transposed"),
        GatherCase((1, 1, 1), (1, 1, 1), 2, f, name="all-size-1"),
        GatherCase((5, 7), (5, 40), 1, f, index_values="dup", name="duplicates-all-same"),
        GatherCase((5, 7), (5, 40), 1, f, index_layout="expand_all", name="duplicates-expand-all"),
        GatherCase((5, 7), (5, 7), 1, f, index_values="max", name="index-max-value"),
        GatherCase((5, 7), (5, 7), 0, f, index_values="min", name="index-min-value"),
        GatherCase((5, 7), (2, 30), 1, f, name="index-larger-along-dim"),
        GatherCase((5, 7, 3), (2, 3, 1), -3, f, index_layout="step_slice", name="negative-dim-3"),
        GatherCase((5, 7, 3), (2, 3, 1), -1, f, self_layout="expand", name="negative-dim-1"),
        GatherCase((1,), (9,), 0, f, name="self-size-1-along-dim"),
        GatherCase((7, 1, 5), (7, 1, 5), 1, f, index_layout="expand_all", self_layout="expand",
                   name="expanded-size1-dim"),
    ]


def large_cases() -> list:
    """Cases above the CPU kernel's parallel grain (tens of thousands of elements) so the
    work is split in chunks that start in the middle of rows: every layout class on index
    and on self, writable outs, the seed's layout, both index dtypes."""
    cases = []
    sshape, ishape = (40, 33, 65), (37, 41, 64)   # 97,088 index elements
    for l in layouts.LAYOUTS:
        cases.append(GatherCase(sshape, ishape, 1, torch.float32, index_layout=l,
                                name=f"large-index={l}"))
        cases.append(GatherCase(sshape, ishape, 1, torch.float16, torch.int32, self_layout=l,
                                name=f"large-self={l}-int32"))
    for l in layouts.WRITABLE_LAYOUTS:
        cases.append(GatherCase(sshape, ishape, -2, torch.uint8, index_layout="compound",
                                self_layout="permute", out_layout=l, name=f"large-out={l}"))
    cases.append(GatherCase((64, 16, 384), (64, 1, 384), 1, torch.float16, index_layout="expand@2",
                            name="large-seed-layout"))
    cases.append(GatherCase((3, 5, 7, 11, 13, 2), (3, 5, 7, 11, 13, 9), 5, torch.float64,
                            index_layout="deep_compound", self_layout="deep_compound",
                            out_layout="compound_writable", name="large-rank6-compound"))
    # The CUDA tile kernel: the index runs along another dim than out, both >= 32, partial
    # tiles at both edges (45 = 32 + 13, 70 = 2 * 32 + 6); also into a transposed out=.
    for dt, it in ((torch.float32, torch.int64), (torch.float16, torch.int32),
                   (torch.complex128, torch.int64)):
        cases.append(GatherCase((3, 50, 70), (3, 45, 70), 1, dt, it, index_layout="transpose@1,2",
                                name=f"large-tile-{str(dt)[6:]}-{str(it)[6:]}"))
    cases.append(GatherCase((3, 50, 70), (3, 45, 70), 2, torch.float32, index_layout="transpose@1,2",
                            out_layout="transpose@0,2", name="large-tile-dim2-out-transposed"))
    # The blocked elems walk: every operand permuted, dims of 4..8 (sector-sized inner parts).
    cases.append(GatherCase((4, 8, 12, 8, 4, 8), (4, 8, 6, 8, 4, 8), 2, torch.float32,
                            index_layout="permute", self_layout="permute",
                            name="large-rank6-permuted"))
    return cases


def all_cases() -> list:
    """Every case set above (seed matrix, layout cross products, ranks, dtypes, edges,
    large): ~850 cases, for the auditor or a benchmark sweep."""
    return (seed_matrix() + layout_cross_cases() + layout_cross_cases(out=True) + rank_cases()
            + dtype_cases() + edge_cases() + large_cases())
