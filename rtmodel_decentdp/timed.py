"""Decent-DP with each bucket hook's own work timed: what runs on a rank between an exchange's end and
the next exchange's launch.

Why: in a communication-bound gossip iteration that work (wait for the neighbours' parameters, mix them
in, the bucket's optimizer step, stage and launch the next exchange) lies on the critical path after
every exchange, and it is slower than the bare optimizer step a profile times alone: the exchanges'
threads (gloo's, NCCL's proxy) and the other ranks compete with it for the host. `rtmodel profile`
runs a few wrapped iterations with this class to measure it (profiler/wrapped.py).
"""

from __future__ import annotations

import time

from decent_dp.ddp import DecentralizedDataParallel


class TimedDecentralizedDataParallel(DecentralizedDataParallel):
    """DecentralizedDataParallel recording, per iteration, the seconds its bucket hooks spent after their
    exchange had completed (`step_work_s`, one sum per forward), and how long they waited for it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.step_work_s: list[float] = []
        self.wait_s: list[float] = []
        self._work, self._wait = 0.0, 0.0

    def forward(self, *args, **kwargs):
        self.flush()
        return super().forward(*args, **kwargs)

    def flush(self) -> None:
        """Close the iteration whose hooks ran last (forward does it for the one before it)."""
        if self._work or self._wait:
            self.step_work_s.append(self._work)
            self.wait_s.append(self._wait)
        self._work, self._wait = 0.0, 0.0

    def _ddp_fn(self, grad, bucket_id: int):
        start = time.perf_counter()
        exchange = self._comm_ops[bucket_id]
        if exchange is not None and not self._is_grad_accum_enable:
            exchange.wait()  # the parent waits on it again: a completed work returns at once
        done = time.perf_counter()
        result = super()._ddp_fn(grad, bucket_id)
        self._wait += done - start
        self._work += time.perf_counter() - done
        return result
