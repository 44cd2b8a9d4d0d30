"""How far to trust a prediction: the measured error of the source of its inputs.

Why measured, not chosen: "too close to call" must mean "inside the error we have seen when this kind
of input was checked against real runs". Preset speedups were checked against every published
comparison the project keeps, per source class (InfiniBand, Ethernet, one node, a network from
nccl-tests: rtmodel_literature/speedup_evidence.py); a calibrated profile against real runs on the emulated
cluster (benchmarks/accuracy.py), one of ranks sharing a GPU against runs on GPU hosts
(benchmarks/gpu_accuracy_rescore.py). The figures are kept as data (preset_data/accuracy.toml) and
recomputed by the tests, so they cannot drift from the model.

Why two figures: the interval held out (held_out.py: the worst error seen, widened until each run left
out in turn lies inside what the others state, in 90 % of its checks) is the verdict's; the mean error the
margin inside which two options are equivalent (a tie-break by consensus must not pick an option 40 %
slower).

Why on the speedup: the verdict is a ratio (topology vs All-Reduce), and a ratio's error is not the
error of either time (a compute error shared by both cancels; a link error in one does not). Each
source's error is measured on both: absolute times and predicted speedups; the margin is the latter.

Why composed: a profile measured at one shape and extrapolated, or one whose links were not measured
(a preset or a fitted line with a wide interval stands in), is less certain than the benchmark's
profiles, which were measured at the shape they predicted. `profile_margin` adds each such component's
own measured error, in quadrature, to the profile's.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache

from runtime_model.advice.held_out import MIN_SOURCES
from runtime_model.presets import preset_data
from runtime_model.presets.preset_types import INFINIBAND, ROCE, TCP

PRESETS, PROFILE = "presets", "profile"
# calibrated profiles whose ranks share a GPU (their intra-node link a copy through the host, kept as
# measured for a run on that host): checked on GPU hosts, where they err far more than on the emulated
# cluster (benchmarks/gpu_accuracy_rescore.py shared_gpu_evidence)
SHARED_GPU_PROFILE = "profile-shared-gpu"
# The source classes of an advice's inputs (source_class): each states its own margin.
IB_PRESET, ETHERNET_PRESET, ONE_NODE_PRESET, NCCL_TESTS = (
    "ib-preset",
    "ethernet-preset",
    "one-node-preset",
    "nccl-tests",
)
# a network from nccl-tests with the compute backed out of your measured DDP step (--step-ms): its checks
# are the nccl-tests class's clusters advised with the step in place of the measured compute
NCCL_TESTS_STEP = "nccl-tests-step"


@dataclass(frozen=True)
class MeasuredError:
    """The mean and max |relative error| of predictions from one kind of input, and what was compared:
    on absolute iteration times and on predicted speedups over All-Reduce."""

    mean_abs_error: float
    max_abs_error: float
    predictions: int
    source: str
    # on speedups (the profile's; the presets' are per source class: SpeedupEvidence)
    speedup_mean_abs_error: float | None = None
    speedup_max_abs_error: float | None = None
    speedups: int | None = None
    # the speedup interval held out over its sources (held_out.py: each emulated cluster or GPU-host
    # configuration left out in turn)
    speedup_interval: float | None = None
    speedup_held_out_factor: float | None = None
    speedup_held_out_coverage: float | None = None
    speedup_sources: int | None = None

    def evidence(self, name: str, interval: float) -> dict:
        """What stands behind a profile's interval, for the JSON (Margin.evidence): this kind's speedup
        evidence, with the interval the profile composed from it (profile_margin)."""
        speedups = SpeedupEvidence(
            self.speedup_mean_abs_error,
            self.speedup_max_abs_error,
            self.speedups,
            self.source,
            self.speedup_interval,
            self.speedup_held_out_factor,
            self.speedup_held_out_coverage,
            self.speedup_sources,
        )
        return speedups.evidence(name) | {"interval": interval}


@cache
def _accuracy() -> dict:
    return tomllib.loads(preset_data.read_text("accuracy.toml"))


@cache
def measured_errors() -> dict[str, MeasuredError]:
    return {kind: MeasuredError(**_accuracy()[kind]) for kind in (PRESETS, PROFILE, SHARED_GPU_PROFILE)}


@dataclass(frozen=True)
class SpeedupEvidence:
    """The published speedups over All-Reduce of one source class the project keeps, and how far the
    predictions from such inputs missed them (rtmodel_literature/speedup_evidence.py recomputes these):
    the mean and worst |error|, and the interval held out (held_out.py): the worst widened until each run
    left out in turn falls inside what the other runs state, in held_out_coverage of its checks."""

    mean_abs_error: float
    max_abs_error: float
    speedups: int
    source: str
    interval: float | None = None  # None: fewer than MIN_SOURCES runs to hold one out against
    held_out_factor: float | None = None
    held_out_coverage: float | None = None
    sources: int = 1

    def states_its_own(self) -> bool:
        return self.interval is not None and self.sources >= MIN_SOURCES and self.speedups >= MIN_OWN_CHECKS

    def evidence(self, name: str) -> dict:
        """What stands behind the interval, named `name`, for the JSON (Margin.evidence)."""
        return {
            "class": name,
            "interval": self.interval,
            "mean_abs_error": self.mean_abs_error,
            "worst_abs_error": self.max_abs_error,
            "checks": self.speedups,
            "sources": self.sources,
            "held_out_coverage": self.held_out_coverage,
            "held_out_factor": self.held_out_factor,
            "from": self.source,
        }


@cache
def speedup_evidence() -> dict[str, SpeedupEvidence]:
    return {cls: SpeedupEvidence(**entry) for cls, entry in _accuracy()["speedups"].items()}


# A class states its own interval only from this many checks of its own, from MIN_SOURCES runs or more:
# the worst of k exchangeable errors covers the next one with probability k / (k + 1), so 9 checks make a
# 90 % promise at best; a class with fewer borrows the interval pooled over every preset class.
MIN_OWN_CHECKS = 9
CLASS_NAMES = {
    IB_PRESET: "InfiniBand-preset",
    ETHERNET_PRESET: "Ethernet-preset",
    ONE_NODE_PRESET: "one-node-preset",
    NCCL_TESTS: "nccl-tests-network",
    NCCL_TESTS_STEP: "nccl-tests-network-and-DDP-step",
    PRESETS: "preset",
}
# Which source class a preset network's declared fabric (networks.toml `fabric`) puts an answer in: RoCE
# runs NCCL's IB verbs transport, but over Ethernet switches, and its published checks are Ethernet ones.
FABRIC_CLASS = {INFINIBAND: IB_PRESET, ROCE: ETHERNET_PRESET, TCP: ETHERNET_PRESET}


@dataclass(frozen=True)
class Margin:
    """What the advisor states for one source of inputs. `equivalence`: the typical (mean) speedup
    error, inside which two options are equivalent; `interval`: the held-out speedup error, so that a
    published speedup s_pub lies in s / (1 + interval) .. s / (1 - interval) (held_out.py);
    `evidence`: what stands behind the interval, for the JSON (None: given, not measured)."""

    equivalence: float
    interval: float
    why: str
    evidence: dict | None = None


def source_class(scenario, stepped: bool = False) -> str:
    """The source class of a preset-built scenario: one node, a network from nccl-tests (with its compute
    backed out of your DDP step where `stepped`: --step-ms), or the class of the preset network's declared
    fabric (FABRIC_CLASS); PRESETS for a network of undeclared fabric."""
    if scenario.shape.nodes == 1:
        return ONE_NODE_PRESET
    inter = scenario.network.inter
    if inter.source.startswith("nccl-tests"):
        return NCCL_TESTS_STEP if stepped else NCCL_TESTS
    return FABRIC_CLASS.get(inter.fabric, PRESETS)


def class_margin(cls: str) -> Margin:
    """The margin a preset-built (or nccl-tests) advice states: its class's own held-out interval where
    it has the evidence for one (SpeedupEvidence.states_its_own), else the pooled preset classes'."""
    evidence = speedup_evidence()
    own, pooled = evidence.get(cls), evidence[PRESETS]
    used = own if own is not None and own.states_its_own() else pooled
    name = CLASS_NAMES[cls]
    widened = "" if used.held_out_factor == 1.0 else f", widened x{used.held_out_factor:.2f}"
    why = (
        f"±{used.interval:.1%} on the speedup: the worst error of {used.speedups} "
        f"{CLASS_NAMES[PRESETS] if used is pooled else name} speedups over All-Reduce from {used.sources} "
        f"runs ({used.source}){widened}; each run left out in turn, the others' interval held "
        f"{used.held_out_coverage:.0%} of its checks; mean {used.mean_abs_error:.1%}"
    )
    if used is pooled and cls != PRESETS:
        mine = "none" if own is None else f"{own.speedups} from {own.sources} runs"
        why += (
            f"; {name} checks of its own: {mine}, fewer than {MIN_OWN_CHECKS} from {MIN_SOURCES} runs, so "
            "all presets' figures stand in"
        )
    if cls == PRESETS:
        why += "; the network's fabric is not declared (networks.toml `fabric`), so no class of its own"
    return Margin(used.mean_abs_error, used.interval, why, used.evidence(name))


