"""Where an audit's wall time goes: the runner's time profile ("timing" in the JSON report).

Every worker slot (``--jobs``) is accounted from the start of the run to its end, so the slots'
parts add up to jobs x wall (worker-seconds):

  startup      first start of each slot's worker (launch -> ready; split below)
  restarts     later starts, after a crash / device assert / timeout / interrupted set-up
  build        gen.build in the worker (the case's CPU inputs)
  materialize  placing them on the device (synchronize first, copies, guard pages)
  call         run_call + synchronize + the backend's flush
  pack         packing the answer (result and storage bytes)
  ipc_queue    send -> answer as the parent saw it, minus the worker's own time: pickling,
               pipes, and answers waiting while the parent was busy with other slots
  crashed      first attempts that crashed or hung (no answer: the time until noticed)
  replays      replays of crashes alone in a fresh worker, and set-ups interrupted by a
               sticky device error of the previous case (run again)
  idle         the slot had no case: waiting for the parent to hand one out (parent busy),
               or nothing left to run

A slot's first start counts from the run's start. The parent (single-threaded) is accounted over the same wall: oracle (prepare:
gen.build, oracle.reference, features), judge (finish), ipc (pickling and pipe writes/reads of
cases and answers; on an oversubscribed machine also the time the parent is preempted there),
idle (waiting for answers), other (scheduling, starting workers). "parent busy" is 1 - idle /
wall: near 100% the parent, not the workers, sets the pace. Warm spares start in the
background, outside the slots' time.

A call much slower than its op's median call (> JIT_FACTOR x and > JIT_MIN seconds) is most
likely a JIT compile or autotune on the first use of a kernel specialization.
"""
from __future__ import annotations

import statistics
import time

SLOT_PARTS = ("startup", "restarts", "build", "materialize", "call", "pack", "grad", "ipc_queue",
              "crashed", "replays", "idle")
CASE_PARTS = ("build", "materialize", "call", "pack", "grad")  # grad: the backward (--grad)
START_PARTS = ("process", "imports", "device", "backend", "guard", "other")
PARENT_PARTS = ("oracle", "judge", "ipc", "other", "idle")
LABEL = {"startup": "worker start-ups", "restarts": "worker restarts", "build": "build inputs",
         "materialize": "place on device", "call": "call + sync", "pack": "pack answer",
         "grad": "backward (--grad)",
         "ipc_queue": "IPC / queueing", "crashed": "crashed attempts", "replays": "replays",
         "idle": "idle (no case)"}
START_LABEL = {"process": "process + torch import", "imports": "--import", "device": "device init",
               "backend": "backend import+enable", "guard": "guard allocator", "other": "other"}
JIT_FACTOR = 20.0
JIT_MIN = 0.05
now = time.perf_counter


