"""Running cases in isolated workers: crash attribution, replay, restarts, timeouts.

The parent keeps ``jobs`` worker processes busy with one case each. While a worker runs a
case, the parent builds the same inputs and computes the native CPU oracle for it. A worker
that dies (signal, abort, device fault, device-side assert, timeout) is replaced by a fresh one;
a crashing case is replayed once, alone, in a fresh worker to confirm it. Workers are forked
(default; the parent never initialises a GPU and runs torch single-threaded) or started with
``forkserver``/``spawn``. Which case a free worker gets: ``schedule.py`` (by kernel, so a JIT
backend compiles each kernel in one worker). Warm spares (``spares``): workers started ahead
that a slot whose worker died adopts. Where the time goes: ``timing.py`` (``Runner.timing``).

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
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from multiprocessing.connection import wait as mp_wait
from typing import Optional

from . import diagnose, gen, known, oracle, sanitize, schedule, timing
from .results import CaseResult, RunConfig  # noqa: F401 (re-exported: cli and tests import them here)
from .slots import (  # noqa: F401 (AuditError and _Slot are re-exported)
    _ASSERT_PRINTED, AuditError, _line, _log_since, _signal_name, _Slot,
    _tail, _where, start_method)


class Runner:
    def __init__(self, cfg: RunConfig, specs: dict, progress=None):
        self.cfg, self.specs, self.progress = cfg, specs, progress
        self.backend_info = None
        self.device_name = None
        self.coverage = None  # with a backend: the workers' coverage (worker._coverage_after)
        self._ran_by: dict = {}
        self.log_dir = cfg.log_dir or tempfile.mkdtemp(prefix="stridewise-audit-")
        os.makedirs(self.log_dir, exist_ok=True)
        self.device_type = cfg.device.split(":")[0]
        self.start_method = method = start_method(cfg.start_method, self.device_type, cfg.grad)
        self.ctx = mp.get_context(method)
        if method == "forkserver":
            self.ctx.set_forkserver_preload(["torch", "stridewise.audit.worker"])
        self.worker_cfg = {"device": cfg.device, "backend": cfg.backend, "imports": list(cfg.imports),
                           "guard": cfg.guard, "margin": cfg.margin, "threads": cfg.threads, "sys_path": list(sys.path)}
        self.prep: dict = {}
        self.stale_tries: dict = {}  # case id -> set-ups interrupted by a sticky device error
        self.clock = timing.Recorder(max(1, cfg.jobs))  # the time profile while running
        self.timing: dict = {}  # ... and its summary once run() returns (report: "timing")

    # -- parent side: the oracle ---------------------------------------------------------------
    def prepare(self, case):
        if case.id in self.prep:
            return self.prep[case.id]
        spec = self.specs[case.op]
        t0 = timing.now()
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
        self.clock.parent["oracle"] += timing.now() - t0
        self.prep[case.id] = p
        return p

    def finish(self, case, ans: dict, seconds: float, replay=None) -> CaseResult:
        t0, o0 = timing.now(), self.clock.parent["oracle"]  # judging: finish less any oracle
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
        gres = None
        if self.cfg.grad and not err and "grad" in ans:
            v, gres = self._judge_grad(spec, built, ref, ans, v, feats)
        res = CaseResult(case, v, feats, seconds, replay,
                         exc=(f"{ans['exc_type']}: {ans.get('exc_msg', '')[:300]}"
                              if ans.get("exc_type") else None))
        if gres is not None:
            res.grad_ref = gres.pop("_ref", None) if v.status in oracle.FAILING else None
            gres.pop("_ref", None)
        res.grad = gres
        if v.status in oracle.FAILING and self.cfg.apply_known and built is not None:
            self._match_known(res, built)
        if res.verdict.status in oracle.FAILING or res.known:
            res.built, res.ref = built, ref
        if self.coverage:
            self._attribute(res)
        res.timing = ans.get("timing") or {}
        self.clock.parent["judge"] += timing.now() - t0 - (self.clock.parent["oracle"] - o0)
        return res

    def _judge_grad(self, spec, built, ref, ans: dict, v, feats: dict):
        """--grad: (the case's verdict, its backward record); grad.judge_case says how."""
        from . import grad

        return grad.judge_case(spec, built, ref, ans, v, feats, self.cfg.tol, self.clock)

    def _attribute(self, res: CaseResult, probe: bool = False):
        """Who ran the case's call (backend under audit or native ATen, coverage.py): a passing
        case that ran natively is not the backend's pass (status "native"); other verdicts
        stand, marked. A variant whose forward is native and whose backward the backend runs
        (ran_by "backward", --grad) is the backend's where its backward ran (``probe``: a case
        not run yet, where it will run)."""
        from . import coverage

        case = res.case
        key = case.op if case.kind == "large" else (case.op, case.variant)
        if key not in self._ran_by:
            ent = None if case.kind == "large" else self.coverage["ops"].get(case.op, {}).get(case.variant)
            if ent is None:
                ent = coverage.classify(self._call_of(case), self.coverage["overloads"])
            self._ran_by[key] = ent["ran_by"]
        res.ran_by = self._ran_by[key]
        if res.ran_by == "backward":
            from .grad import differentiable

            runs = self.cfg.grad and differentiable(self.specs[case.op], case)
            # a worker that died mid-case sent no backward record: the backend's backward may
            # have killed it. Before the run, a case native's forward rejects has no backward
            # and its forward is native's: not run (on CUDA it costs a worker, a device assert)
            ran = ((probe and self._valid(case)) or res.grad is not None
                   or res.verdict.status in ("crash", "device-assert"))
            if not (runs and ran):
                res.ran_by = "native"
        if res.ran_by == "native" and res.verdict.status == "pass":
            res.verdict.status = "native"
        v = res.verdict
        forward_native = res.ran_by == "native" or (
            res.ran_by == "backward" and not (v.reason or "").startswith("backward"))
        if (forward_native and v.status in oracle.FAILING and not res.known
                and res.built is not None and case.kind != "large"):
            # ATen's own kernel ran (--run-native, or the forward of a backward-only backend):
            # its known issues are known here too, with a backend or without (a backend's own
            # ops keep --known's choice)
            self._match_known(res, res.built)

    def _match_known(self, res: CaseResult, built):
        """A failing verdict that a known upstream issue explains becomes status known."""
        v = res.verdict
        k = known.match(res.case.op, self.device_type, built, v.reason, res.exc)
        if k is not None:
            res.known = k.name
            if res.grad and (v.reason or "").startswith("backward"):
                res.grad["status"] = "known"  # the backward tallies say so too
            res.verdict = oracle.Verdict("known", v.reason, f"known issue {k.name}: {v.detail}",
                                         v.mismatch)

    def _call_of(self, case) -> str:
        """The call expression a case runs (a spec's variant, or a large probe's)."""
        if case.kind == "large":
            from . import large

            return large.call_of(case.op)
        return self.specs[case.op].calls.get(case.variant, "")

    # -- the loop -----------------------------------------------------------------------------
    def run(self, cases) -> list:
        self.worker_cfg["grad"] = bool(self.cfg.grad)  # the workers run backward too (grad.py)
        self.clock = clock = timing.Recorder(max(1, self.cfg.jobs))
        slots = [_Slot(self, k) for k in range(max(1, self.cfg.jobs))]
        spares = [_Slot(self, f"spare{j}") for j in range(max(0, self.cfg.spares))]
        for sp in spares:
            sp.spare = True
        results: list = []
        try:
            t = timing.now()
            for s in slots[1:]:  # all start together (a GPU worker's start takes seconds) ...
                s.launch()
            slots[0].start()  # ... and fail fast (with the reason) if workers cannot start
            clock.parent["idle"] += timing.now() - t
            todo = self._not_run_natively(cases, results)  # coverage is known from here on
            todo = self._not_run_under_sanitizer(todo, results)
            queue = schedule.make(todo, max(1, self.cfg.jobs), self.cfg.schedule)  # len(), next(slot)
            t_end = time.time() + self.cfg.deadline if self.cfg.deadline > 0 else None
            while queue or any(s.case is not None or s.pending_replay is not None for s in slots):
                if t_end is not None and queue and time.time() > t_end:
                    self._past_deadline(queue, results)
                for s in slots:
                    if s.case is not None:
                        continue
                    if s.pending_replay is None and not queue:
                        continue
                    if s.starting is None and not s.alive:  # (re)start without waiting for
                        self._fresh(s, spares)  # it: the other workers go on; it gets work once ready
                    if s.starting is not None and not s.await_ready():
                        continue
                    if s.pending_replay is not None:
                        c, s.pending_replay = s.pending_replay, None
                        s.send(c)
                    elif queue:
                        c = queue.next(s.k)  # None: nothing for this slot now (schedule.py)
                        if c is not None:
                            s.send(c)
                if spares:
                    self._tend(spares)
                busy = [s for s in slots if s.case is not None]
                starting = [s for s in slots if s.starting is not None]
                for s in busy:
                    self.prepare(s.case)
                waits = [s.conn for s in busy + starting] + [s.proc.sentinel for s in busy + starting]
                now = time.time()
                checks = [self._next_check(s, now) for s in busy]
                checks += [s.starting + self.cfg.startup_timeout for s in starting]
                left = (min(checks) - now) if checks else 0.01
                t = timing.now()
                mp_wait(waits, timeout=max(0.01, left))
                clock.parent["idle"] += timing.now() - t
                for s in busy:
                    ans = self._collect(s)
                    if ans is not None:
                        r = self._handle(s, ans)
                        if r is not None:
                            r.worker = [s.k, s.pid]
                            if r.before is None and s.history and s.history[-1] is r.case:
                                r.before = (s.history, len(s.history) - 1)
                            results.append(r)
                            if self.progress:
                                self.progress(r)
            got, want = Counter(r.case.id for r in results), Counter(c.id for c in cases)
            if got != want:  # never lose (nor duplicate) a case silently
                lost = [c for c in want if got[c] < want[c]]
                twice = [c for c in got if got[c] > want[c]]
                raise AuditError(f"{len(lost)} case(s) got no result, {len(twice)} more than one "
                                 f"(auditor bug): {lost[:5]} {twice[:5]}")
            clock.close(slots)
            self.timing = dict(clock.summary(results), schedule=queue.stats(),
                               start_method=self.start_method)
        finally:
            for s in slots + spares:
                s.stop()
            if not self.cfg.keep_logs and not self.cfg.log_dir:
                shutil.rmtree(self.log_dir, ignore_errors=True)
        return results

    def _not_run_natively(self, cases, results: list) -> list:
        """The cases to run. With a backend whose coverage is known, the cases of a variant the
        backend registers no kernel for (coverage.classify: native) are not the backend's: they
        are reported as ``native`` (reason not-run) without running them, unless --run-native.
        Running them would audit ATen (on CUDA its out-of-range cases each cost a worker, killed
        by a device-side assert)."""
        if not (self.cfg.backend and self.coverage) or self.cfg.run_native:
            return list(cases)
        todo = []
        for c in cases:
            probe = CaseResult(c, oracle.Verdict("native", "not-run", ""))
            self._attribute(probe, probe=True)
            if probe.ran_by != "native":
                todo.append(c)
                continue
            over = ", ".join(self._overloads(c)) or "its call"
            probe.verdict = oracle.Verdict(
                "native", "not-run", f"not run: the backend registers no kernel for {over} on "
                f"{self.device_type} (native ATen would run it; --run-native runs such cases)")
            results.append(probe)
            if self.progress:
                self.progress(probe)
        return todo

    def _not_run_under_sanitizer(self, cases, results: list) -> list:
        """Under compute-sanitizer memcheck on CUDA: the cases ATen's own kernel would run and
        that memcheck flags in it are not run (sanitize.py)."""
        return sanitize.not_run_under_sanitizer(self, cases, results)

    def _overloads(self, case) -> list:
        from . import coverage

        return coverage.overloads(self._call_of(case))

    def _past_deadline(self, queue, results: list):
        """--deadline passed: every case not handed out yet is reported as skip (deadline)."""
        for c in queue.drain():
            r = CaseResult(c, oracle.Verdict("skip", "deadline", f"not run: --deadline "
                                             f"{self.cfg.deadline:.0f}s passed first"))
            results.append(r)
            if self.progress:
                self.progress(r)

    def _fresh(self, s: _Slot, spares: list):
        """A fresh worker for slot ``s``: on a restart, a warm spare's (a ready one first), else
        a new one."""
        if s.launches and spares:
            live = [sp for sp in spares if sp.proc is not None and sp.alive]
            if live:
                s.adopt(min(live, key=lambda sp: sp.starting is not None))
                return
        s.launch()

    def _tend(self, spares: list):
        """Keep the warm spares started. A spare that cannot start turns spares off (the reason
        goes to the time profile); the audit goes on, slots start their own workers."""
        for sp in spares:
            try:
                if sp.starting is not None:
                    sp.await_ready()
                elif not sp.alive:
                    sp.launch()
            except AuditError as e:
                self.clock.spares["disabled"] = _line(str(e))[:200]
                for x in spares:
                    x.stop()
                spares.clear()
                return

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
                t = timing.now()
                ans = s.conn.recv()
                self.clock.parent["ipc"] += timing.now() - t
                return ans
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
        self.clock.answered(s, ans, s.replay_of is not None)
        s.history.append(case)
        if ans.get("stale"):
            return self._stale(s, case, ans)
        fatal = ans.get("fatal")
        if fatal:
            s.stop()  # the process is dead or its device context is: start afresh
            s.cause = "timeout" if ans.get("timeout") else fatal  # of the restart (time profile)
        if s.replay_of is not None:  # this was the replay of a crash
            first, s.replay_of = s.replay_of, None
            crashed_in = first.pop("_before", None)  # (its worker's history, its place there)
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
                res = None
                if not confirmed and not again and not ans.get("internal"):
                    # alone it did not crash: if it fails alone, that is the finding a repro
                    # script reproduces (the crash needed the cases run before it)
                    alone = self.finish(case, ans, took, dict(rep, crashed_after=first.get("_history", [])))
                    if alone.verdict.status in oracle.FAILING:
                        alone.verdict.detail = (
                            f"{alone.verdict.detail} [it crashed once after other cases ("
                            f"{', '.join(first.get('_history', []))}: memory corrupted by one of them?), "
                            f"not when replayed alone; verdict of the replay alone]")
                        res = alone
                if res is None:
                    if not confirmed:
                        first = dict(first, fatal="crash",
                                     detail=f"crashed once but not when replayed alone in a fresh worker "
                                            f"(memory corrupted by an earlier case? run before it: "
                                            f"{', '.join(first.get('_history', []))}). First crash: "
                                            f"{first.get('detail', '')}")
                    res = self.finish(case, first, took, rep)
            res.before = crashed_in  # the cases before it are those of the worker that crashed
            s.last = None if fatal else (res, ans)
            return res
        if fatal == "crash" or (fatal == "device-assert" and self._valid(case)):
            # A device-side assert on a case native accepts is a crash too (oracle.judge:
            # device-assert-valid): confirm it alone in a fresh worker like any other.
            before = [c.id for c in s.history[-4:-1]]
            if not before and fatal == "crash" and not ans.get("timeout"):
                # it was the first case of a fresh worker: it already ran alone, as a replay
                # would (a hang is still replayed: a stalled context says little about a case)
                res = self.finish(case, ans, took, {
                    "confirmed": True, "alone": True,
                    "replay_detail": "not replayed: it was the first case of a fresh worker"})
                s.last = None
                return res
            s.replay_of = dict(ans, _history=before, _before=(s.history, len(s.history) - 1))
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
        s.cause = "stale"
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
        res = CaseResult(case, v, feats, 0.0)
        if self.coverage:
            self._attribute(res)
        return res

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
        new.timing, new.worker = res.timing, res.worker  # who ran it, and how long, stand
        res.__dict__.update(new.__dict__)