@dataclass(frozen=True)
class MarginPart:
    """One component of a composed margin: what it covers and its relative error on the speedup."""

    what: str
    error: float


def combined(parts: list[MarginPart]) -> float:
    """Independent relative errors add in quadrature."""
    return sum(p.error**2 for p in parts) ** 0.5


def profile_margin(
    target_gpus: int,
    measured_gpus: int,
    links_used: dict[str, tuple[bool, float]],
    worst: bool = False,
    shared_gpu: bool = False,
) -> tuple[float, list[MarginPart]]:
    """The margin of profile-based advice at `target_gpus` and its parts: with `worst` the interval's
    (each part's held-out interval), else the equivalence's (each part's mean).

    links_used: for each link class the target shape uses ("intra", "inter"), (measured?, the fit's
    relative 1-sigma on bandwidth). The parts:
    - the calibrated profiles' measured speedup error (at the shape they were measured at): with
      `shared_gpu` (ranks sharing a GPU, validated on that host) that of such profiles on GPU hosts;
    - a link the profile did not measure: the presets' measured speedup error (a preset stands in);
    - a measured link whose fit is wider than that: the fit's own interval;
    - a target larger than the measured shape: the largest speedup error the profiles showed at their
      own shapes (the benchmark has no extrapolated runs, so the worst seen is the honest figure)."""
    prof, pre = measured_errors()[SHARED_GPU_PROFILE if shared_gpu else PROFILE], speedup_evidence()[PRESETS]
    base = prof.speedup_interval if worst else prof.speedup_mean_abs_error
    stand_in = pre.interval if worst else pre.mean_abs_error
    what = (
        "of ranks sharing a GPU (gloo through the host), on that host"
        if shared_gpu
        else "at its measured shape"
    )
    parts = [MarginPart(f"calibrated profile {what}", base)]
    for cls, (measured, rel_sd) in sorted(links_used.items()):
        if not measured:
            parts.append(MarginPart(f"{cls}-node link from a preset, not measured", stand_in))
        elif rel_sd > base:
            parts.append(MarginPart(f"{cls}-node link measured, its fit's 1-sigma", rel_sd))
    if target_gpus > measured_gpus:
        parts.append(
            MarginPart(f"extrapolated from {measured_gpus} to {target_gpus} GPUs", prof.speedup_interval)
        )
    return combined(parts), parts


def describe_parts(parts: list[MarginPart]) -> str:
    return "; ".join(f"{p.what} ±{p.error:.1%}" for p in parts)


def speedup_uncertainty(best, ar, ar_sd: float, margin: float) -> float:
    """Relative uncertainty of a predicted speedup (`best`: an advisor.TopologyRow, `ar`: All-Reduce's
    prediction): the measured error of speedups from these inputs (`margin`) plus the inputs' stated
    1-sigma of both predictions."""
    stated = ((best.uncertainty_s / best.prediction.mean_s) ** 2 + (ar_sd / ar.mean_s) ** 2) ** 0.5
    return margin + stated


def speedup_interval(speedup: float, error: float) -> tuple[float, float]:
    """Where the true speedup lies if the prediction errs by at most `error`, the error measured as
    predicted / true - 1 (rtmodel_literature/speedup_evidence.py): speedup / (1 + e) .. speedup / (1 - e)."""
    return speedup / (1.0 + error), (speedup / (1.0 - error) if error < 1.0 else math.inf)


def interval_text(low: float, high: float) -> str:
    return f"{low:.2f}x..{high:.2f}x" if math.isfinite(high) else f"at least {low:.2f}x"
