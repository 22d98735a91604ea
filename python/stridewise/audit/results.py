"""What a run is given and what it gives back: ``RunConfig`` (the Runner's settings, from the
command line) and ``CaseResult`` (one case's verdict and what it rests on).

Plain records, below runner.py and the modules that make results beside it (sanitize.py: the
cases not run under compute-sanitizer); runner.py re-exports both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from . import oracle


@dataclass
class RunConfig:
    device: str = "cpu"
    backend: Optional[dict] = None
    imports: tuple = ()
    guard: bool = False
    # the poisoned-margin check (guard.MarginAlloc): the default on a device without guard pages
    margin: bool = False
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
    # warm spares: worker processes started ahead, so that a slot whose worker crashed (or
    # asserted, or hung) goes on at once instead of starting one (cli: --spares)
    spares: int = 0
    schedule: str = "affinity"  # schedule.py: affinity (by kernel) | order
    # with a backend: also run the cases of variants the backend registers no kernel for
    # (coverage.py says "native"); by default they are not run (status native, reason not-run)
    run_native: bool = False
    # stop handing out cases this many seconds after the start (0: never); the rest are
    # reported as skip/deadline: a partial report instead of none when device time runs out
    deadline: float = 0.0
    # --grad: each differentiable case also runs backward (grad.py), judged in finish()
    grad: bool = False


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
    # with a backend: who ran the case's call (coverage.classify): backend | composite | native |
    # unknown; a passing case that ran natively has the status "native"
    ran_by: Optional[str] = None
    timing: dict = field(default_factory=dict)  # the worker's seconds per part (timing.py)
    worker: Optional[list] = None  # [slot, pid] of the worker that answered
    # (the answering worker's history list, this case's place in it): the cases that ran before
    # it in the same worker process (sequence.py replays them for a finding not reproduced alone)
    before: Optional[tuple] = None
    # what the verdict rests on, when not the usual (native CPU oracle vs the device's answer):
    # e.g. the native CPU oracle alone, for a case not run under compute-sanitizer
    oracle: Optional[str] = None
    # --grad: the backward of a differentiable case whose forward passed: {"status", "reason",
    # "detail", "upstream" (its layout), "ops" (aten ops the candidate's backward ran),
    # "native_ops"}; a failing backward is also the case's verdict (reason backward-*)
    grad: Optional[dict] = None
    grad_ref: Any = None  # ... and native's backward (grad.GradRef) for a backward finding (repro)
