"""Worker slots of the runner (runner.py): one worker process each, started, adopted from a
warm spare, fed one case at a time over a pipe, stopped; and the helpers that read what a dead
or stuck worker left behind (exit signal, log tail, the innermost Python frame, a device
assertion it printed).
"""
from __future__ import annotations

import os
import re
import signal
import time
import warnings
from typing import Optional

import torch

from . import timing
from .worker import worker_main


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
    try:  # the PrivateUse1 device under whatever name its plug-in gave it (npu, ...)
        plug = (torch._C._get_privateuse1_backend_name(),)
    except Exception:  # noqa: BLE001
        plug = ()
    for name in dict.fromkeys(("xpu", "npu", "mps") + plug):
        mod = getattr(torch, name, None)
        init = getattr(mod, "is_initialized", None)
        try:
            if callable(init) and init():
                return True
        except Exception:  # noqa: BLE001
            pass
    return False


def _accelerator_built() -> bool:
    """Whether this torch has a device besides the CPU (a CUDA or ROCm build, an XPU build, a
    PrivateUse1 plug-in). Such a device's autograd thread starts at the process's first backward,
    even a CPU one, and a process forked after that fails every backward ("Unable to handle
    autograd's threading in combination with fork-based multiprocessing"). Initialises nothing."""
    if torch.version.cuda or torch.version.hip:
        return True
    try:
        if torch._C._get_privateuse1_backend_name() != "privateuseone":
            return True
    except Exception:  # noqa: BLE001
        pass
    xpu = getattr(torch, "xpu", None)
    try:
        return bool(xpu is not None and xpu._is_compiled())
    except Exception:  # noqa: BLE001
        return False


def fork_safe(device_type: str, grad: bool) -> bool:
    """Whether workers may be forked from this process (the ``auto`` start method): never for a
    device other than the CPU, nor once an accelerator was initialised here, nor for backward
    cases where torch has another device (this process may have run a backward already: a test
    session, the oracle)."""
    return device_type == "cpu" and not _accelerator_initialized() and not (grad and _accelerator_built())


def start_method(asked: str, device_type: str, grad: bool) -> str:
    """The workers' start method for ``--start-method asked``: ``auto`` forks where fork_safe
    allows, else a clean forkserver; an explicit fork with backward cases warns where it may
    fail every backward."""
    if asked == "auto":
        return "fork" if fork_safe(device_type, grad) else "forkserver"
    if asked == "fork" and grad and _accelerator_built():
        warnings.warn("--start-method fork with --grad: after any backward in this process, "
                      "every backward in a forked worker fails (torch's autograd threads)")
    return asked


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
        # the cases this worker process answered, in order (a new list per process: a result's
        # ``before`` keeps a reference to its worker's list; sequence.py replays from it)
        self.history: list = []
        self.log: Optional[str] = None
        self.log_pos = 0  # size of the log when the current case was sent
        self.starting: Optional[float] = None  # launch time of a worker not yet ready
        # (result, answer) of the last case this worker process answered: a sticky device error
        # met in the next case's set-up belongs to it
        self.last: Optional[tuple] = None
        # the time profile (timing.Recorder, perf_counter) and warm spares
        self.spare = False  # a warm spare: started ahead, adopted by a slot whose worker died
        self.launches, self.restart, self.cause = 0, False, None  # cause of the next restart
        self.t_launch: Optional[float] = None
        self.t_sent = 0.0
        self.free_since: Optional[float] = None
        self.pid: Optional[int] = None  # of the worker running self.case

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
        self.r.clock.launched(self)
        self.n += 1
        self.log = os.path.join(self.r.log_dir, f"worker{self.k}-{self.n}.log")
        cfg = dict(self.r.worker_cfg, log=self.log, launched=time.time())
        ctx = self.r.ctx
        here, there = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(there, cfg), daemon=True)
        self.proc.start()
        there.close()
        self.conn = here
        self.history = []
        self.last = None
        self.starting = time.time()

    def adopt(self, spare: "_Slot"):
        """Take over a warm spare's worker process (a fresh one that never ran a case): a
        restart without the start-up (the spare may still be starting: then the wait is
        shorter)."""
        self.stop()
        self.r.clock.launched(self, spare)
        self.proc, self.conn, self.log, self.starting = spare.proc, spare.conn, spare.log, spare.starting
        spare.proc = spare.conn = spare.starting = None
        self.history = []
        self.last = None
        if self.starting is None:  # it was ready: no wait at all
            self.r.clock.ready(self, {})

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
        if msg.get("coverage"):
            self.r.coverage = msg["coverage"]
        self.r.clock.ready(self, msg)
        return True

    def send(self, case):
        if not self.alive:
            self.start()
        elif self.starting is not None:
            self.await_ready(block=True)
        self.case, self.sent = case, time.time()
        self.r.clock.sent(self)
        self.pid = self.proc.pid
        try:
            self.log_pos = os.path.getsize(self.log) if self.log else 0
        except OSError:
            self.log_pos = 0
        t = timing.now()
        self.conn.send(case)
        self.r.clock.parent["ipc"] += timing.now() - t

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
