"""dtypes, fresh random values and the bitwise comparison of the gather checks.

Data is never zeros: integers are drawn away from 0 and +-1, floats are random finite values
with a sprinkle of specials (-0.0, +-inf, NaNs with varied payloads, subnormals); ``out=``
tensors are poisoned with 0xFF bytes. The comparison is of raw bytes (``bitwise_mismatch``).
"""
from __future__ import annotations

import math
import warnings
from typing import Optional, Sequence

import torch

from .routing import native

# ---------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------

#: dtypes ATen's gather supports on CPU and CUDA in every torch we target.
CORE_DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
)


def _opt_dtypes() -> tuple:
    names = (
        "uint16", "uint32", "uint64", "complex32",
        "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    )
    return tuple(getattr(torch, n) for n in names if hasattr(torch, n))


#: dtypes native gather may or may not support depending on torch version and device.
OPTIONAL_DTYPES = _opt_dtypes()
INDEX_DTYPES = (torch.int64, torch.int32)


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


_native_support_cache: dict = {}


def native_supports(dtype: torch.dtype, device: str) -> Optional[str]:
    """None when native gather (functional and out=) handles ``dtype`` on ``device`` for
    both a contiguous and an expanded index; otherwise the native error text."""
    key = (dtype, str(device))
    if key in _native_support_cache:
        return _native_support_cache[key]
    why = None
    try:
        with native(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
            x = torch.empty(3, 4, dtype=dtype, device=device)  # values do not matter here
            for idx in (
                torch.tensor([[1, 0], [2, 3], [0, 0]], device=device),
                torch.tensor([[1], [0], [2]], device=device).expand(3, 5),
            ):
                torch.gather(x, 1, idx)
                torch.gather(x, 1, idx, out=torch.empty(idx.shape, dtype=dtype, device=device))
    except Exception as e:  # noqa: BLE001 - we report whatever native says
        why = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    _native_support_cache[key] = why
    return why


# ---------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------

POISON_BYTE = 0xFF


def _gen(seed: int) -> torch.Generator:
    g = torch.Generator(device="cpu")
    g.manual_seed(seed & 0x7FFF_FFFF_FFFF_FFFF)
    return g


def _int_pool_value_range(dtype):
    info = torch.iinfo(dtype)
    hi = min(info.max, 120) if dtype.itemsize == 1 else min(info.max, 1 << 20)
    return hi


def random_values(shape: Sequence[int], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Fresh random, never-zero values of ``shape`` (contiguous, CPU)."""
    shape = list(shape)
    n = math.prod(shape)
    if dtype == torch.bool:
        v = torch.randint(0, 2, (n,), generator=g).bool()
        if n:
            v[0] = True  # bool cannot avoid False; make sure both values appear
        return v.reshape(shape)
    if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        hi = 250 if dtype == torch.uint8 else (1 << 15)
        v = torch.randint(2, hi, (n,), generator=g)
        return v.to(dtype).reshape(shape)
    if not dtype.is_floating_point and not dtype.is_complex:
        hi = _int_pool_value_range(dtype)
        mag = torch.randint(2, hi, (n,), generator=g)
        sign = torch.randint(0, 2, (n,), generator=g) * 2 - 1
        v = mag * sign
        if dtype == torch.int64 and n:
            v = v * (1 << 33) + mag  # use the high bytes too
        return v.to(dtype).reshape(shape)
    if dtype.is_complex:
        real_dt = {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, torch.float16)
        parts = random_values(shape + [2], real_dt, g)
        return torch.view_as_complex(parts.contiguous())
    if dtype.itemsize == 1:  # float8 kinds: random bytes, never 0x00 / 0x80 / 0xFF
        b = torch.randint(1, 0x7F, (n,), generator=g, dtype=torch.int16)
        b = b + torch.randint(0, 2, (n,), generator=g, dtype=torch.int16) * 0x80
        return b.to(torch.uint8).view(dtype).reshape(shape)
    v = torch.randn(n, generator=g, dtype=torch.float64) * 4
    v = torch.where(v == 0, torch.ones_like(v), v).to(dtype)
    v = torch.where(v == 0, torch.ones_like(v), v)
    if n >= 8:
        # specials at random positions: -0.0, +-inf, NaNs with payloads, a subnormal
        itemsize = dtype.itemsize
        int_dt = {2: torch.int16, 4: torch.int32, 8: torch.int64}[itemsize]
        bits = v.view(int_dt)
        nbits = itemsize * 8
        mant = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23, torch.float64: 52}[dtype]
        exp_all = ((1 << (nbits - 1 - mant)) - 1) << mant
        specials = [
            1 << (nbits - 1),          # -0.0
            exp_all,                   # +inf
            exp_all | 1,               # NaN, smallest payload (signalling on most hw)
            exp_all | (1 << (mant - 1)) | 5,   # quiet NaN with a payload
            3,                         # a subnormal
        ]
        count = max(len(specials), n // 50)
        pos = torch.randperm(n, generator=g)[:count]
        for k, p in enumerate(pos.tolist()):
            s = specials[k % len(specials)]
            if s >= 1 << (nbits - 1):
                s -= 1 << nbits
            bits[p] = s
    return v.reshape(shape)


def random_index(shape: Sequence[int], high: int, dtype: torch.dtype, g: torch.Generator,
                 mode: str = "random") -> torch.Tensor:
    """Index values in [0, high). mode: random | dup (one value everywhere) | max | min."""
    shape = list(shape)
    n = math.prod(shape)
    if n and high <= 0:
        raise ValueError(f"no valid index value for a dim of size {high}")
    if mode == "random":
        v = torch.randint(0, max(high, 1), (n,), generator=g)
        if n >= 2 and high >= 2:  # make sure duplicates exist
            v[-1] = v[0]
    elif mode == "dup":
        v = torch.full((n,), int(torch.randint(0, max(high, 1), (1,), generator=g)))
    elif mode == "max":
        v = torch.full((n,), high - 1)
    elif mode == "min":
        v = torch.zeros(n, dtype=torch.int64)
    else:
        raise ValueError(mode)
    return v.to(dtype).reshape(shape)


def poison(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    nbytes = math.prod(shape) * dtype.itemsize
    return torch.full((nbytes,), POISON_BYTE, dtype=torch.uint8).view(dtype).reshape(list(shape))


# ---------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------

def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The element bytes of ``t`` in logical (row-major) order, as a (numel, itemsize)
    uint8 tensor on the CPU."""
    c = torch.empty(t.numel(), dtype=t.dtype, device=t.device)
    c.copy_(t.detach().reshape(-1))
    b = c.view(torch.uint8).reshape(c.numel(), t.element_size())
    return b.cpu()


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """A uint8 tensor aliasing the whole storage under ``t`` (same device)."""
    s = t.untyped_storage()
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(s, 0, (s.nbytes(),), (1,))


def bitwise_mismatch(actual, expected, *, what: str = "result", limit: int = 4) -> Optional[str]:
    """None when ``actual`` and ``expected`` hold the same bits in the same shape and dtype;
    otherwise a short description with the first differing positions."""
    if not isinstance(actual, torch.Tensor):
        return f"{what}: expected a Tensor, got {type(actual).__name__}"
    if actual.dtype != expected.dtype:
        return f"{what}: dtype {actual.dtype} != expected {expected.dtype}"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    if actual.numel() == 0:
        return None
    a, e = raw_bytes(actual), raw_bytes(expected)
    bad = (a != e).any(dim=1).nonzero().flatten()
    if bad.numel() == 0:
        return None
    shape = tuple(actual.shape)
    parts = []
    for p in bad[:limit].tolist():
        coord = _unravel(p, shape)
        parts.append(f"at {coord}: got 0x{_hex(a[p])} expected 0x{_hex(e[p])}")
    return (f"{what}: {bad.numel()} of {actual.numel()} elements differ bitwise; "
            + "; ".join(parts))


def _hex(row: torch.Tensor) -> str:
    return "".join(f"{int(x):02x}" for x in reversed(row.tolist()))  # little endian


def _unravel(p: int, shape) -> tuple:
    out = []
    for s in reversed(shape):
        out.append(p % s)
        p //= s
    return tuple(reversed(out))
