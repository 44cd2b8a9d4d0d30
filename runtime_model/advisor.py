"""The advisor: predict All-Reduce and every topology for one scenario, then give a verdict.

Why a margin: a prediction is only as good as the model's measured accuracy (README, accuracy
benchmark) and the inputs' uncertainty; a win smaller than that is reported as too close to call.
The same margin makes options equivalent: everything is ranked on the MEAN iteration time (what
throughput follows), and a runnable option whose mean is within the margin of the fastest one's is
called equivalent to it (`standing`; the verdict names them), not slower.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from runtime_model.consensus import ConsensusMetrics
from runtime_model.defaults import MARGIN
from runtime_model.iteration import IterationPrediction, allreduce_prediction
from runtime_model.pending import run_pending
from runtime_model.reduced_system import topology_model
from runtime_model.scenario import Scenario
from runtime_model.topologies import TopologyNotApplicable, topology_info, topology_names


@dataclass(frozen=True)
class TopologyRow:
    topology: str
    applicable: bool
    reason: str | None
    prediction: IterationPrediction | None
    speedup: float | None
    consensus: ConsensusMetrics | None
    decent_dp_builtin: bool
    uncertainty_s: float = 0.0
    runnable: bool = True  # can Decent-DP run it (the model can predict more than Decent-DP can run)


@dataclass(frozen=True)
class Recommendation:
    topology: str
    speedup: float
    too_close_to_call: bool
    verdict: str
    code_line: str
    torchrun_line: str
    equivalent: tuple[str, ...] = ()  # runnable options whose mean is within the margin of the fastest one's


@dataclass(frozen=True)
class Advice:
    scenario: Scenario
    allreduce: IterationPrediction
    allreduce_uncertainty_s: float
    rows: list[TopologyRow]
    recommendation: Recommendation
    margin: float
    provenance: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def standing(self) -> dict[str, str]:
        """See `standing`."""
        return standing(self.allreduce.mean_s, self.rows, self.margin)


def within_margin(mean_s: float, best_mean_s: float, margin: float) -> bool:
    """Is a mean within the relative margin of the best mean (the advisor's equivalence)?"""
    return abs(mean_s - best_mean_s) <= margin * best_mean_s


def standing(allreduce_mean_s: float, rows: list[TopologyRow], margin: float) -> dict[str, str]:
    """'best' for the fastest runnable option by mean (All-Reduce included), 'equivalent' for every other
    runnable option whose mean is within the margin of it; options not named are neither."""
    means = {"allreduce": allreduce_mean_s}
    means.update({r.topology: r.prediction.mean_s for r in rows if r.applicable and r.runnable})
    best = min(means, key=means.get)
    out = {name: "equivalent" for name, m in means.items() if within_margin(m, means[best], margin)}
    out[best] = "best"
    return out


def _display(name: str) -> str:
    return "All-Reduce" if name == "allreduce" else name


def _with_equivalents(rec: Recommendation, ar: IterationPrediction, rows: list[TopologyRow], margin: float):
    """Add the options equivalent to the fastest (within the margin) to the recommendation and its verdict."""
    st = standing(ar.mean_s, rows, margin)
    same = tuple(name for name, s in st.items() if s == "equivalent")
    if not same:
        return rec
    means = {"allreduce": ar.mean_s, **{r.topology: r.prediction.mean_s for r in rows if r.prediction}}
    best = next(name for name, s in st.items() if s == "best")
    listed = ", ".join(f"{_display(n)} ({means[n] * 1e3:.1f} ms)" for n in same)
    are = "is equivalent: its mean is" if len(same) == 1 else "are equivalent: their means are"
    verdict = (
        f"{rec.verdict} {listed} {are} within the {margin * 100:g}% margin "
        f"of {_display(best)}'s ({means[best] * 1e3:.1f} ms)."
    )
    return replace(rec, verdict=verdict, equivalent=same)


def _uncertainty_s(scenario: Scenario, predict) -> float:
    """1-sigma of a prediction from the inputs' stated uncertainties (links), by finite differences."""
    net = scenario.network
    if not any(
        getattr(net, ln).bandwidth_rel_sd or getattr(net, ln).latency_sd_s for ln in ("intra", "inter")
    ):
        return 0.0
    base = predict(scenario).mean_s
    var = 0.0
    for link_name in ("intra", "inter"):
        link = getattr(net, link_name)
        for field_name, delta in (
            ("bandwidth_Bps", link.bandwidth_rel_sd * link.bandwidth_Bps),
            ("latency_s", link.latency_sd_s),
        ):
            if delta <= 0:
                continue
            bumped = replace(link, **{field_name: getattr(link, field_name) - delta})
            if field_name == "bandwidth_Bps" and bumped.bandwidth_Bps <= 0:
                continue
            s2 = replace(scenario, network=replace(net, **{link_name: bumped}, group_costs={}))
            var += (predict(s2).mean_s - base) ** 2
    return var**0.5


def torchrun_line(scenario: Scenario) -> str:
    shape = scenario.shape
    return (
        f"torchrun --nnodes {shape.nodes} --nproc-per-node {shape.gpus_per_node} "
        "--rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 train.py"
    )


def code_line(topology: str, builtin: bool) -> str:
    if topology == "allreduce":
        return "model = torch.nn.parallel.DistributedDataParallel(model)  # keep All-Reduce"
    line = (
        "model = DecentralizedDataParallel(model, optim_fn=lambda p: AccumAdam(p, lr=...), "
        f'topology="{topology}")'
    )
    if not builtin:
        line = (
            "import validation.decentdp_topologies  # registers rtmodel's schedules with Decent-DP\n" + line
        )
    return line


def advise(
    scenario: Scenario,
    margin: float = MARGIN,
    topologies: list[str] | None = None,
    provenance: dict[str, str] | None = None,
) -> Advice:
    """Predict every topology, rank them, and decide (or say it is too close to call)."""
    return advise_many([scenario], margin, topologies, provenance)[0]


def advise_many(
    scenarios: list[Scenario],
    margin: float = MARGIN,
    topologies: list[str] | None = None,
    provenance: dict[str, str] | None = None,
) -> list[Advice]:
    """`advise` for each scenario (a sweep's), their recurrences run together: the runs that share n and
    draws (every topology at one n; the reduced systems of every n above FULL_MAX_N) take one loop."""
    plans, pending = [], []
    for scenario in scenarios:
        ar = allreduce_prediction(scenario)
        models: dict[str, object] = {}
        for name in topologies or topology_names():
            try:
                models[name] = topology_model(name, scenario.shape)  # per rank up to FULL_MAX_N, else reduced
            except TopologyNotApplicable as exc:
                models[name] = exc
                continue
            pending.append(models[name].pending(scenario, ar))
        plans.append((scenario, ar, models))
    preds = iter(run_pending(pending))
    return [_advice(scenario, ar, models, preds, margin, provenance) for scenario, ar, models in plans]


def _advice(scenario: Scenario, ar: IterationPrediction, models: dict, preds, margin, provenance) -> Advice:
    """One scenario's Advice from its models and (the next of) the batch's predictions."""
    ar_sd = _uncertainty_s(scenario, allreduce_prediction)
    rows: list[TopologyRow] = []
    for name, model in models.items():
        builtin = topology_info(name).decent_dp_name is not None
        if isinstance(model, TopologyNotApplicable):
            rows.append(TopologyRow(name, False, str(model), None, None, None, builtin))
            continue
        pred = next(preds)
        sd = _uncertainty_s(scenario, lambda s, m=model: m.predict(s))
        rows.append(
            TopologyRow(
                name,
                True,
                reason=model.decent_dp_note,
                prediction=pred,
                speedup=ar.mean_s / pred.mean_s,
                consensus=model.consensus(),
                decent_dp_builtin=builtin,
                uncertainty_s=sd,
                runnable=model.decent_dp_runnable,
            )
        )
    rec = _with_equivalents(_recommend(scenario, ar, ar_sd, rows, margin), ar, rows, margin)
    return Advice(scenario, ar, ar_sd, rows, rec, margin, dict(provenance or {}))


def _recommend(scenario, ar, ar_sd, rows, margin) -> Recommendation:
    runnable = [r for r in rows if r.applicable and r.runnable]
    if not runnable:
        return Recommendation(
            "allreduce",
            1.0,
            False,
            "No decentralized topology fits this shape: keep All-Reduce.",
            code_line("allreduce", True),
            torchrun_line(scenario),
        )
    best = min(runnable, key=lambda r: r.prediction.mean_s)
    gain = (ar.mean_s - best.prediction.mean_s) / ar.mean_s
    noise = margin + ((best.uncertainty_s**2 + ar_sd**2) ** 0.5) / ar.mean_s
    too_close = abs(gain) <= noise
    if too_close:
        verdict = (
            f"Too close to call: {best.topology} is {gain:+.1%} vs All-Reduce, inside the model's "
            f"uncertainty (±{noise:.1%}). Keep All-Reduce unless a validation run says otherwise "
            "(rtmodel validate)."
        )
        return Recommendation(
            best.topology,
            best.speedup,
            True,
            verdict,
            code_line(best.topology, best.decent_dp_builtin),
            torchrun_line(scenario),
        )
    if gain < 0:
        verdict = (
            f"Keep All-Reduce: the best decentralized topology ({best.topology}) is "
            f"{-gain:.1%} slower per iteration."
        )
        return Recommendation(
            "allreduce", 1.0, False, verdict, code_line("allreduce", True), torchrun_line(scenario)
        )
    f = best.prediction.factors
    parts = sorted(
        (("overlap", f.overlap_s), ("heterogeneous links", f.links_s), ("variance", f.variance_s)),
        key=lambda kv: -abs(kv[1]),
    )
    why = ", ".join(f"{name} {val * 1e3:+.1f} ms" for name, val in parts)
    verdict = (
        f"Use {best.topology}: {best.speedup:.2f}x faster per iteration than All-Reduce "
        f"({best.prediction.mean_s * 1e3:.1f} ms vs {ar.mean_s * 1e3:.1f} ms); why: {why}."
    )
    return Recommendation(
        best.topology,
        best.speedup,
        False,
        verdict,
        code_line(best.topology, best.decent_dp_builtin),
        torchrun_line(scenario),
    )
