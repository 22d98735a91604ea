"""The worker: runs cases against the backend under audit, one process that may crash.

A worker enables the backend once, then answers case after case over a pipe. It does as
little as possible (build inputs, place them on the device, call, synchronize, send back raw
bytes): every judgement happens in the parent, which never loads the backend. A case that kills
the worker (segfault, abort, illegal address, device-side assert) is attributed by the parent,
which restarts the worker and goes on.

Device errors are asynchronous: a kernel that asserts reports it at the next synchronizing call.
So the worker synchronizes (1) before a case's set-up: an error there belongs to the case run
before it, and the answer says so (``stale``) instead of blaming this case, and (2) after the
call, whether it returned or raised: a host-side error raised after an asserting kernel was
launched must not hide the assert.
"""
from __future__ import annotations

import faulthandler
import importlib
import os
import re
import sys
import time
import traceback
import warnings

import torch

from . import gen, grad, large
from .oracle import run_call

# A device error after which the context is unusable: the worker reports it and exits.
_ASSERT = re.compile(r"device-side assert|cudaErrorAssert|hipErrorAssert|"
                     r"CUDA error: .*assert|vector core exception|device assert", re.I)
_STICKY = re.compile(r"illegal memory access|illegal address|misaligned address|"
                     r"unspecified launch failure|illegal instruction|CUDA error|HIP error|"
                     r"ACL error|XPU error|Device error", re.I)


# The backend's flush call (--flush; backends.flush_of), set by setup() in the worker.
_FLUSH = None
# With a backend: who runs each overload and each op's variant (coverage.py), set by setup().
COVERAGE = None
# --grad: after a functional case's forward answered, run its backward too (grad.py); set by
# worker_main from its cfg.
GRAD = False


def synchronize(device: torch.device):
    if device.type == "cpu":
        return
    mod = device_module(device)
    if mod is not None and hasattr(mod, "synchronize"):
        mod.synchronize()
    elif hasattr(torch, "accelerator"):
        torch.accelerator.synchronize()


_ACCEL_ERROR = getattr(torch, "AcceleratorError", ())  # torch >= 2.8 raises it for device errors


def device_module(device: torch.device):
    """torch.<device> (torch.cuda, a plug-in's registered module, ...), or None."""
    try:
        return torch.get_device_module(device.type)
    except Exception:  # noqa: BLE001 - cpu before torch 2.5, or no module registered
        return getattr(torch, device.type, None)


def device_error_types(device: torch.device) -> tuple:
    """The exception types that mean a device error on ``device``: torch.AcceleratorError
    (torch >= 2.8, any accelerator) and the exception classes the device's own module defines
    (a plug-in's, e.g. an NPU error type), never a message's wording."""
    types = [_ACCEL_ERROR] if _ACCEL_ERROR else []
    mod = None if device.type == "cpu" else device_module(device)
    if mod is not None:
        name = getattr(mod, "__name__", "")
        for v in vars(mod).values():
            if (isinstance(v, type) and issubclass(v, Exception) and name
                    and (v.__module__ or "").startswith(name)):
                types.append(v)
    return tuple(types)


def classify_error(e: BaseException, device: torch.device):
    """'device-assert' | 'device-fault' | None (an ordinary, catchable error), from the
    exception's type (device_error_types); which of the two from its wording (an assert names
    itself). On CUDA/HIP the driver's own error strings count too: a torch older than
    AcceleratorError raises RuntimeError, and a Triton launch into a poisoned context raises
    "Triton Error [CUDA]: an illegal memory access". Other devices are judged by type alone. On
    CPU only a torch.AcceleratorError counts (tests simulate device errors with it): a CPU
    kernel's message that merely mentions CUDA is an ordinary error."""
    msg = f"{type(e).__name__}: {e}"
    if isinstance(e, device_error_types(device)):
        return "device-assert" if _ASSERT.search(msg) else "device-fault"
    if device.type in ("cuda", "hip"):
        if _ASSERT.search(msg):
            return "device-assert"
        if _STICKY.search(msg):
            return "device-fault"
    return None


def _map(v, f):
    if isinstance(v, list):
        return [None if x is None else f(x) for x in v]
    return f(v)


def _fatal(kind: str) -> str:
    return "device-assert" if kind == "device-assert" else "crash"


def _lap(tm: dict, key: str, since: float) -> float:
    """tm[key] += the seconds since ``since``; returns now (the time profile: timing.py)."""
    t = time.perf_counter()
    tm[key] = tm.get(key, 0.0) + t - since
    return t


