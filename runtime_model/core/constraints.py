"""Declared value constraints: the check and its message come from one object, so they cannot drift.

In the spirit of scikit-learn's `Interval(Real, 0, 1, closed="right")`:

    MFU = Interval(0.0, 1.0, closed="right")
    MFU.check("mfu", value)   # raises InvalidValue("mfu", "in (0, 1]", value) when outside
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from runtime_model.core.errors import InvalidValue

Closed = Literal["both", "left", "right", "neither"]


def _fmt(x: float) -> str:
    """An int bound as written (1048576, not 1.04858e+06); a float one short (0.01, 1e+06)."""
    return str(x) if isinstance(x, int) else f"{x:g}"


@dataclass(frozen=True)
class Interval:
    """A range of real numbers; `None` is an open end. NaN is always outside; infinity only when no
    upper bound is given and `finite` is False."""

    low: float | None = None
    high: float | None = None
    closed: Closed = "both"
    integer: bool = False
    finite: bool = True

    def contains(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, int) and not -1e308 < value < 1e308:  # beyond a float: no input's value
            return False
        if self.integer and not (isinstance(value, int) or float(value).is_integer()):
            return False
        if math.isnan(value) or (self.finite and math.isinf(value)):
            return False
        if self.low is not None:
            if value < self.low or (value == self.low and self.closed in ("right", "neither")):
                return False
        if self.high is not None:
            if value > self.high or (value == self.high and self.closed in ("left", "neither")):
                return False
        return True

    def describe(self) -> str:
        """The requirement in words: 'an integer >= 1', 'in (0, 1]', 'a number > 0'."""
        what = "an integer" if self.integer else ("a finite number" if self.finite else "a number")
        left_closed = self.closed in ("both", "left")
        right_closed = self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            text = f"in {'[' if left_closed else '('}{_fmt(self.low)}, {_fmt(self.high)}{']' if right_closed else ')'}"
            return f"an integer {text}" if self.integer else text
        if self.low is not None:
            return f"{what} {'>=' if left_closed else '>'} {_fmt(self.low)}"
        if self.high is not None:
            return f"{what} {'<=' if right_closed else '<'} {_fmt(self.high)}"
        return what

    def check(self, name: str, value, error: type[InvalidValue] = InvalidValue):
        """`value` unchanged when inside; else `error` (an InvalidValue) naming `name` and this requirement."""
        if not self.contains(value):
            if isinstance(value, int) and not isinstance(value, bool) and not -1e308 < value < 1e308:
                raise error(name, f"{self.describe()} (and within a float's range)", _Digits(value))
            raise error(name, self.describe(), value)
        return value


class _Digits(int):
    """An integer too long to print whole in a refusal: shown by its number of digits."""

    def __repr__(self) -> str:
        return f"an integer of {len(str(abs(int(self))))} digits"


# Iterations a measuring run times (profile, validate): their figures settle within tens (the accuracy
# benchmark times 40); 10^5 at 100 ms each is three hours, and 2^63 never ends.
MAX_RUN_ITERATIONS = 100_000
# A measuring run's defaults, one for `rtmodel profile` and `rtmodel validate` alike (the flags are declared
# once, rtmodel_cli.run_options): timed iterations, and untimed ones first. The warm-up is validate's 5, not
# the profile's former 3: the larger is the safer (cuDNN autotuning, the allocator, DDP's bucket rebuild and
# Decent-DP's bucket set-up all happen in the first iterations); `profile --quick` keeps 5 and 1.
RUN_ITERATIONS = 20
RUN_WARMUP = 5
# DDP's and Decent-DP's bucket cap in MiB: above 0, and below a terabyte (inf overflowed in the ranks).
BUCKET_CAP_MIB_RANGE = Interval(0.0, 1e6, closed="neither")
# A user's own presets are bounded as the flags are (a GPU of 1e-300 TFLOP/s printed 300-digit times):
# dense peak TFLOP/s of one accelerator, from an old laptop GPU's 0.01 to 100,000 (B200's densest peak is
# ~9,000); memory bandwidth in GB/s up to 100,000 (H200: 4,800; B200: 8,000); a link's Gbit/s from
# 0.001 (1 Mbit/s) to 100,000 (NVLink 5 carries 14,400 per GPU); a latency in us up to a second.
PEAK_TFLOPS = Interval(0.01, 1e5, closed="both")
# A model's parameters: data parallelism keeps a whole replica on every GPU (1e11 fp32 gradients are 400 GB).
MAX_PARAMS = 1e11
PARAMS_RANGE = Interval(1, MAX_PARAMS, closed="both", integer=True)
MEMORY_BANDWIDTH_GBPS = Interval(1.0, 1e5, closed="both")
MEMORY_GIB = Interval(0.1, 1e5, closed="both")
# activations per GPU a user states (advise --activation-gib): none to the largest GPU memory bound above
ACTIVATION_GIB = Interval(0.0, 1e5, closed="both")
LINK_GBPS = Interval(1e-3, 1e5, closed="both")
LATENCY_US = Interval(0.0, 1e6, closed="both")
LAUNCH_US = Interval(0.0, 1e4, closed="both")
POSITIVE = Interval(0.0, None, closed="neither")
NON_NEGATIVE = Interval(0.0, None, closed="left")
FRACTION = Interval(0.0, 1.0, closed="both")
POSITIVE_FRACTION = Interval(0.0, 1.0, closed="right")
AT_LEAST_ONE = Interval(1, None, closed="left", integer=True)
# A rate gain over one operation's (Network.group_concurrency): 1 or more, finite.
GAIN = Interval(1.0, None, closed="left", finite=True)
# Inter-node NICs per node: the most any published GPU node exposes is 32 (AWS p5.48xlarge: 32 EFA network
# cards for 8 H100s); 64 leaves room for the next generation, and 2^63 NICs is a typo, not a node.
NICS_PER_NODE = Interval(1, 64, closed="both", integer=True)
# A global batch the user gives is counted in whole samples or tokens: 64.5 images is a typo.
WHOLE_BATCH = Interval(0, None, closed="neither", integer=True, finite=True)
# Model-FLOPs utilisation: the fraction of peak FLOP/s a training run turns into model FLOPs. Published
# MFU of real training runs lies between ~0.05 (small models, slow links) and ~0.7 (tuned large-model
# runs; PaLM 540B reports 0.46). 0.01 is below all of them; under it "compute time" is an artefact of the
# input (MFU 1e-300 gives 300-digit times and a verdict), not a prediction. 1 = the GPU's peak.
MFU = Interval(0.01, 1.0, closed="both")
# Padding efficiency: the share of a batch's token slots that hold real tokens (a batch of sentences is padded
# to its longest; the GPU computes on every slot). 1 = no padding (fixed-length sequences). Token-budget
# samplers keep it far above 0.05 (the paper's authors' DistributedTokenBatchSampler cuts a batch below 0.35,
# fairseq's buckets are tighter still); under 0.05 (20 padded slots per real token) it is an input mistake.
PADDING_EFFICIENCY = Interval(0.05, 1.0, closed="both")
# Coefficient of variation of per-iteration compute: 0 (every iteration takes the same time) is a
# meaningful input; a standard deviation above the mean would make negative compute times common.
COMPUTE_CV = FRACTION
# A measured training step in ms: a CUDA kernel launch alone takes microseconds, so a step under 1 us is
# an input mistake, and one over a day (86,400,000 ms) overflows nothing yet means nothing either (a
# 1e300 ms step ended in NaN verdicts). The optimizer step may be 0 (folded into backward).
COMPUTE_MS = Interval(1e-3, 8.64e7, closed="both")
OPTIMIZER_MS = Interval(0.0, 8.64e7, closed="both")
# Your measured DDP iteration (advise --step-ms): bounded as a measured compute is, for the same reasons.
STEP_MS = COMPUTE_MS
# A host's dispatch cost per kernel-launching op of eager PyTorch in us (profiler.opcount --dispatch):
# a fast host measures a few us, a slow or loaded VM tens; under 0.1 us no host issues an op, and over
# 10 ms per op is a unit mix-up (ms or s for us), not a host.
DISPATCH_US = Interval(0.1, 1e4, closed="both")
# Global batch in units (tokens, images): the largest published ones are ~1.6e7 tokens (Llama 3 405B,
# 16M tokens per step); 1e10 leaves three orders of magnitude above them, and past it a time is an
# artefact of the input (1e300 tokens printed 300-digit times and overflowed the variance).
GLOBAL_BATCH = Interval(0.0, 1e10, closed="right")
