"""Findings that do not reproduce alone: the smallest sequence of earlier cases that does.

A finding whose case passes alone -- a crash its replay alone did not confirm (runner.py), or a
finding whose repro script does not reproduce in a fresh process (--verify-repros) -- failed
because of what a case run before it in the same worker process left behind: memory it
corrupted, a cache, a handle. Those cases are known (``CaseResult.before``: the worker's
history). :func:`search` replays them with the finding's case last, each trial in a fresh worker
process, and shrinks them to the smallest sequence that still fails the same way (same status):

1. one wave, trials in parallel (up to --jobs workers): the case alone; after all of its N
   predecessors; after the last 1, 2, 4, ... of them. The shortest failing suffix goes on.
2. delta debugging (ddmin, Zeller and Hildebrandt 2002) shrinks it, order kept: a wave per
   step tries each chunk and each complement; the first that fails is kept.
3. it stops at a 1-minimal sequence (dropping any one case makes it pass) or when the trial
   budget (``--sequence-trials``) is spent, and reports the smallest sequence found.

Each finding's record (JSON ``sequences``; the report's section :data:`TITLE`): op, class,
example (the case), predecessors (N), sequence (case ids, the finding's case last),
reproduced (False: it passed even after all N, so what broke it is outside the sequence: a
timing, another process), minimal (1-minimal; False: the budget ended the search), trials,
seconds, and the command that replays the sequence in one worker, in order.
"""
from __future__ import annotations

import os
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import wait as mp_wait

from . import oracle, timing
from .slots import AuditError, _Slot

TITLE = "Findings that need the cases before them"
TRIALS = 48  # default budget of trials per finding (cli: --sequence-trials)


def predecessors(res) -> list:
    """The cases that ran before ``res``'s case in its worker process, in order."""
    if not res.before:
        return []
    hist, k = res.before
    return list(hist[:k])


def _ask(runner, s: _Slot, case):
    """Send ``case`` to slot ``s`` and wait for its answer (runner._collect: crash, hang)."""
    s.send(case)
    while True:
        ans = runner._collect(s)
        if ans is not None:
            s.case = None
            return ans, time.time() - s.sent
        mp_wait([s.conn, s.proc.sentinel], timeout=0.5)


def _trial(runner, s: _Slot, seq: list, target) -> dict:
    """``seq`` then ``target`` in slot ``s``'s fresh worker (launched): {"ans", "took"} of the
    target, or {"broken": why} when the worker could not start or a case before the target
    crashed."""
    try:
        s.await_ready(block=True)
        for c in seq:
            ans, _ = _ask(runner, s, c)
            if ans.get("fatal") or ans.get("stale"):
                return {"broken": f"{c.id} crashed before the case ran"}
        ans, took = _ask(runner, s, target)
        return {"ans": ans, "took": took}
    except AuditError as e:
        return {"broken": str(e).splitlines()[0][:200]}
    finally:
        s.stop()


def _batch(runner, seqs: list, target) -> list:
    """:func:`_trial` of each sequence, all at once: the workers are launched from this thread
    before any helper thread exists (a fork beside running threads may inherit a held lock);
    helper threads then only feed them."""
    slots = [_Slot(runner, f"seq{k}") for k in range(len(seqs))]
    for s in slots:
        s.launch()
    with ThreadPoolExecutor(max_workers=len(seqs)) as ex:
        return list(ex.map(lambda a: _trial(runner, a[0], a[1], target), zip(slots, seqs)))