class Recorder:
    """Accumulates the profile while the runner runs (perf_counter seconds)."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.t0 = now()
        self.wall = None
        self.slot = {p: 0.0 for p in SLOT_PARTS}
        self.parent = {"oracle": 0.0, "judge": 0.0, "ipc": 0.0, "idle": 0.0}
        self.starts = {"count": 0, "seconds": 0.0, "parts": {p: 0.0 for p in START_PARTS}}
        self.restarts = {"count": 0, "seconds": 0.0, "by_cause": {}, "from_spare": 0,
                         "parts": {p: 0.0 for p in START_PARTS}}
        self.spares = {"started": 0, "seconds": 0.0, "adopted": 0, "disabled": None,
                       "parts": {p: 0.0 for p in START_PARTS}}
        self.replays = {"count": 0, "seconds": 0.0}

    # -- slot state changes (runner._Slot) --------------------------------------------------
    def launched(self, s, spare=None):
        """A worker process is launched for slot ``s`` (or a spare is adopted by it)."""
        t = now()
        if getattr(s, "spare", False):
            s.t_launch, s.free_since = t, None
            return
        if s.free_since is not None:
            self.slot["idle"] += t - s.free_since
        s.free_since = None
        s.t_launch = t if s.launches else self.t0  # a first start: from the run's start
        s.restart = s.launches > 0
        s.from_spare = spare is not None
        s.launches += 1
        if s.restart:
            cause = s.cause or "other"
            self.restarts["count"] += 1
            self.restarts["by_cause"][cause] = self.restarts["by_cause"].get(cause, 0) + 1
            if spare is not None:
                self.restarts["from_spare"] += 1
                self.spares["adopted"] += 1
        s.cause = None

    def ready(self, s, msg: dict):
        """The worker of slot ``s`` (or spare ``s``) said it is ready; ``msg`` its message."""
        t = now()
        if s.t_launch is None:
            return
        took = t - s.t_launch
        if getattr(s, "spare", False):
            rec = self.spares
            rec["started"] += 1
        else:
            self.slot["restarts" if s.restart else "startup"] += took
            rec = self.restarts if s.restart else self.starts
            if not s.restart:
                rec["count"] += 1
        rec["seconds"] += took
        # the worker's own parts; a spare adopted while starting measured them from its own
        # launch: the slot's wait for it is "other"
        known = 0.0
        parts = {} if getattr(s, "from_spare", False) else (msg.get("timing") or {})
        for p in START_PARTS[:-1]:
            v = max(0.0, float(parts.get(p, 0.0)))
            rec["parts"][p] += v
            known += v
        rec["parts"]["other"] += max(0.0, took - known)
        s.t_launch = None
        s.free_since = t

    def sent(self, s):
        t = now()
        if s.free_since is not None:
            self.slot["idle"] += t - s.free_since
        s.free_since = None
        s.t_sent = t

    def answered(self, s, ans: dict, replay: bool):
        """Slot ``s`` got the answer ``ans`` of its case (``replay``: of a crash being replayed,
        or a set-up interrupted by the previous case's device error)."""
        t = now()
        took = t - s.t_sent
        s.free_since = t
        tm = ans.get("timing")
        if replay or ans.get("stale"):
            self.slot["replays"] += took
            self.replays["count"] += 1
            self.replays["seconds"] += took
        elif not tm:
            self.slot["crashed"] += took
        else:
            own = 0.0
            for p in CASE_PARTS:
                v = max(0.0, float(tm.get(p, 0.0)))
                self.slot[p] += v
                own += v
            self.slot["ipc_queue"] += max(0.0, took - own)

    def close(self, slots):
        """End of the run: free slots idled until now; a worker still starting counts."""
        t = now()
        self.wall = t - self.t0
        for s in slots:
            if s.t_launch is not None:
                self.slot["restarts" if s.restart else "startup"] += t - s.t_launch
                s.t_launch = None
            elif s.free_since is not None:
                self.slot["idle"] += t - s.free_since
                s.free_since = None

    # -- the summary -------------------------------------------------------------------------
    def summary(self, results) -> dict:
        wall = self.wall if self.wall is not None else now() - self.t0
        cap = self.jobs * wall
        parts = {p: round(v, 4) for p, v in self.slot.items()}
        par = dict(self.parent)
        par["other"] = max(0.0, wall - par["oracle"] - par["judge"] - par["ipc"] - par["idle"])
        calls, slow, workers = {}, [], {}
        for r in results:
            c = (r.timing or {}).get("call")
            if c is not None:
                calls.setdefault(r.case.op, []).append(c)
                slow.append((c, r.case.id, r.case.op))
            if r.worker is not None:  # "SLOT/PID": one line per case in the indented JSON
                workers[r.case.id] = f"{r.worker[0]}/{r.worker[1]}"
        med = {op: statistics.median(v) for op, v in calls.items()}
        jit, jit_ops = [], {}
        for c, cid, op in slow:
            if c > JIT_FACTOR * med[op] and c > JIT_MIN:
                jit.append((c, cid))
                n, s = jit_ops.get(op, (0, 0.0))
                jit_ops[op] = (n + 1, s + c)
        jit.sort(reverse=True)
        slow.sort(reverse=True)
        largest = max(SLOT_PARTS, key=lambda p: self.slot[p])
        return {
            "wall_s": round(wall, 3), "jobs": self.jobs, "capacity_s": round(cap, 3),
            "parts": parts,
            "shares": {p: round(v / cap, 4) if cap else 0.0 for p, v in self.slot.items()},
            "largest": largest,
            "startups": {"count": self.starts["count"], "seconds": round(self.starts["seconds"], 4),
                         "parts": {p: round(v, 4) for p, v in self.starts["parts"].items()}},
            "restarts": {"count": self.restarts["count"], "seconds": round(self.restarts["seconds"], 4),
                         "by_cause": dict(self.restarts["by_cause"]),
                         "from_spare": self.restarts["from_spare"],
                         "parts": {p: round(v, 4) for p, v in self.restarts["parts"].items()}},
            "spares": dict(self.spares, seconds=round(self.spares["seconds"], 4),
                           parts={p: round(v, 4) for p, v in self.spares["parts"].items()}),
            "replays": {"count": self.replays["count"], "seconds": round(self.replays["seconds"], 4)},
            "parent": {p: round(par[p], 4) for p in PARENT_PARTS},
            "parent_busy": round(1.0 - par["idle"] / wall, 4) if wall else 0.0,
            "median_call_s": {op: round(v, 6) for op, v in med.items()},
            "jit": {"rule": f"call > {JIT_FACTOR:g}x its op's median call and > {JIT_MIN:g} s",
                    "count": len(jit), "seconds": round(sum(c for c, _ in jit), 4),
                    "top": [[cid, round(c, 4)] for c, cid in jit[:5]],
                    "by_op": {op: [n, round(s, 4)] for op, (n, s) in
                              sorted(jit_ops.items(), key=lambda kv: -kv[1][1])},
                    "cases": [[cid, round(c, 4)] for c, cid in jit]},
            "slowest": [[cid, round(c, 4)] for c, cid, _ in slow[:5]],
            "case_worker": workers,
        }


def _pct(v: float, total: float) -> str:
    return f"{100.0 * v / total:.0f}%" if total else "-"


def _split(parts: dict) -> str:
    return ", ".join(f"{START_LABEL[k]} {v:.2f}s" for k, v in parts.items() if v >= 0.005 or k == "process")


def text(t: dict) -> list:
    """The report's "Where the time went" section."""
    if not t:
        return []
    cap, wall, jobs = t["capacity_s"], t["wall_s"], t["jobs"]
    parts = t["parts"]
    big = t["largest"]
    par = t["parent"]
    out = [f"Where the time went ({jobs} worker slot(s) x {wall:.1f}s wall = {cap:.1f} worker-s; "
           f"parent busy {100 * t['parent_busy']:.0f}% of wall)",
           f"  largest: {LABEL[big]} {parts[big]:.1f}s ({_pct(parts[big], cap)} of jobs x wall)"]
    rows = []
    st, rs = t["startups"], t["restarts"]
    for p in SLOT_PARTS:
        note = ""
        if p == "startup":
            note = f"{st['count']} start(s): {_split(st['parts'])}"
        elif p == "restarts":
            causes = ", ".join(f"{k} {v}" for k, v in sorted(rs["by_cause"].items())) or "none"
            note = f"{rs['count']} restart(s) ({causes})" + (f": {_split(rs['parts'])}" if rs["count"] else "")
            if t["spares"].get("started") or t["spares"].get("disabled"):
                sp = t["spares"]
                note += (f"; {rs['from_spare']} from a warm spare (spares: {sp['started']} started, "
                         f"{sp['seconds']:.1f}s in the background)")
                if sp.get("disabled"):
                    note += f"; spares off: {sp['disabled']}"
        elif p == "replays":
            note = f"{t['replays']['count']} replay(s) / re-run set-up(s)"
        rows.append(f"  {parts[p]:9.2f}s {_pct(parts[p], cap):>5}  {LABEL[p]:<18} {note}".rstrip())
    out += rows
    total = sum(parts.values())
    out.append(f"  {total:9.2f}s {_pct(total, cap):>5}  (sum)")
    bottleneck = ""
    if t["parent_busy"] >= 0.9 and parts["idle"] + parts["ipc_queue"] >= 0.3 * cap:
        bottleneck = ("  -> the parent (oracle + judging, single-threaded) limits this audit: more "
                      "workers will not make it faster")
    out.append(f"  parent: oracle {par['oracle']:.1f}s ({_pct(par['oracle'], wall)}), judging "
               f"{par['judge']:.1f}s ({_pct(par['judge'], wall)}), pipes {par['ipc']:.1f}s, other "
               f"{par['other']:.1f}s, idle "
               f"{par['idle']:.1f}s: parent busy {100 * t['parent_busy']:.0f}% of wall")
    if bottleneck:
        out.append(bottleneck)
    j = t["jit"]
    out.append(f"  likely JIT compiles ({j['rule']}): {j['count']} call(s), {j['seconds']:.1f}s"
               + ("; " + ", ".join(f"{cid} {s:.2f}s" for cid, s in j["top"]) if j["top"] else ""))
    if j.get("by_op"):
        out.append("    by op: " + ", ".join(f"{op} {n} ({s:.1f}s)" for op, (n, s) in j["by_op"].items()))
    if t["slowest"] and not j["top"]:
        out.append("  slowest calls: " + ", ".join(f"{cid} {s:.3f}s" for cid, s in t["slowest"]))
    return out