def execute(spec, case, device: torch.device, alloc=None, times=None) -> dict:
    """Run one case; returns the raw answer for ``oracle.judge``. ``times`` (a dict) gets the
    seconds of its parts: build, materialize, call (+ synchronize + flush), pack."""
    tm, t = ({} if times is None else times), time.perf_counter()
    if case.kind == "large":
        ans = large.execute(spec, case, device, synchronize, classify_error)
        _lap(tm, "call", t)
        return ans
    built = gen.build(spec, case)
    if hasattr(alloc, "spans"):  # poisoned margins: forget the previous case's storages
        alloc.spans.clear()
    t = _lap(tm, "build", t)
    try:  # set-up: nothing of this case has run on the device yet
        synchronize(device)
        dev = {k: _map(v, lambda t: gen.materialize(t, device, alloc)) for k, v in built.tensors.items()}
    except Exception as e:  # noqa: BLE001
        kind = classify_error(e, device)
        if kind is None:
            raise  # an auditor bug (reported as such by worker_main)
        # A sticky device error before this case's op ran: left by the previous case.
        _lap(tm, "materialize", t)
        return {"ok": False, "stale": kind, "fatal": _fatal(kind), "exc_type": type(e).__name__,
                "exc_msg": str(e)[:2000],
                "detail": f"device error before the op ran (set-up): {type(e).__name__}: {str(e)[:300]}"}
    t = _lap(tm, "materialize", t)
    ns = dict(built.scalars)
    ns.update(dev)
    try:
        res = run_call(spec.calls[case.variant], ns)
        synchronize(device)
        if _FLUSH is not None:  # errors the backend reports after the call belong to it
            _FLUSH()
    except Exception as e:  # noqa: BLE001
        kind, first = classify_error(e, device), e
        if kind is None:  # a host-side error may follow an asserting kernel: flush it out now
            try:
                synchronize(device)
            except Exception as e2:  # noqa: BLE001
                kind2 = classify_error(e2, device)
                if kind2:
                    kind, e = kind2, e2
        ans = {"ok": False, "exc_type": type(e).__name__, "exc_msg": str(e)[:2000]}
        if kind == "device-assert":
            ans["fatal"] = "device-assert"
        elif kind:
            ans.update(fatal="crash", detail=f"device fault: {type(e).__name__}: {str(e)[:500]}")
        if e is not first:
            how = (f"surfaced when synchronizing after the call raised {type(first).__name__}: "
                   f"{str(first).splitlines()[0][:300] if str(first) else ''}")
            ans["detail"] = f"{ans['detail']}; {how}" if ans.get("detail") else how
        _lap(tm, "call", t)
        return ans
    t = _lap(tm, "call", t)
    ans: dict = {"ok": True}
    try:
        if built.written:
            w = dev[built.written]
            ans["alias"] = (isinstance(res, torch.Tensor) and res.data_ptr() == w.data_ptr()
                            and res.shape == w.shape and res.stride() == w.stride())
        else:
            if not isinstance(res, torch.Tensor):
                raise TypeError(f"the op returned {type(res).__name__}, not a Tensor")
            if res.device.type != device.type:
                raise TypeError(f"the result is on {res.device}, not on {device}")
            ans["result"] = gen.pack(res)
        ans["storages"] = {k: _map(v, gen.storage_bytes) if isinstance(v, list)
                           else [gen.storage_bytes(v)] for k, v in dev.items()}
        if hasattr(alloc, "split"):  # poisoned margins: the storages' own bytes, and margins hit
            ans["margins"] = {}
            for k, v in dev.items():
                items = v if isinstance(v, list) else [v]
                got = [(None, None) if t is None else alloc.split(t, raw)
                       for t, raw in zip(items, ans["storages"][k])]
                ans["storages"][k] = [raw for raw, _ in got]
                ans["margins"][k] = [hit for _, hit in got]
        synchronize(device)
    except Exception as e:  # noqa: BLE001 - a broken result is the backend's failure
        _lap(tm, "pack", t)
        kind = classify_error(e, device)
        if kind:
            return {"ok": False, "fatal": _fatal(kind),
                    "exc_type": type(e).__name__, "exc_msg": str(e)[:2000],
                    "detail": f"device fault after the call: {type(e).__name__}: {str(e)[:500]}"}
        return {"ok": False, "exc_type": "BadResult", "exc_msg": f"{type(e).__name__}: {e}",
                "bad_result": True}
    _lap(tm, "pack", t)
    if GRAD and grad.differentiable(spec, case):  # the backward, once the forward's answer is built
        t = time.perf_counter()
        ans["grad"] = grad.run(spec, case, built, dev, device, alloc, synchronize, classify_error)
        if ans["grad"].get("fatal"):  # the device context is unusable: the worker exits
            g = ans["grad"]
            ans.update(fatal=g["fatal"], exc_type=g["exc_type"], exc_msg=g["exc_msg"],
                       detail=f"in backward: {g['exc_type']}: {g['exc_msg'][:500]}")
        _lap(tm, "grad", t)
    return ans


