#!/usr/bin/env python3
"""stridewise audit repro: index_add/inplace/self=compound/r2/float16/i64/rand/alpha=3/s0

status: bad-error (missing-error)
detail: no error raised; native CPU raises RuntimeError: unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.
diagnosis (index_add): raises no (or the wrong) error only when self has a stride-0 (expanded) dim (14 of 28 such cases; the other 14 pass): writing in place into a self-overlapping (expanded) tensor is not refused: native PyTorch raises 'unsupported operation: more than one element of the written-to tensor refers to a single memory location'
device: cuda   backend: flag_gems:enable   guard pages: no
written by the audit on 2026-12-02 with torch 2.11.0+cu130

Run:  python3 <this file> [DEVICE]    exit 1: the failure reproduces; 3 or a signal: it
      crashes (a sticky device error on a GPU: illegal address, device-side assert); 0: it does not;
      2: this script itself failed
      python3 <this file> [DEVICE] --native    the same without the backend (nor --flush):
      native PyTorch on the same device; exit 0 expected (else: an auditor bug)
Re-audit: python3 -m stridewise audit --device cuda --case 'index_add/inplace/self=compound/r2/float16/i64/rand/alpha=3/s0' --backend 'flag_gems:enable'
"""
import importlib
import os
import re
import sys


def _script_error(typ, e, tb):  # an exception outside the call: exit 2, not 1 ('reproduced')
    import traceback
    traceback.print_exception(typ, e, tb)
    print(f'ERROR: this script failed ({typ.__name__}), exit {EXIT_SCRIPT_ERROR}: not a reproduction', flush=True)
    sys.stderr.flush()
    os._exit(EXIT_SCRIPT_ERROR)


EXIT_SCRIPT_ERROR = 2
sys.excepthook = _script_error
ARGS = [a for a in sys.argv[1:] if a != '--native']
NATIVE = len(ARGS) < len(sys.argv) - 1  # --native: native PyTorch, the backend not enabled
if len(ARGS) > 1 or any(a.startswith('-') for a in ARGS):
    print(f'usage: python3 {sys.argv[0]} [DEVICE] [--native]', file=sys.stderr)
    sys.exit(EXIT_SCRIPT_ERROR)
FAILED = 'FAIL (native PyTorch fails this script: an auditor bug)' if NATIVE else 'FAIL (reproduced)'
CRASHED = 'CRASH (native PyTorch: an auditor bug?)' if NATIVE else 'CRASH (reproduced)'

import torch  # noqa: E402

for _m in []:  # modules the audit imported (plug-in devices)
    importlib.import_module(_m)
nan, inf = float("nan"), float("inf")
DEVICE = torch.device(ARGS[0] if ARGS else 'cuda')
GUARD = False
BACKEND = {'module': 'flag_gems', 'call': 'enable', 'args': [], 'kwargs': {}, 'path': None}
ALLOC = None
_ASSERT = re.compile('device-side assert|cudaErrorAssert|hipErrorAssert|CUDA error: .*assert|vector core exception|device assert', re.I)
_STICKY = re.compile('illegal memory access|illegal address|misaligned address|unspecified launch failure|illegal instruction|CUDA error|HIP error|ACL error|XPU error|Device error', re.I)
EXIT_DEVICE_CRASH = 3

def storage(values, dtype):
    """A 1-D CPU storage: a list of values, or a hex string of its raw bytes."""
    if isinstance(values, str):
        raw = bytearray.fromhex(values)
        return torch.frombuffer(raw, dtype=torch.uint8).view(dtype) if raw else torch.empty(0, dtype=dtype)
    wide = torch.complex128 if dtype.is_complex else (torch.float64 if dtype.is_floating_point else None)
    return torch.tensor(values, dtype=wide or dtype).to(dtype)


def place(base, size, stride, offset):
    """The view (size, stride, storage offset) over a copy of ``base`` on DEVICE."""
    n = base.numel()
    dst = ALLOC.empty(n, base.dtype, DEVICE) if ALLOC is not None else torch.empty(n, dtype=base.dtype, device=DEVICE)
    if n:
        dst.copy_(base)
    return dst.as_strided(size, stride, offset)


def snapshot(t):
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0).cpu().clone()


def same_bits(a, b):
    eq = bits(a) == bits(b)
    return eq.all(-1) if a.is_complex() else eq


def sync():
    if DEVICE.type != "cpu":
        getattr(torch, DEVICE.type).synchronize()


def device_error(e):
    """'device-assert' | 'device-fault' | None, as the audit's worker classifies it."""
    if DEVICE.type == "cpu":
        return None
    msg = f"{type(e).__name__}: {e}"
    return "device-assert" if _ASSERT.search(msg) else "device-fault" if _STICKY.search(msg) else None


def device_crash(e, what):
    """The device crashed (a sticky error kills the context): exit EXIT_DEVICE_CRASH at once."""
    print(f"{CRASHED}: {what}: {type(e).__name__}: {e}".splitlines()[0], flush=True)
    os._exit(EXIT_DEVICE_CRASH)


def bits(t):
    """An integer view of ``t`` where equality means bitwise equality (complex: last dim 2).
    (Also inlined into the repro scripts, so it uses nothing but torch.)"""
    import torch

    t = t.contiguous()
    if t.is_complex():
        t = torch.view_as_real(t).contiguous()
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.view(ints[t.element_size()])


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

