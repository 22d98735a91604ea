"""Running cases in isolated workers: crash attribution, replay, restarts, timeouts.

The parent keeps ``jobs`` worker processes busy with one case each. While a worker runs a
case, the parent builds the same inputs and computes the native CPU oracle for it. A worker
that dies (signal, abort, device fault, device-side assert, timeout) is replaced by a fresh one;
a crashing case is replayed once, alone, in a fresh worker to confirm it. Workers are forked
(default; the parent never initialises a GPU and runs torch single-threaded) or started with
``forkserver``/``spawn``.

Asynchronous device errors: a sticky error that a worker meets *before* a case's op ran
(answer ``stale``) belongs to the case that worker ran before; that case is judged again as
a device-side assert (or a device fault: crash), and the interrupted case is run again in a
fresh worker for its own verdict. A case whose first attempt hung (``--timeout``, or
``assert_grace`` seconds after the worker printed a device-side assertion) takes the verdict of
its replay when the replay answers, with the hang noted: a poisoned context that stalls in
synchronize says nothing about the case.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait as mp_wait
from typing import Any, Optional

import torch

from . import diagnose, gen, known, oracle
from .worker import worker_main


@dataclass
class RunConfig:
    device: str = "cpu"
    backend: Optional[dict] = None
    imports: tuple = ()
    guard: bool = False
    jobs: int = 1
    timeout: float = 120.0
    threads: int = 1
    start_method: str = "auto"
    log_dir: Optional[str] = None
    keep_logs: bool = False
    apply_known: bool = True
    tol: oracle.Tolerance = field(default_factory=oracle.Tolerance)
    startup_timeout: float = 600.0
    # a worker that printed a device-side assertion during a case and has not answered this many
    # seconds later is stuck (typically in synchronize on the poisoned context): kill it then
    # instead of waiting for --timeout
    assert_grace: float = 10.0


@dataclass
class CaseResult:
    case: Any
    verdict: oracle.Verdict
    features: dict = field(default_factory=dict)
    seconds: float = 0.0
    replay: Optional[dict] = None
    known: Optional[str] = None
    exc: Optional[str] = None  # the candidate's exception, "Type: message"
    repro: Optional[str] = None
    built: Any = None  # CPU inputs (kept for failures: repro scripts)
    ref: Any = None


class AuditError(RuntimeError):
    """The audit cannot run (backend import failed, bad device, ...): the message says why."""


def _signal_name(code: Optional[int]) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"{signal.Signals(-code).name} (exit code {code})"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _tail(path: Optional[str], n: int = 1600) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - n))
        return fh.read().decode("utf-8", "replace")


def _accelerator_initialized() -> bool:
    try:
        if torch.cuda.is_initialized():
            return True
    except Exception:  # noqa: BLE001
        pass
    for name in ("xpu", "npu", "mps"):
        mod = getattr(torch, name, None)
        init = getattr(mod, "is_initialized", None)
        try:
            if callable(init) and init():
                return True
        except Exception:  # noqa: BLE001
            pass
    return False


# what a device prints when a kernel assertion fires (CUDA/HIP: "file.cu:L: kernel: block: [..],
# thread: [..] Assertion `cond` failed."); glibc's assert ("`x' failed") aborts the process anyway
_ASSERT_PRINTED = re.compile(r"Assertion `[^`\n]*` failed|device-side assert")


def _line(text: Optional[str]) -> str:
    return text.splitlines()[0] if text else ""


def _log_since(path: Optional[str], pos: int, n: int = 65536) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as fh:
        fh.seek(pos)
        return fh.read(n).decode("utf-8", "replace")


def _where(tail: str) -> str:
    """' in file.py:LINE func' from a faulthandler dump (the innermost Python frame)."""
    m = re.search(r'most recent call first\):\s*File "([^"]+)", line (\d+) in (\S+)', tail)
    return f" in {os.path.basename(m.group(1))}:{m.group(2)} {m.group(3)}()" if m else ""


class _Slot:
    def __init__(self, runner: "Runner", k: int):
        self.r, self.k, self.n = runner, k, 0
        self.proc = self.conn = None
        self.case = None
        self.sent = 0.0
        self.replay_of: Optional[dict] = None  # first answer of a crash being replayed
        self.pending_replay = None
        self.history: deque = deque(maxlen=3)
        self.log: Optional[str] = None
        self.log_pos = 0  # size of the log when the current case was sent
        self.starting: Optional[float] = None  # launch time of a worker not yet ready
        # (result, answer) of the last case this worker process answered: a sticky device error
        # met in the next case's set-up belongs to it
        self.last: Optional[tuple] = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self):
        """Start a fresh worker and wait until it is ready (raises AuditError if it cannot)."""
        self.launch()
        self.await_ready(block=True)

    def launch(self):
        """Start a fresh worker process without waiting for it: the run loop keeps the other
        workers busy meanwhile (on a GPU each start initialises a device context, and every
        device-side assert costs one)."""
        self.stop()
        self.n += 1
        self.log = os.path.join(self.r.log_dir, f"worker{self.k}-{self.n}.log")
        cfg = dict(self.r.worker_cfg, log=self.log)
        ctx = self.r.ctx
        here, there = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(there, cfg), daemon=True)
        self.proc.start()
        there.close()
        self.conn = here
        self.history.clear()
        self.last = None
        self.starting = time.time()

    def await_ready(self, block: bool = False) -> bool:
        """True once the worker said it is ready; False while it is still starting (only when
        not ``block``); AuditError when it failed, died or exceeded the start-up timeout."""
        here = self.conn
        left = self.starting + self.r.cfg.startup_timeout - time.time()
        if not here.poll(max(0.0, left) if block else 0):
            if not block and left > 0 and self.proc.is_alive():
                return False
            if self.proc.is_alive():
                self.stop()
                raise AuditError(f"worker did not start within {self.r.cfg.startup_timeout:.0f}s; "
                                 f"worker log:\n{_tail(self.log)}")
        try:
            msg = here.recv()
        except (EOFError, OSError):
            code = self.proc.exitcode if self.proc.join(5) is None else self.proc.exitcode
            raise AuditError(f"worker died while starting ({_signal_name(code)}); worker log:\n"
                             f"{_tail(self.log)}") from None
        self.starting = None
        if not msg.get("ready"):
            self.stop()
            raise AuditError(f"worker set-up failed: {msg.get('error')}\n{msg.get('traceback', '')}")
        self.r.backend_info = msg.get("backend")
        self.r.device_name = msg.get("device_name")
        return True

    def send(self, case):
        if not self.alive:
            self.start()
        elif self.starting is not None:
            self.await_ready(block=True)
        self.case, self.sent = case, time.time()
        try:
            self.log_pos = os.path.getsize(self.log) if self.log else 0
        except OSError:
            self.log_pos = 0
        self.conn.send(case)

    def stop(self):
        if self.proc is not None:
            if self.proc.is_alive():
                try:
                    self.conn.send(None)
                except Exception:  # noqa: BLE001
                    pass
                self.proc.join(2)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None
        self.starting = None


class Runner:
    def __init__(self, cfg: RunConfig, specs: dict, progress=None):
        self.cfg, self.specs, self.progress = cfg, specs, progress
        self.backend_info = None
        self.device_name = None
        self.log_dir = cfg.log_dir or tempfile.mkdtemp(prefix="stridewise-audit-")
        os.makedirs(self.log_dir, exist_ok=True)
        self.device_type = cfg.device.split(":")[0]
        method = cfg.start_method
        if method == "auto":  # a GPU worker must not be forked from a process that touched the
            # GPU (even torch.cuda.is_available() poisons fork): use a clean forkserver then
            fork_ok = self.device_type == "cpu" and not _accelerator_initialized()
            method = "fork" if fork_ok else "forkserver"
        self.start_method = method
        self.ctx = mp.get_context(method)
        if method == "forkserver":
            self.ctx.set_forkserver_preload(["torch", "stridewise.audit.worker"])
        self.worker_cfg = {"device": cfg.device, "backend": cfg.backend, "imports": list(cfg.imports),
                           "guard": cfg.guard, "threads": cfg.threads, "sys_path": list(sys.path)}
        self.prep: dict = {}
        self.stale_tries: dict = {}  # case id -> set-ups interrupted by a sticky device error

    # -- parent side: the oracle ---------------------------------------------------------------
    def prepare(self, case):
        if case.id in self.prep:
            return self.prep[case.id]
        spec = self.specs[case.op]
        try:
            if case.kind == "large":
                from . import large

                p = large.prepare(spec, case)
            else:
                built = gen.build(spec, case)
                ref = oracle.reference(spec, built, self.cfg.tol)
                p = (built, ref, diagnose.features(spec, built, ref), None)
        except Exception:  # noqa: BLE001 - an auditor bug: never hide it
            p = (None, None, {}, traceback.format_exc())
        self.prep[case.id] = p
        return p

    def finish(self, case, ans: dict, seconds: float, replay=None) -> CaseResult:
        built, ref, feats, err = self.prep.pop(case.id, None) or self.prepare(case)
        self.prep.pop(case.id, None)
        spec = self.specs[case.op]
        if err or ans.get("internal"):
            v = oracle.Verdict("error", "auditor-error", (err or ans.get("internal", ""))[-1500:])
        elif case.kind == "large":
            from . import large

            v = large.judge(spec, built, ref, ans, self.cfg.tol)
        else:
            v = oracle.judge(spec, built, ref, ans, self.cfg.tol)
        res = CaseResult(case, v, feats, seconds, replay,
                         exc=(f"{ans['exc_type']}: {ans.get('exc_msg', '')[:300]}"
                              if ans.get("exc_type") else None))
        if v.status in oracle.FAILING and self.cfg.apply_known and built is not None:
            k = known.match(case.op, self.device_type, built, v.reason, res.exc)
            if k is not None:
                res.known = k.name
                res.verdict = oracle.Verdict("known", v.reason, f"known issue {k.name}: {v.detail}",
                                             v.mismatch)
        if res.verdict.status in oracle.FAILING or res.known:
            res.built, res.ref = built, ref
        return res

    # -- the loop -----------------------------------------------------------------------------
    def run(self, cases) -> list:
        queue = deque(cases)
        slots = [_Slot(self, k) for k in range(max(1, self.cfg.jobs))]
        results: list = []
        try:
            slots[0].start()  # fail fast (with the reason) if workers cannot start
            while queue or any(s.case is not None or s.pending_replay is not None for s in slots):
                for s in slots:
                    if s.case is not None:
                        continue
                    if s.pending_replay is None and not queue:
                        continue
                    if s.starting is None and not s.alive:  # (re)start without waiting for
                        s.launch()  # it: the other workers go on; it gets work once ready
                    if s.starting is not None and not s.await_ready():
                        continue
                    if s.pending_replay is not None:
                        c, s.pending_replay = s.pending_replay, None
                        s.send(c)
                    elif queue:
                        s.send(queue.popleft())
                busy = [s for s in slots if s.case is not None]
                starting = [s for s in slots if s.starting is not None]
                for s in busy:
                    self.prepare(s.case)
                waits = [s.conn for s in busy + starting] + [s.proc.sentinel for s in busy + starting]
                now = time.time()
                checks = [self._next_check(s, now) for s in busy]
                checks += [s.starting + self.cfg.startup_timeout for s in starting]
                left = (min(checks) - now) if checks else 0.01
                mp_wait(waits, timeout=max(0.01, left))
                for s in busy:
                    ans = self._collect(s)
                    if ans is not None:
                        r = self._handle(s, ans)
                        if r is not None:
                            results.append(r)
                            if self.progress:
                                self.progress(r)
            if len(results) != len(cases):  # never lose a case silently
                got = {r.case.id for r in results}
                lost = [c.id for c in cases if c.id not in got]
                raise AuditError(f"{len(lost)} case(s) got no result (auditor bug): {lost[:5]}")
        finally:
            for s in slots:
                s.stop()
            if not self.cfg.keep_logs and not self.cfg.log_dir:
                shutil.rmtree(self.log_dir, ignore_errors=True)
        return results

    def _next_check(self, s: _Slot, now: float) -> float:
        """When to look at a busy worker again without an answer: its timeout, and past
        ``assert_grace`` once a second (for a device assertion in its log)."""
        t = s.sent + self.cfg.timeout
        g = self.cfg.assert_grace
        if g and g < self.cfg.timeout:
            t = min(t, max(s.sent + g, now + 1.0))
        return t

    def _collect(self, s: _Slot) -> Optional[dict]:
        if s.conn.poll():
            try:
                return s.conn.recv()
            except (EOFError, OSError):
                pass
        elif s.proc.is_alive():
            el, g = time.time() - s.sent, self.cfg.assert_grace
            printed = None
            if g and g < el <= self.cfg.timeout:
                printed = _ASSERT_PRINTED.search(_log_since(s.log, s.log_pos))
            if el <= self.cfg.timeout and not printed:
                return None
            s.proc.kill()
            s.proc.join(5)
            why = (f"no answer {el:.0f}s after the worker printed a device-side assertion (stuck "
                   f"on the poisoned context?)" if printed else
                   f"no answer within {self.cfg.timeout:.0f}s (hang?)")
            return {"ok": False, "fatal": "crash", "timeout": True, "after_assert": bool(printed),
                    "detail": f"{why}; killed\nworker log tail:\n{_tail(s.log)}"}
        s.proc.join(5)
        code = s.proc.exitcode
        tail = _tail(s.log, 16000)
        return {"ok": False, "fatal": "crash", "exit": code,
                "detail": f"worker died: {_signal_name(code)}{_where(tail)}\nworker log tail:\n"
                          f"{tail[-1600:]}"}

    def _handle(self, s: _Slot, ans: dict) -> Optional[CaseResult]:
        case, took = s.case, time.time() - s.sent
        s.case = None
        s.history.append(case.id)
        if ans.get("stale"):
            return self._stale(s, case, ans)
        fatal = ans.get("fatal")
        if fatal:
            s.stop()  # the process is dead or its device context is: start afresh
        if s.replay_of is not None:  # this was the replay of a crash
            first, s.replay_of = s.replay_of, None
            # a crash is confirmed by a crash; a device-side assert on a valid case by the same
            again = ans.get("fatal")
            confirmed = again == "crash" or (again == "device-assert" == first.get("fatal"))
            rep = {"confirmed": confirmed, "replay_detail": ans.get("detail") or
                   ("passed" if ans.get("ok") else f"{ans.get('exc_type')}: {ans.get('exc_msg', '')[:200]}")}
            if not confirmed and first.get("timeout") and not ans.get("internal"):
                # the first attempt hung, the replay answered: the case gets the replay's verdict
                how = ("hung after printing a device-side assertion" if first.get("after_assert")
                       else f"hung (no answer within {self.cfg.timeout:.0f}s)")
                res = self.finish(case, ans, took, dict(rep, flaky=f"first attempt {how}"))
                res.verdict.detail = (f"{res.verdict.detail} [flaky: the first attempt {how} and was "
                                      f"killed; verdict of the replay alone in a fresh worker]").strip()
            else:
                if not confirmed:
                    first = dict(first, fatal="crash",
                                 detail=f"crashed once but not when replayed alone in a fresh worker "
                                        f"(memory corrupted by an earlier case? run before it: "
                                        f"{', '.join(first.get('_history', []))}). First crash: "
                                        f"{first.get('detail', '')}")
                res = self.finish(case, first, took, rep)
            s.last = None if fatal else (res, ans)
            return res
        if fatal == "crash" or (fatal == "device-assert" and self._valid(case)):
            # A device-side assert on a case native accepts is a crash too (oracle.judge:
            # device-assert-valid): confirm it alone in a fresh worker like any other.
            s.replay_of = dict(ans, _history=list(s.history)[:-1])
            s.pending_replay = case
            return None
        res = self.finish(case, ans, took)
        s.last = None if fatal else (res, ans)
        return res

    def _valid(self, case) -> bool:
        """True when native accepts ``case`` (its oracle holds no error)."""
        built, ref, feats, err = self.prepare(case)
        return ref is not None and not err and getattr(ref, "error", None) is None

    def _stale(self, s: _Slot, case, ans: dict) -> Optional[CaseResult]:
        """A sticky device error met before ``case``'s op ran: blame the case this worker ran
        before (if any), and run ``case`` again in a fresh worker."""
        s.stop()
        prev, s.last = s.last, None
        if prev is not None:
            self._blame(prev, ans, case)
        n = self.stale_tries[case.id] = self.stale_tries.get(case.id, 0) + 1
        if n <= (3 if prev is not None else 2):
            s.pending_replay = case  # a crash being replayed (s.replay_of) stays one
            return None
        # even a fresh worker meets a device error before running anything: the device is broken
        s.replay_of = None
        built, ref, feats, err = self.prep.pop(case.id, None) or self.prepare(case)
        self.prep.pop(case.id, None)
        v = oracle.Verdict("error", "device-unusable", f"{n} set-ups of this case met a sticky "
                           f"device error before its op ran, the last in a fresh worker: "
                           f"{ans.get('detail', '')}")
        return CaseResult(case, v, feats, 0.0)

    def _blame(self, prev: tuple, ans: dict, victim):
        """Judge ``prev`` (result, answer) again: its device work left the sticky error that
        ``victim``'s set-up met (the worker synchronized after it, so only a device whose
        synchronize does not flush errors gets here)."""
        res, pans = prev
        if res.verdict.status in ("device-assert", "crash"):
            return  # already classified as such: its recorded answer stands
        kind = ans["stale"]
        what = "device-side assert" if kind == "device-assert" else "device fault"
        note = (f"{what} surfaced only in the set-up of the next case of the same worker "
                f"({victim.id}): attributed to this case")
        if not pans.get("ok") and pans.get("exc_type"):
            note += f"; its call had raised {pans['exc_type']}: {_line(pans.get('exc_msg'))[:200]}"
        new_ans = {"ok": False, "fatal": "device-assert" if kind == "device-assert" else "crash",
                   "exc_type": ans.get("exc_type"), "exc_msg": ans.get("exc_msg", "")}
        if kind != "device-assert":
            new_ans["detail"] = f"{what}: {ans.get('exc_type')}: {_line(ans.get('exc_msg'))[:300]}"
        new = self.finish(res.case, new_ans, res.seconds, res.replay)
        new.verdict.detail = f"{new.verdict.detail} [{note}]"
        res.__dict__.update(new.__dict__)
