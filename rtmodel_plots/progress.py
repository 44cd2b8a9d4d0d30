"""Progress lines for figures that sweep several curves (issue 50): a panel of models x networks, or the
what-ifs, takes seconds to tens of seconds, and a notebook cell or `rtmodel plot` should say how far it
is. Silent for work shorter than AFTER_S, so quick figures and tests print nothing.
"""

from __future__ import annotations

import sys
import time

AFTER_S = 2.0  # no line before this much time has passed


class CurveProgress:
    """One line on stderr per finished curve once AFTER_S has passed: done/total, its label, time so far
    and about how much is left at the pace so far."""

    def __init__(self, total: int, what: str = "curves"):
        self.total, self.what, self.done = total, what, 0
        self.started_s = time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.started_s
        if elapsed < AFTER_S:
            return
        left = elapsed / self.done * (self.total - self.done)
        tail = f", about {left:.0f} s left" if self.done < self.total else ""
        print(
            f"  {self.done}/{self.total} {self.what} drawn ({label}): {elapsed:.0f} s{tail}",
            file=sys.stderr,
            flush=True,
        )
