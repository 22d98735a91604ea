"""Standalone repro scripts: plain python + torch, one per failing case.

A script rebuilds every operand exactly (storage contents, sizes, strides, storage offset,
dtype; on guard pages when the audit used --guard, with the guard code inlined), enables the
backend the audit used (if any), makes the call, and checks the outcome against what native
PyTorch on CPU gave during the audit (embedded). Exit status 1: the failure reproduces; 3
(EXIT_DEVICE_CRASH) or a signal: it crashes (on a GPU a sticky device error, e.g. an illegal
address on a guard page, is a crash, as in the audit); 0: it does not reproduce; 2
(EXIT_SCRIPT_ERROR): the script itself failed (an exception outside the call, a bad argument).

``python3 script.py [DEVICE] [--native]``: with ``--native`` the backend (and its --flush call)
is not enabled: native PyTorch runs the very same script on the same device and must pass it
(exit 0); a script native fails is an auditor bug (verify.py, ``--verify-repros``, checks both).
"""
from __future__ import annotations

import datetime
import inspect
import os
import re
from pathlib import Path

import torch

from .backends import literal as backend_literal
from .gen import DTYPE_NAME, extent, flat_storage, storage_elems
from .oracle import covered
from .specs.base import bits
from .worker import _ASSERT, _STICKY, classify_error, device_error_types, device_module

# exit status of a repro script whose call left a sticky device error (illegal address, launch
# failure, device-side assert on a valid case): the device's crash, which a CPU process meets as a
# signal but a GPU process as an exception; like a signal, it is neither 0 nor 1
EXIT_DEVICE_CRASH = 3
# exit status of a repro script that could not run (an exception outside the call, a bad
# argument): not 1, which says "reproduced"
EXIT_SCRIPT_ERROR = 2

_HELPERS = r'''
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
    if ALLOC is None:
        dst = torch.empty(n, dtype=base.dtype, device=DEVICE)
    elif hasattr(ALLOC, "split"):  # poisoned margins, sized as the audit sized them
        dst = ALLOC.empty(n, base.dtype, DEVICE, reach=math.prod(size))
    else:
        dst = ALLOC.empty(n, base.dtype, DEVICE)
    if n:
        dst.copy_(base)
    return dst.as_strided(size, stride, dst.storage_offset() + offset)


def snapshot(t):
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0).cpu().clone()


def same_bits(a, b):
    eq = bits(a) == bits(b)
    return eq.all(-1) if a.is_complex() else eq


def sync():
    if DEVICE.type != "cpu":
        device_module(DEVICE).synchronize()


def device_error(e):
    """'device-assert' | 'device-fault' | None, as the audit's worker classifies it (its
    classify_error, inlined below)."""
    return classify_error(e, DEVICE)


def device_crash(e, what):
    """The device crashed (a sticky error kills the context): exit EXIT_DEVICE_CRASH at once."""
    print(f"{CRASHED}: {what}: {type(e).__name__}: {e}".splitlines()[0], flush=True)
    os._exit(EXIT_DEVICE_CRASH)


''' + "\n\n".join(inspect.getsource(f) for f in (
    bits, covered, device_module, device_error_types, classify_error))  # the audit's own

_CHECK = r'''
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
'''


def _lit(t: torch.Tensor) -> str:
    """Python literal for a 1-D CPU tensor's values (exact), or a hex string of its bytes."""
    t = t.detach().cpu().reshape(-1)
    if t.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
                   torch.complex128, torch.bool, torch.int8, torch.int16, torch.int32,
                   torch.int64, torch.uint8):
        return repr(t.tolist())
    flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t)
    return repr(bytes(flat.view(torch.uint8).tolist()).hex())


def _tensor_expr(t: torch.Tensor, guard: bool = False) -> str:
    """place(storage(...), size, stride, offset): the operand as the audit's worker built it; on
    guard pages the storage is cut to the view's extent (gen.materialize), so that a read past
    the view faults in the script as it did in the audit."""
    n = extent(t) if guard else storage_elems(t)
    return (f"place(storage({_lit(flat_storage(t, n))}, torch.{DTYPE_NAME[t.dtype]}), "
            f"{tuple(t.shape)}, {tuple(t.stride())}, {t.storage_offset()})")


def _guard_source() -> str:
    src = (Path(__file__).with_name("guard.py")).read_text()
    return re.sub(r"^from __future__ import annotations\n", "", src, flags=re.M)


def memory_mode(guard) -> str:
    """'guard' | 'margin' | 'plain' from a RunConfig-style value (True/False or the mode)."""
    return guard if isinstance(guard, str) else ("guard" if guard else "plain")


_MEMORY_TEXT = {"guard": "guard pages", "margin": "poisoned margins (no guard pages)",
                "plain": "plain storages"}