def device_name(device: torch.device) -> str:
    try:
        mod = None if device.type == "cpu" else device_module(device)
        if mod is not None and hasattr(mod, "get_device_name"):
            return str(mod.get_device_name(device))
    except Exception:  # noqa: BLE001
        pass
    import platform

    return platform.processor() or platform.machine() if device.type == "cpu" else device.type


def setup(cfg: dict, times=None):
    """Process set-up shared by workers and single-case runs: threads, imports, backend.
    ``times`` (a dict) gets the seconds of its parts: imports, device, backend, guard."""
    tm, t = ({} if times is None else times), time.perf_counter()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(max(1, int(cfg.get("threads", 1))))
    for path in cfg.get("sys_path", []):
        if path not in sys.path:
            sys.path.insert(0, path)
    for m in cfg.get("imports", []):
        importlib.import_module(m)
    t = _lap(tm, "imports", t)
    device = torch.device(cfg["device"])
    mod = None if device.type == "cpu" else device_module(device)
    if mod is not None and hasattr(mod, "set_device"):
        mod.set_device(device.index or 0)
    if device.type != "cpu":  # the first allocation initialises the context: device init, not a case
        try:
            torch.empty(1, device=device)
        except Exception:  # noqa: BLE001 - the first case's set-up meets it and says so
            pass
    t = _lap(tm, "device", t)
    global _FLUSH, COVERAGE
    info = None
    if cfg.get("backend"):
        from .backends import enable, flush_of

        before = _coverage_before(device, bool(cfg.get("grad")))  # before the backend's import: it may register kernels
        info = enable(cfg["backend"])
        _FLUSH = flush_of(cfg["backend"])
        COVERAGE = _coverage_after(before, device)
    t = _lap(tm, "backend", t)
    alloc = None
    if cfg.get("guard"):
        from .guard import allocator

        alloc = allocator(device)
    elif cfg.get("margin"):
        from .guard import MarginAlloc

        alloc = MarginAlloc()
    _lap(tm, "guard", t)
    return device, alloc, info


def _small_builds(spec, variant: str, limit: int):
    """Small valid cases of a spec's variant (float32, int64 indices, random), one per
    parameter combination, at most ``limit``: what the coverage traces run natively on CPU."""
    import itertools

    from .caseid import make_case

    keys = list(spec.params)
    for vals in itertools.islice(itertools.product(*(spec.params[k] for k in keys)), limit):
        try:
            yield gen.build(spec, make_case(spec.name, variant, {}, max(2, spec.min_rank), "float32",
                                            "i64", "rand", dict(zip(keys, vals)), 0))
        except Exception:  # noqa: BLE001 - a combination this spec cannot build small
            continue


def _traced(fn) -> list:
    """The overloads ``fn()`` dispatches to below autograd (coverage.trace), natively; [] when
    it raises (no decomposition known: the caller marks what it can without it)."""
    from .oracle import quiet_native

    seen: list = []
    try:
        with quiet_native():
            fn(seen)
    except Exception:  # noqa: BLE001
        pass
    return seen


def _base(q: str) -> str:
    """aten::index_put_.Tensor -> index_put: an overload's op, in-place or not."""
    return q.split("::", 1)[-1].split(".", 1)[0].rstrip("_")


def _backward_overloads(spec, family: set) -> list:
    """--grad: the family's overloads (``family``: op names, :func:`_base`) and ``*_backward``
    ones that the backward of a spec's func variant dispatches to, traced natively on CPU over
    its parameter combinations; plus the CompositeImplicitAutograd ``aten::NAME_backward`` of
    each forward overload that this torch has: a composite decomposes before a dispatch mode sees
    it (embedding's backward is traced as embedding_dense_backward), yet a backend may register
    it (FlagGems: embedding_backward). The arithmetic a backward also runs (mul, sum, where) is
    left out: a backend's arithmetic kernels are not the indexing family under audit."""
    from . import coverage

    expr = spec.calls.get("func")
    if not expr:
        return []
    seen: list = []
    for b in _small_builds(spec, "func", 16):
        names = grad.leaf_names(spec, b.tensors)
        if names:
            seen += _traced(lambda s, b=b, names=names: grad._backward(
                spec, b, names, lambda t: t.clone(), lambda out: torch.ones_like(out), s))
    out = [q for q in dict.fromkeys(seen) if q.startswith("aten::") and q not in grad.PLUMBING
           and (_base(q) in family or _base(q).endswith("_backward"))]
    for q in coverage.overloads(expr):
        name = q.split(".")[0] + "_backward"
        try:
            torch._C._dispatch_find_schema_or_throw(name, "")
        except Exception:  # noqa: BLE001 - this op has no backward op of its own
            continue
        if name not in out:
            out.append(name)
    return out