class _Search:
    """One finding's search: trials in waves, each trial judged like the case was."""

    def __init__(self, runner, res, budget: int, argv: list, flags=()):
        self.r, self.res, self.budget, self.argv, self.flags = runner, res, budget, argv, flags
        self.want = res.verdict.status
        self.trials = 0
        self.broken: list = []

    def wave(self, seqs: list) -> list:
        """Whether each sequence (then the case) fails as the finding did; at most the budget
        left is run (the rest count as not failing)."""
        seqs = seqs[:max(0, self.budget - self.trials)]
        self.trials += len(seqs)
        return self.fails(seqs) if seqs else []

    def fails(self, seqs: list) -> list:
        """Run each sequence then the case in a fresh worker (--jobs at once); judge the case."""
        jobs = max(1, self.r.cfg.jobs)
        outs = [o for k in range(0, len(seqs), jobs) for o in _batch(self.r, seqs[k:k + jobs], self.res.case)]
        got = []
        for o in outs:  # judged here, in this thread: the runner's oracle is not thread-safe
            if "broken" in o:
                self.broken.append(o["broken"])
                got.append(False)
                continue
            v = self.r.finish(self.res.case, o["ans"], o["took"]).verdict
            got.append(v.status == self.want and v.status in oracle.FAILING)
        return got

    def run(self) -> dict:
        pre = predecessors(self.res)
        n = len(pre)
        sizes = [k for k in (2 ** j for j in range(n.bit_length())) if k < n]
        first = self.wave([[], pre] + [pre[-k:] for k in sizes])
        if first and first[0]:
            return self.record(pre, [], True, True)
        if len(first) < 2 or not first[1]:
            return self.record(pre, pre, False, False)
        cut = next((pre[-k:] for k, ok in zip(sizes, first[2:]) if ok), pre)
        seq, minimal = self.ddmin(cut)
        return self.record(pre, seq, True, minimal)

    def ddmin(self, seq: list) -> tuple:
        """(a sequence that fails, whether it is 1-minimal) from ``seq`` that fails."""
        n = 2
        while len(seq) >= 2:
            if self.trials >= self.budget:
                return seq, False
            size = -(-len(seq) // n)
            chunks = [seq[i:i + size] for i in range(0, len(seq), size)]
            comps = [seq[:i] + seq[i + size:] for i in range(0, len(seq), size)] if n > 2 else []
            tries = chunks + comps
            got = self.wave(tries)
            hit = next((k for k, ok in enumerate(got) if ok), None)
            if hit is not None:
                seq = tries[hit]
                n = 2 if hit < len(chunks) else max(n - 1, 2)
                continue
            if len(got) < len(tries):  # the budget ended this step
                return seq, False
            if n >= len(seq):
                return seq, True
            n = min(len(seq), 2 * n)
        return seq, len(seq) <= 1

    def record(self, pre: list, seq: list, reproduced: bool, minimal: bool) -> dict:
        c = self.res.case
        return {"op": c.op, "class": self.want, "example": c.id, "predecessors": len(pre),
                "sequence": [x.id for x in seq] + [c.id], "reproduced": reproduced,
                "minimal": minimal and reproduced, "trials": self.trials,
                "broken": self.broken[:3], "command": command(self.argv, seq + [c], self.flags)}


# the audit's options that shape how a case runs and is judged: the replay command keeps them
# (and their values); every other option (which cases, how many workers, outputs) is replaced
KEPT = ("--device", "--backend", "--flush", "--import", "--grad", "--guard", "--margin", "--threads",
        "--start-method", "--timeout", "--assert-grace", "--run-native", "--tol-factor", "--atol",
        "--exact-accum", "--strict-errors", "--known", "--no-known")


def command(argv: list, cases: list, flags=()) -> str:
    """The audit command that runs ``cases`` in order in one worker (what a trial did), from
    the audit's own ``argv``; ``flags``: the options that take no value (cli's parser)."""
    out, k = ["python3", "-m", "stridewise", "audit"], 0
    while k < len(argv):
        tok = argv[k]
        name = tok.split("=", 1)[0]
        takes = name.startswith("-") and name not in flags and "=" not in tok
        if name in KEPT:
            out += [tok] + ([argv[k + 1]] if takes and k + 1 < len(argv) else [])
        k += 2 if takes else 1
    out += ["--jobs", "1", "--spares", "0", "--schedule", "order"]
    for c in cases:
        out += ["--case", c.id]
    return " ".join(shlex.quote(a) for a in out)


def search(runner, results: list, argv: list, budget: int = TRIALS, flags=()) -> list:
    """A record per result in ``results`` (each failed, did not reproduce alone and has
    predecessors), in order; ``argv`` and ``flags`` make each record's command."""
    if not results or budget <= 0:
        return []
    runner.clock = timing.Recorder(max(1, runner.cfg.jobs))  # the run's profile is summarised
    os.makedirs(runner.log_dir, exist_ok=True)  # the run removed its logs
    out = []
    for res in results:
        t0 = time.time()
        rec = _Search(runner, res, budget, argv, flags).run()
        rec["seconds"] = round(time.time() - t0, 2)
        out.append(rec)
    return out


def targets(results: list, checks) -> list:
    """The findings to search: a crash its replay alone did not confirm (the first such case of
    each op), and with --verify-repros each finding whose script did not reproduce it (the case
    that script was written for). Only cases with predecessors."""
    by_id = {r.case.id: r for r in results}
    out, ops = [], set()
    for r in results:
        if (r.verdict.status == "crash" and (r.replay or {}).get("confirmed") is False
                and r.before and r.before[1] > 0 and r.case.op not in ops):
            ops.add(r.case.op)
            out.append(r)
    for c in checks or ():
        r = by_id.get(c.get("example"))
        if (r is not None and r not in out and r.before and r.before[1] > 0
                and ("does not reproduce" in c.get("outcome", "") or c.get("outcome_note"))):
            out.append(r)
    return out


def settle(checks, records: list):
    """A --verify-repros check whose finding did not reproduce alone but does after earlier
    cases is a finding that needs them, not an auditor bug: it holds, with the sequence."""
    seq = {r["example"]: r for r in records}
    for c in checks or ():
        r = seq.get(c.get("example"))
        if r is None:
            continue
        c["sequence"] = r
        if r["reproduced"] and len(r["sequence"]) > 1:
            c["ok"] = True
            c["outcome_note"] = c["outcome"] = f"reproduces after {len(r['sequence']) - 1} earlier case(s)"
            c["why"] = [f"fails after: {' -> '.join(r['sequence'][:-1])}; replay: {r['command']}"]


def text(records: list) -> list:
    """The report's section (lines), empty without records."""
    if not records:
        return []
    lines = [f"{TITLE} (each: the cases that ran before it in its worker, replayed with it last in "
             f"fresh workers and shrunk to the smallest sequence that fails the same way)"]
    for r in records:
        head = f"  {r['op']}  {r['class']}  {r['example']}: "
        if not r["reproduced"]:
            lines.append(head + f"passes even after all {r['predecessors']} case(s) that ran before "
                         f"it ({r['trials']} trial(s), {r['seconds']:.0f}s): what broke it is outside "
                         f"that sequence (timing, another process, the device's state)")
        elif len(r["sequence"]) == 1:
            lines.append(head + "fails alone in a fresh worker, where its repro script did not: "
                         "a race that does not always lose (duplicate writes), or a script that "
                         "does not rebuild the audit's case (an auditor bug)")
        else:
            k = len(r["sequence"]) - 1
            lines.append(head + f"fails after {k} of the {r['predecessors']} case(s) that ran before "
                         f"it{'' if r['minimal'] else ' (smallest found; the trial budget ended the search)'}"
                         f" ({r['trials']} trial(s), {r['seconds']:.0f}s): "
                         + " -> ".join(r["sequence"]))
            lines.append(f"        replay: {r['command']}")
        for b in r.get("broken") or []:
            lines.append(f"        a trial broke: {b}")
    return lines + [""]


__all__ = ["search", "targets", "settle", "text", "command", "predecessors", "TITLE", "TRIALS"]