def script(res, spec, device: str, backend: dict | None, guard, diagnosis: str = "",
           tol_text: str = "", imports=()) -> str:
    """``guard``: the audit's memory mode (memory_mode)."""
    memory = memory_mode(guard)
    guard = memory == "guard"
    case, built, ref, v = res.case, res.built, res.ref, res.verdict
    if getattr(built, "repro_source", None):  # large-shape probes build their own operands
        return built.repro_source(res, device, backend, diagnosis)
    spec_call = spec.calls[case.variant]
    lines = [
        "#!/usr/bin/env python3",
        f'"""stridewise audit repro: {case.id}',
        "",
        f"status: {v.status} ({v.reason})",
        f"detail: {v.detail[:600]}",
    ]
    if res.known:
        lines.append(f"known issue: {res.known}")
    if diagnosis:
        lines.append(f"diagnosis ({case.op}): {diagnosis}")
    lines += [
        f"device: {device}   backend: {backend['text'] if backend else 'none (native PyTorch)'}   "
        f"memory: {_MEMORY_TEXT[memory]}",
        f"written by the audit on {datetime.date.today()} with torch {torch.__version__}",
        "",
        "Run:  python3 <this file> [DEVICE]    exit 1: the failure reproduces; 3 or a signal: it",
        "      crashes (a sticky device error on a GPU: illegal address, device-side assert); 0: it does not;",
        "      2: this script itself failed",
        "      python3 <this file> [DEVICE] --native    the same without the backend (nor --flush):",
        "      native PyTorch on the same device; exit 0 expected (else: an auditor bug)",
        f"Re-audit: python3 -m stridewise audit --device {device} --case '{case.id}'"
        + (f" --backend '{backend['text']}'" if backend else "")
        + (f" --flush '{backend['flush']['text']}'" if backend and backend.get("flush") else "")
        + (" --guard" if guard else " --margin" if memory == "margin" else ""),
        '"""',
        "import importlib",
        "import math",
        "import os",
        "import re",
        "import sys",
        "",
        "",
        "def _script_error(typ, e, tb):  # an exception outside the call: exit 2, not 1 ('reproduced')",
        "    import traceback",
        "    traceback.print_exception(typ, e, tb)",
        "    print(f'ERROR: this script failed ({typ.__name__}), exit {EXIT_SCRIPT_ERROR}: not a reproduction', flush=True)",
        "    sys.stderr.flush()",
        "    os._exit(EXIT_SCRIPT_ERROR)",
        "",
        "",
        f"EXIT_SCRIPT_ERROR = {EXIT_SCRIPT_ERROR}",
        "sys.excepthook = _script_error",
        "ARGS = [a for a in sys.argv[1:] if a != '--native']",
        "NATIVE = len(ARGS) < len(sys.argv) - 1  # --native: native PyTorch, the backend not enabled",
        "if len(ARGS) > 1 or any(a.startswith('-') for a in ARGS):",
        "    print(f'usage: python3 {sys.argv[0]} [DEVICE] [--native]', file=sys.stderr)",
        "    sys.exit(EXIT_SCRIPT_ERROR)",
        "FAILED = 'FAIL (native PyTorch fails this script: an auditor bug)' if NATIVE else 'FAIL (reproduced)'",
        "CRASHED = 'CRASH (native PyTorch: an auditor bug?)' if NATIVE else 'CRASH (reproduced)'",
        "",
        "import torch  # noqa: E402",
        "",
        f"for _m in {list(imports)!r}:  # modules the audit imported (plug-in devices)",
        "    importlib.import_module(_m)",
        'nan, inf = float("nan"), float("inf")',
        f"DEVICE = torch.device(ARGS[0] if ARGS else {device!r})",
        f"GUARD = {bool(guard)}",
        f"BACKEND = {backend_literal(backend)}",
    ]
    if memory != "plain":
        lines += ["", "# ---- guard pages (inlined from stridewise/audit/guard.py) " + "-" * 30,
                  _guard_source(), "# " + "-" * 88,
                  "ALLOC = allocator(DEVICE)" if guard else "ALLOC = MarginAlloc()"]
    else:
        lines += ["ALLOC = None"]
    lines += [f"_ASSERT = re.compile({_ASSERT.pattern!r}, re.I)",
              f"_STICKY = re.compile({_STICKY.pattern!r}, re.I)",
              "_ACCEL_ERROR = getattr(torch, 'AcceleratorError', ())",
              f"EXIT_DEVICE_CRASH = {EXIT_DEVICE_CRASH}"]
    lines += [_HELPERS, "# ---- operands: storage contents, sizes, strides, storage offset ----"]
    for name, val in built.tensors.items():
        if isinstance(val, list):
            items = ", ".join("None" if t is None else _tensor_expr(t, guard) for t in val)
            lines.append(f"{name} = [{items}]")
            vals = [None if t is None else t.tolist() for t in val]
        else:
            lines.append(f"{name} = {_tensor_expr(val, guard)}")
            vals = val.tolist()
        if name in ("idx",):
            text = repr(vals)
            lines.append(f"# {name} (logical values): {text[:800]}{' ...' if len(text) > 800 else ''}")
    for k, val in built.scalars.items():
        lines.append(f"{k} = {val!r}")
    names = list(built.tensors)
    lines.append("TENSORS = {" + ", ".join(f"{n!r}: {n}" for n in names) + "}")
    lines.append("BEFORE = {(n if not isinstance(t, list) else f'{n}[{j}]'): snapshot(x) "
                 "for n, t in TENSORS.items() for j, x in enumerate(t if isinstance(t, list) else [t]) "
                 "if x is not None}")
    lines.append(f"WRITTEN = {built.written!r}")
    lines += _expectation(res, spec, tol_text)
    lines += [
        "",
        "def call_of(spec):  # MODULE:CALL(ARGS) of the audit, as a function of no arguments",
        "    if spec['path']:",
        "        sys.path.insert(0, spec['path'])",
        "    fn = importlib.import_module(spec['module'])",
        "    for part in spec['call'].split('.'):",
        "        fn = getattr(fn, part)",
        "    return lambda: fn(*spec['args'], **spec.get('kwargs', {}))",
        "",
        "",
        "if BACKEND and not NATIVE:",
        "    call_of(BACKEND)()",
        "# --flush: the call that raises errors the backend reports after the call",
        "FLUSH = call_of(BACKEND['flush']) if BACKEND and BACKEND.get('flush') and not NATIVE else None",
        "if NATIVE:",
        "    print(f'--native: native PyTorch on {DEVICE} (backend not enabled)', flush=True)",
        "",
        f"print('calling: {spec_call}', flush=True)",
        "try:",
        f"    result = {spec_call}",
        "    sync()",
        "    if FLUSH:",
        "        FLUSH()",
        "except Exception as e:",
        "    _kind = device_error(e)",
        "    if _kind == 'device-fault' or (_kind == 'device-assert' and not NATIVE_ERROR):",
        "        device_crash(e, _kind + (' on a valid call' if not NATIVE_ERROR else ''))",
        "    if NATIVE_ERROR:",
        "        print(f'OK: raised {type(e).__name__}: {e}'.splitlines()[0])",
        "        sys.exit(0)",
        "    print(f'{FAILED}: raised where native PyTorch does not: {type(e).__name__}: {e}')",
        "    sys.exit(1)",
        "if NATIVE_ERROR:",
        "    print(f'{FAILED}: no error raised; native PyTorch raises {NATIVE_ERROR}')",
        "    sys.exit(1)",
        _CHECK,
    ]
    if getattr(res, "grad_ref", None) is not None:  # a backward finding (--grad): grad.py
        from .grad_repro import repro_check

        lines[-1] = repro_check(res, spec, _lit, _tensor_expr, guard)
    return "\n".join(lines)