def _coverage_before(device: torch.device, backward: bool = False) -> tuple:
    """Dispatcher snapshot of every overload the specs (and the large probes) call, plus what
    their CompositeImplicitAutograd overloads decompose into (traced natively on CPU, on one
    small valid case per parameter combination) and, with ``backward`` (--grad), the overloads
    each func variant's backward runs (:func:`_backward_overloads`). Once per worker: about
    10 ms, and a second or so with ``backward``."""
    from . import coverage
    from .specs import SPECS

    exprs = [e for s in SPECS.values() for e in s.calls.values()]
    exprs += [large.call_of(op) for op in (*large.READ, *large.WRITE)]
    qs = list(dict.fromkeys(q for e in exprs for q in coverage.overloads(e)))
    before = coverage.snapshot(qs, device.type)
    decomposed: dict = {}
    for s in SPECS.values():
        for v, expr in s.calls.items():
            comp = [q for q in coverage.overloads(expr) if before[q].get("composite")]
            if not comp:
                continue
            seen: list = []
            for b in _small_builds(s, v, 8):
                ns = dict(b.scalars)
                ns.update(b.tensors)
                seen += _traced(lambda out, ns=ns, expr=expr: coverage.trace(lambda: run_call(expr, ns), out))
            for q in comp:
                decomposed[q] = [x for x in dict.fromkeys(seen) if x != q]
    family = {_base(q) for q in qs}
    bwd = {s.name: _backward_overloads(s, family) for s in SPECS.values()} if backward else {}
    extra = [x for into in decomposed.values() for x in into if x not in before]
    extra += [x for qs_ in bwd.values() for x in qs_ if x not in before]
    before.update(coverage.snapshot(list(dict.fromkeys(extra)), device.type))
    return before, decomposed, bwd


def _coverage_after(state: tuple, device: torch.device) -> dict:
    """{"keys": dispatch keys, "overloads": coverage.diff(...), "ops": {op: {variant:
    coverage.classify(...)}}} after the backend's enable; with --grad each func variant's entry
    also names its backward's overloads and those the backend runs."""
    from . import coverage
    from .specs import SPECS

    before, decomposed, bwd = state
    per = coverage.diff(before, coverage.snapshot(list(before), device.type), decomposed)
    return {"keys": list(coverage.dispatch_keys(device.type)), "overloads": per,
            "ops": {s.name: {v: coverage.classify(e, per, bwd.get(s.name) if v == "func" and bwd else None)
                             for v, e in s.calls.items()}
                    for s in SPECS.values()}}


def _unnamed_semaphores():
    """A worker may die anywhere: a crash, ``os._exit`` after a device fault, a kill at the
    deadline. A named semaphore that a backend created (FlagGems makes a ``multiprocessing.Lock``
    per kernel at import) then outlives it in the resource tracker, which warns of "leaked
    semaphore objects" at the audit's end (78654 after FlagGems' --grad run). A forkserver or
    spawn child takes its parent's start method as its default, and a lock of that context is
    named. With fork as the worker's default, a lock's semaphore is unlinked at creation and
    nothing is left to leak, however the worker ends. The worker starts no processes itself; a
    backend that does from a worker gets fork unless it names a context."""
    import multiprocessing

    if multiprocessing.get_start_method(allow_none=True) != "fork":
        multiprocessing.set_start_method("fork", force=True)


def worker_main(conn, cfg: dict):
    """Entry point of a worker process (multiprocessing target)."""
    entered = time.time()
    _unnamed_semaphores()  # before the backend's import creates any lock
    log = cfg.get("log")
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    faulthandler.enable()
    try:
        from .specs import SPECS

        # the time profile: launch -> here (process start, torch and the auditor's imports)
        times = {"process": max(0.0, time.time() - cfg.get("launched", entered))}
        device, alloc, info = setup(cfg, times)
        global GRAD
        GRAD = bool(cfg.get("grad"))
        conn.send({"ready": True, "backend": info, "pid": os.getpid(), "torch": torch.__version__,
                   "device_name": device_name(device), "coverage": COVERAGE,
                   "timing": times})
    except BaseException as e:  # noqa: BLE001
        conn.send({"ready": False, "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()})
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        case = msg
        print(f"[case] {case.id}", flush=True)
        tm: dict = {}
        try:
            ans = execute(SPECS[case.op], case, device, alloc, tm)
        except BaseException as e:  # noqa: BLE001 - an auditor bug: report it, keep going
            kind = classify_error(e, device)
            ans = {"ok": False, "exc_type": type(e).__name__, "exc_msg": str(e)[:2000],
                   "internal": traceback.format_exc()}
            if kind:
                ans["fatal"] = _fatal(kind)
        ans["timing"] = tm  # seconds of its parts (execute): the time profile, timing.py
        conn.send(ans)
        if ans.get("fatal"):
            sys.stdout.flush()
            os._exit(3)  # the device context is unusable: the parent starts a fresh worker
