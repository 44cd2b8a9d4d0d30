"""Every published speedup over All-Reduce the project keeps, sorted by the source class of the inputs
the advisor would have had: the evidence behind its stated margin per class (runtime_model/advice/confidence.py,
preset_data/accuracy.toml; tests/test_speedup_evidence.py recomputes the kept figures from here).

Why by class: an InfiniBand preset, an Ethernet preset and a calibrated profile miss by different
amounts, so one pooled figure overstates one and understates another. Each check gives only what a user
knows beforehand (the cluster preset, the model, the batch, one GPU's step where the source gives one);
none is a target: nothing is fitted to a row.

Kept:
- the paper's Figure 6 (Decent-DP's one-peer-exp and alternating-exp-ring, and the SGP column against
  SGP as its code runs it, `sgp-exp`): InfiniBand presets (t4-ib100, a100-ib100);
- BlueFog's 128-V100 page (16 x p3.16xlarge, 25 GbE): BlueFog's neighbor_allreduce over Horovod, the
  ratio of the two published scaling efficiencies: an Ethernet preset.
The other published checks (DeepLearningExamples' one-node scaling, PyTorch's DDP benchmark, the DiLoCo
tables) publish no speedup of a decentralized option over All-Reduce.
"""

from __future__ import annotations

from dataclasses import dataclass

from rtmodel_literature.paper import COLUMNS, paper_advice, published
from rtmodel_literature.published_runs import bluefog_efficiency
from runtime_model.advice.confidence import ETHERNET_PRESET, IB_PRESET
from runtime_model.advice.held_out import leave_one_source_out

PAPER_TOPOLOGIES = {**{v: k for k, v in COLUMNS.items() if v != "allreduce"}, "sgp-exp": "sgp_exp_ms"}


@dataclass(frozen=True)
class SpeedupCheck:
    """One published speedup over All-Reduce beside the advisor's prediction from a preset."""

    source_class: str
    case: str
    method: str
    published_x: float
    predicted_x: float

    @property
    def error(self) -> float:
        """predicted / published - 1: the published speedup is predicted / (1 + error)."""
        return self.predicted_x / self.published_x - 1.0


def paper_checks() -> list[SpeedupCheck]:
    """Figure 6's speedups: every gossip column over the paper's All-Reduce at the same size."""
    checks = []
    for rec in published().itertuples():
        adv = paper_advice(rec, list(PAPER_TOPOLOGIES))
        rows = {r.topology: r.prediction.mean_s for r in adv.rows if r.applicable}
        for topology, column in PAPER_TOPOLOGIES.items():
            checks.append(
                SpeedupCheck(
                    IB_PRESET,
                    f"paper figure 6, {rec.cluster} x {rec.gpus}",
                    topology,
                    rec.allreduce_ms / getattr(rec, column),
                    adv.allreduce.mean_s / rows[topology],
                )
            )
    return checks


def bluefog_checks() -> list[SpeedupCheck]:
    """BlueFog over Horovod on 128 V100 over 25 GbE: the ratio of the published efficiencies ("over 95 %"
    and "around 66 %") against the ratio of the predicted ones (one GPU's step cancels)."""
    horovod, bluefog = bluefog_efficiency()
    return [
        SpeedupCheck(
            ETHERNET_PRESET,
            bluefog.case,
            "bluefog-dynamic-exp",
            bluefog.published / horovod.published,
            bluefog.predicted / horovod.predicted,
        )
    ]


def all_checks() -> list[SpeedupCheck]:
    return paper_checks() + bluefog_checks()


@dataclass(frozen=True)
class ClassError:
    """The speedup errors of one source class: what its margin states (confidence.SpeedupEvidence), the
    interval held out over its runs (a check's `case`: held_out.py) where it has two runs or more."""

    mean_abs_error: float
    max_abs_error: float
    speedups: int
    sources: int
    interval: float | None
    held_out_factor: float | None
    held_out_coverage: float | None


def class_errors(checks: list[SpeedupCheck]) -> dict[str, ClassError]:
    """Per source class, and pooled over every preset class ("presets": the stand-in where a class has
    too little evidence of its own)."""
    groups: dict[str, list[tuple[str, float]]] = {}
    for c in checks:
        groups.setdefault(c.source_class, []).append((c.case, c.error))
        groups.setdefault("presets", []).append((c.case, c.error))
    return {k: class_error(v) for k, v in groups.items()}


def class_error(errors: list[tuple[str, float]]) -> ClassError:
    """One class's figures from its (source, error) checks."""
    flat = [abs(e) for _, e in errors]
    sources = len({name for name, _ in errors})
    held = leave_one_source_out(errors) if sources >= 2 else None
    return ClassError(
        sum(flat) / len(flat),
        max(flat),
        len(flat),
        sources,
        None if held is None else held.interval,
        None if held is None else held.factor,
        None if held is None else held.coverage,
    )