def _expectation(res, spec, tol_text) -> list:
    ref = res.ref
    if ref is None or ref.error is not None:
        err = f"{type(ref.error).__name__}: {str(ref.error).splitlines()[0][:200]}" if ref else "?"
        return [f"NATIVE_ERROR = {err!r}"]
    exp = ref.expected
    out = ["NATIVE_ERROR = None", f"EXPECTED_DTYPE = torch.{DTYPE_NAME[exp.dtype]}",
           f"EXPECTED = storage({_lit(exp)}, torch.{DTYPE_NAME[exp.dtype]}).reshape({tuple(exp.shape)})"]
    if ref.tol is not None:
        out.append(f"EXPECTED = storage({_lit(ref.ref64)}, torch.{DTYPE_NAME[ref.ref64.dtype]})"
                   f".reshape({tuple(exp.shape)})  # float64 reference")
        out.append(f"TOL = storage({_lit(ref.tol)}, torch.float64).reshape({tuple(exp.shape)})")
        out.append(f"TOL_TEXT = {tol_text!r}")
    else:
        out += ["TOL = None", "TOL_TEXT = ''"]
    skip = None
    if ref.mode == "write":
        _, writes = spec.write_check(ref.ns, exp, exp)
        if bool((writes >= 2).any()):
            skip = writes >= 2
    out.append("SKIP = None" if skip is None else
               f"SKIP = storage({_lit(skip)}, torch.bool).reshape({tuple(exp.shape)})"
               "  # written by several duplicate indices: any writer may win")
    return out


def file_name(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=,-]+", "_", case_id.replace("/", "__")) + ".py"


def write_all(results, specs: dict, out_dir: str, device: str, backend, guard,
              diag_by_op: dict, tol_text: str = "", limit: int = 2000, imports=(), always=()) -> int:
    """Write the scripts of the first ``limit`` of ``results`` (those with operands), and of
    every result in ``always`` besides (the findings' representatives, verify.py), whatever the
    limit. Sets ``r.repro``; returns how many were written."""
    os.makedirs(out_dir, exist_ok=True)
    n = 0
    todo = [r for r in results if r.built is not None][:max(0, limit)]
    chosen = {id(r) for r in todo}
    todo += [r for r in always if r.built is not None and id(r) not in chosen]
    for r in todo:
        d = os.path.join(out_dir, r.case.op)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, file_name(r.case.id))
        with open(path, "w") as fh:
            fh.write(script(r, specs[r.case.op], device, backend, guard,
                            diag_by_op.get(r.case.id) or diag_by_op.get(r.case.op, ""), tol_text,
                            imports))
        os.chmod(path, 0o755)
        r.repro = path
        n += 1
    return n