# ---- operands: storage contents, sizes, strides, storage offset ----
self = place(storage([2.279296875, 0.51171875, 1.2412109375, -0.36572265625, 1.443359375, 1.2216796875, 0.3837890625, 0.428466796875, 0.55712890625, 0.927734375, -0.8037109375, 0.43505859375], torch.float16), (2, 4), (0, 2), 4)
idx = place(storage([3, 3], torch.int64), (2,), (1,), 0)
# idx (logical values): [3, 3]
src = place(storage([0.290283203125, 0.436767578125, -0.61669921875, -0.052001953125], torch.float16), (2, 2), (2, 1), 0)
dim = 1
alpha = 3
TENSORS = {'self': self, 'idx': idx, 'src': src}
BEFORE = {(n if not isinstance(t, list) else f'{n}[{j}]'): snapshot(x) for n, t in TENSORS.items() for j, x in enumerate(t if isinstance(t, list) else [t]) if x is not None}
WRITTEN = 'self'
NATIVE_ERROR = 'RuntimeError: unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.'

def call_of(spec):  # MODULE:CALL(ARGS) of the audit, as a function of no arguments
    if spec['path']:
        sys.path.insert(0, spec['path'])
    fn = importlib.import_module(spec['module'])
    for part in spec['call'].split('.'):
        fn = getattr(fn, part)
    return lambda: fn(*spec['args'], **spec.get('kwargs', {}))


if BACKEND and not NATIVE:
    call_of(BACKEND)()
# --flush: the call that raises errors the backend reports after the call
FLUSH = call_of(BACKEND['flush']) if BACKEND and BACKEND.get('flush') and not NATIVE else None
if NATIVE:
    print(f'--native: native PyTorch on {DEVICE} (backend not enabled)', flush=True)

print('calling: torch.ops.aten.index_add_.default(self, dim, idx, src, alpha=alpha)', flush=True)
try:
    result = torch.ops.aten.index_add_.default(self, dim, idx, src, alpha=alpha)
    sync()
    if FLUSH:
        FLUSH()
except Exception as e:
    _kind = device_error(e)
    if _kind == 'device-fault' or (_kind == 'device-assert' and not NATIVE_ERROR):
        device_crash(e, _kind + (' on a valid call' if not NATIVE_ERROR else ''))
    if NATIVE_ERROR:
        print(f'OK: raised {type(e).__name__}: {e}'.splitlines()[0])
        sys.exit(0)
    print(f'{FAILED}: raised where native PyTorch does not: {type(e).__name__}: {e}')
    sys.exit(1)
if NATIVE_ERROR:
    print(f'{FAILED}: no error raised; native PyTorch raises {NATIVE_ERROR}')
    sys.exit(1)

failures = []
for name, t in TENSORS.items():
    for j, item in enumerate(t if isinstance(t, list) else [t]):
        if item is None:
            continue
        label = name if not isinstance(t, list) else f"{name}[{j}]"
        now, was = snapshot(item), BEFORE[label]
        if now.numel() != was.numel():
            failures.append(f"{label}: storage resized from {was.numel()} to {now.numel()} elements")
            continue
        changed = ~same_bits(now, was)
        if name == WRITTEN:
            changed &= ~covered(item, now.numel())
            if bool(changed.any()):
                failures.append(f"{label}: {int(changed.sum())} storage elements outside the view were written")
        elif bool(changed.any()):
            failures.append(f"input {label} was modified ({int(changed.sum())} storage elements)")
got = (result if WRITTEN is None else TENSORS[WRITTEN]).detach().cpu()
if WRITTEN is not None and not (isinstance(result, torch.Tensor) and result.data_ptr() == TENSORS[WRITTEN].data_ptr()):
    failures.append(f"the call did not return {WRITTEN}")
if tuple(got.shape) != tuple(EXPECTED.shape) or got.dtype != EXPECTED_DTYPE:
    failures.append(f"result {tuple(got.shape)} {got.dtype}, expected {tuple(EXPECTED.shape)} {EXPECTED_DTYPE}")
elif TOL is not None:
    wide = torch.complex128 if EXPECTED.is_complex() else torch.float64
    bad = ~((got.to(wide) - EXPECTED.to(wide)).abs() <= TOL)
    if bool(bad.any()):
        failures.append(f"{int(bad.sum())} of {got.numel()} elements outside the tolerance ({TOL_TEXT})")
else:
    bad = ~same_bits(got, EXPECTED)
    if SKIP is not None:
        bad &= ~SKIP
    if bool(bad.any()):
        pos = tuple(bad.nonzero()[0].tolist()) if bad.dim() else ()
        failures.append(f"{int(bad.sum())} of {got.numel()} elements differ bitwise; first at {list(pos)}: "
                        f"expected {EXPECTED[pos].item()!r}, got {got[pos].item()!r}")
if failures:
    print(FAILED + ":\n  " + "\n  ".join(failures))
    sys.exit(1)
print("OK: matches native PyTorch" + (" (elements written by several duplicate indices not compared)" if SKIP is not None else ""))
sys.exit(0)
