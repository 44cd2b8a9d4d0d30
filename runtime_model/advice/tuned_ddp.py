"""All-Reduce as the user could run it with one DDP argument, and whether gossip still pays against it
(issue 50).

Why: part of gossip's predicted win over DDP is DDP's own copying of gradients into its buckets, which
`DistributedDataParallel(..., gradient_as_bucket_view=True)` removes (torch's DDP documentation: the
gradients become views into the buckets, saving the copy and its memory). A team should hear that
setting first, what it recovers, and whether the verdict holds against the tuned DDP. Both All-Reduce
predictions come from the same model (presets.iteration_work prices the copies, traffic.toml); a gossip
row does not depend on DDP's settings, so the rows are judged again against the tuned All-Reduce.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime_model.advice.advisor import Advice, Recommendation, recommend_against
from runtime_model.advice.run_lines import code_line
from runtime_model.core.scenario import Scenario
from runtime_model.prediction.iteration import allreduce_prediction
from runtime_model.prediction.link_uncertainty import uncertainty_s

BUCKET_VIEW = "gradient_as_bucket_view=True"


@dataclass(frozen=True)
class TunedDdp:
    """DDP today and with `setting`, the fastest runnable option's time, and the verdict against the tuned DDP."""

    setting: str
    today_s: float
    tuned_s: float
    best_s: float  # the fastest runnable decentralized option's mean iteration time
    best: str
    recommendation: Recommendation  # judged against the tuned DDP
    changes_verdict: bool

    @property
    def recovered_s(self) -> float:
        return self.today_s - self.tuned_s

    def head(self) -> str:
        """The setting and what it recovers of the gap to the fastest option."""
        gap = self.today_s - self.best_s
        share = f" of the {gap * 1e3:.1f} ms gap to the fastest, {self.best}" if gap > 0 else ""
        return (
            f"DDP's own {self.setting} takes All-Reduce from {self.today_s * 1e3:.1f} to {self.tuned_s * 1e3:.1f} ms "
            f"(recovers {self.recovered_s * 1e3:.1f} ms{share})"
        )

    def sentence(self) -> str:
        """The line under a verdict the setting does not change."""
        rec = self.recommendation
        holds = "All-Reduce" if rec.topology == "allreduce" else f"{rec.topology} {rec.speedup:.2f}x"
        return (
            f"DDP's {self.setting}: All-Reduce {self.tuned_s * 1e3:.1f} ms, not {self.today_s * 1e3:.1f}; "
            f"the verdict holds ({holds})."
        )

    def to_dict(self) -> dict:
        """The advice JSON's `tuned_ddp` (JSON_KEYS: its key -> this object's attribute)."""
        rec = self.recommendation
        return {
            **{key: getattr(self, attr) for key, attr in JSON_KEYS.items()},
            "recommendation": {"topology": rec.topology, "too_close_to_call": rec.too_close_to_call},
        }


# The advice JSON's keys for a TunedDdp, in their order (the document's names predate the fields').
JSON_KEYS = {
    "setting": "setting",
    "allreduce_today_s": "today_s",
    "allreduce_tuned_s": "tuned_s",
    "recovered_s": "recovered_s",
    "best": "best",
    "best_s": "best_s",
    "changes_verdict": "changes_verdict",
}


def tuned_ddp(advice: Advice, tuned_scenario: Scenario) -> TunedDdp | None:
    """DDP with the bucket view against `advice` (DDP as the user runs it); None where it recovers nothing
    or nothing decentralized can run."""
    runnable = [r for r in advice.rows if r.applicable and r.runnable and r.prediction is not None]
    tuned_ar = allreduce_prediction(tuned_scenario)
    if not runnable or tuned_ar.mean_s >= advice.allreduce.mean_s:
        return None
    fastest = min(runnable, key=lambda r: r.prediction.mean_s)
    rec = recommend_against(
        advice, tuned_ar, uncertainty_s(tuned_scenario, allreduce_prediction, tuned_ar.mean_s)
    )
    today = advice.recommendation
    changes = (rec.topology, rec.too_close_to_call) != (today.topology, today.too_close_to_call)
    return TunedDdp(
        BUCKET_VIEW,
        advice.allreduce.mean_s,
        tuned_ar.mean_s,
        fastest.prediction.mean_s,
        fastest.topology,
        rec,
        changes,
    )


def led_by_tuning(tuned_advice: Advice, tuned: TunedDdp) -> Advice:
    """The advice on the tuned scenario (every row against the tuned DDP), its verdict led by the setting
    and DDP's line carrying it where All-Reduce stays."""
    rec = tuned_advice.recommendation
    lead = replace(rec, verdict=f"Tune DDP first: {tuned.head()}. Against the tuned DDP: {rec.verdict}")
    if rec.topology == "allreduce":
        lead = replace(lead, code_line=code_line("allreduce", True, BUCKET_VIEW))
    return replace(tuned_advice, recommendation=lead, tuned_ddp=tuned)
