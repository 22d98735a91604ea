"""Which case a free worker runs next (runner.Runner.run).

``InOrder``: the case list in order, any free worker takes the next case.

``Affinity`` (default with more than one worker): cases are bucketed by kernel -- (op, variant,
dtype), keeping their order inside a bucket -- and a free worker gets the next case of the
bucket it ran last, else claims the largest bucket no other worker has claimed, else splits
a bucket still running (it takes the second half; of a kernel it ran before if it can, else
the largest; a bucket with one case left is left to its owner). A backend that compiles kernels
just in time (Triton: compile, autotune, module load; per-process in-memory caches) then
compiles each specialization in one worker instead of in every worker, and workers do not
compile the same kernel concurrently. Every case is handed out exactly once; replays and
requeued cases stay with their slot (runner: ``pending_replay``) and go first.
"""
from __future__ import annotations

from collections import deque


def kernel_key(case) -> tuple:
    return (case.op, case.variant, case.dtype)


class InOrder:
    def __init__(self, cases):
        self.q = deque(cases)
        self.buckets = self.splits = 0

    def __len__(self) -> int:
        return len(self.q)

    def next(self, slot):
        return self.q.popleft() if self.q else None

    def drain(self) -> list:
        """Every case not handed out yet (runner: --deadline)."""
        out, self.q = list(self.q), deque()
        return out

    def stats(self) -> dict:
        return {"policy": "order"}


class _Bucket:
    __slots__ = ("key", "cases")

    def __init__(self, key, cases):
        self.key, self.cases = key, cases


class Affinity:
    def __init__(self, cases, key=kernel_key):
        groups: dict = {}
        for c in cases:
            groups.setdefault(key(c), deque()).append(c)
        # never claimed yet, largest first (ties: first met in the case list); sizes of
        # unclaimed buckets do not change, so this order holds
        self.unclaimed = deque(sorted((_Bucket(k, q) for k, q in groups.items()),
                                      key=lambda b: -len(b.cases)))
        self.buckets = len(groups)
        self.owner: dict = {}  # slot -> the bucket it takes cases from
        self.n = len(cases)
        self.splits = 0
        self.seen: dict = {}  # slot -> kernels (bucket keys) it has run

    def __len__(self) -> int:
        return self.n

    def next(self, slot):
        """The next case for ``slot``; None when none is left, or none for it now (the buckets
        left are being run by other slots and hold one case each: their owners run them)."""
        b = self.owner.get(slot)
        if b is None or not b.cases:
            b = self._claim(slot)
            if b is None:
                return None
        self.n -= 1
        return b.cases.popleft()

    def _claim(self, slot):
        self.owner.pop(slot, None)
        if self.unclaimed:
            b = self.unclaimed.popleft()
        else:  # every bucket left is being run: split one, take its second half -- the largest
            # of a kernel this slot ran before (no new compile), else the largest
            running = [b for b in self.owner.values() if len(b.cases) >= 2]
            if not running:
                if self.n and not any(b.cases for b in self.owner.values()):
                    raise RuntimeError(f"auditor bug: the scheduler lost {self.n} case(s)")
                return None
            seen = self.seen.get(slot, ())
            big = max(running, key=lambda b: (b.key in seen, len(b.cases)))
            tail: deque = deque()
            for _ in range(len(big.cases) // 2):
                tail.appendleft(big.cases.pop())
            b = _Bucket(big.key, tail)
            self.splits += 1
        self.owner[slot] = b
        self.seen.setdefault(slot, set()).add(b.key)
        return b

    def drain(self) -> list:
        """Every case not handed out yet (runner: --deadline)."""
        out = [c for b in list(self.unclaimed) + list(self.owner.values()) for c in b.cases]
        self.unclaimed = deque()
        for b in self.owner.values():
            b.cases = deque()
        self.n = 0
        return out

    def stats(self) -> dict:
        return {"policy": "affinity", "key": "op, variant, dtype", "buckets": self.buckets,
                "splits": self.splits}


def make(cases, jobs: int, policy: str = "affinity"):
    """The queue for ``jobs`` workers: affinity only pays with several workers (one worker meets
    every kernel anyway, and keeps the case order a single-worker run is read in)."""
    if policy == "affinity" and jobs > 1:
        return Affinity(cases)
    return InOrder(cases)
