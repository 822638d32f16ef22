"""The brute-force model the runtime tests check against: which earlier tasks a task must wait
for (language.md section 6: RAW, WAR, WAW on overlapping boxes; order scopes), over all pairs."""

from __future__ import annotations

from dataclasses import dataclass, field

WRITE = 2


@dataclass
class ModelTask:
    accesses: list  # (tensor, mode, [(lo, hi), ...])
    scopes: list = field(default_factory=list)  # (scope instance, step) for each open scope


def overlap(b1, b2) -> bool:
    """Boxes share an element (an empty box shares none)."""
    return all(l1 < h1 and l2 < h2 and l1 < h2 and l2 < h1 for (l1, h1), (l2, h2) in zip(b1, b2))


def conflict(a: ModelTask, b: ModelTask) -> bool:
    return any(ta == tb and (ma | mb) & WRITE and overlap(ba, bb)
               for ta, ma, ba in a.accesses for tb, mb, bb in b.accesses)


def ordered(a: ModelTask, b: ModelTask) -> bool:
    steps = dict(a.scopes)
    return any(s in steps and steps[s] < step for s, step in b.scopes)


def must_wait(a: ModelTask, b: ModelTask) -> bool:
    """b (submitted after a) must not start before a has finished."""
    return conflict(a, b) or ordered(a, b)


def violations(tasks: list[ModelTask], times: list[tuple[int, int]]) -> list[str]:
    """Pairs (i, j), i < j, where j started before i finished although it must wait."""
    bad = []
    for j, (start_j, finish_j) in enumerate(times):
        if start_j <= 0 or finish_j <= start_j:
            bad.append(f"task {j} did not run (start {start_j}, finish {finish_j})")
            continue
        for i in range(j):
            if must_wait(tasks[i], tasks[j]) and not times[i][1] < start_j:
                bad.append(f"task {j} started at {start_j} before task {i} finished at "
                           f"{times[i][1]}")
    return bad


class ScopeTracker:
    """Mirrors wsp_order_push/next/pop to give each task its (scope, step) list."""

    def __init__(self):
        self.stack: list[list[int]] = []
        self.count = 0

    def push(self):
        self.stack.append([self.count, 0])
        self.count += 1

    def next(self):
        self.stack[-1][1] += 1

    def pop(self):
        self.stack.pop()

    def current(self) -> list[tuple[int, int]]:
        return [(s, step) for s, step in self.stack]
