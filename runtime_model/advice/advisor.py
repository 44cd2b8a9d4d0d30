"""The advisor: predict All-Reduce and every topology for one scenario, then give a verdict.

Why a margin: a prediction is only as good as the model's measured accuracy (accuracy benchmark,
docs/accuracy.md) and the inputs' uncertainty; a win smaller than that is reported as too close to call.
The verdict is a speedup, so the margin is the measured error of predicted *speedups* (confidence.py).
The same margin makes options equivalent: options are ranked on the MEAN iteration time (what
throughput follows), and a runnable option whose mean is within the margin of the fastest one's is
equivalent to it per iteration (`standing`; the verdict names them), not slower. Among equivalent
options the pick is the one whose models agree best (convergence.py): inside the model's accuracy,
consensus decides, not 0.03 ms. `--objective accuracy` ranks by time to the same loss instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from runtime_model.advice.confidence import Margin, interval_text, speedup_interval, speedup_uncertainty
from runtime_model.advice.families import (
    ACCURACY,
    ITERATION,
    FamilyBest,
    LocalSgdRow,
    family_candidates,
    family_verdict,
    local_sgd_rows,
    sharded_replica_configs,
)
from runtime_model.advice.run_lines import code_line, torchrun_line, validate_line
from runtime_model.convergence.consensus import ConsensusMetrics
from runtime_model.convergence.consensus_cost import (
    EXACT,
    EXACT_COST,
    HOPELESS,
    MEASURED,
    ConsensusCost,
    consensus_cost,
)
from runtime_model.core.defaults import MARGIN
from runtime_model.core.errors import InvalidValue
from runtime_model.core.scenario import Scenario
from runtime_model.prediction.iteration import IterationPrediction, allreduce_prediction
from runtime_model.prediction.link_bytes import gossip_nic_bytes
from runtime_model.prediction.link_uncertainty import uncertainty_s
from runtime_model.prediction.local_sgd import LocalSgd
from runtime_model.prediction.topology_predictions import predict_many
from runtime_model.topology.registry import TopologyNotApplicable, topology_info

LOCAL_SGD_PROVENANCE = (
    "runtime_model/prediction/local_sgd.py on the same compute, links and all-reduce as the other rows (DiLoCo, "
    "arXiv 2311.08105; Streaming DiLoCo, arXiv 2501.18512); its loss from Charles et al. 2025, arXiv "
    "2503.09799 (runtime_model/prediction/local_sgd_convergence.py)"
)
SHOWN_FACTOR_S = 0.05e-3  # the verdict prints ms to one decimal: a smaller part would read "+0.0 ms"
OBJECTIVES = (ITERATION, ACCURACY)
RANKED_BY = {
    ITERATION: "ranked by time per iteration (--objective iteration), ties inside the margin by consensus",
    ACCURACY: "ranked by time to the same loss (--objective accuracy): options known to keep All-Reduce's "
    "iterations first, hopeless consensus never",
}


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
    convergence: ConsensusCost = EXACT_COST  # what its consensus costs in iterations (convergence.py)
    library: str = "Decent-DP"  # what runs it (exchange.py): Decent-DP, SGP, BlueFog
    # bytes through the busiest NIC per iteration (link_bytes.py); None above symmetry.FULL_MAX_N, where
    # the model answers on a reduced system and no full schedule is built
    nic_bytes_per_iteration: float | None = None
    memory: object = None  # memory.accounting.MemoryUse per rank where memory was asked (memory_fit.py)

    @property
    def fits(self) -> bool:
        """Not known not to fit in one GPU's memory (activations unknown: the states alone are judged)."""
        return self.memory is None or self.memory.fits is not False


@dataclass(frozen=True)
class Recommendation:
    topology: str
    speedup: float
    too_close_to_call: bool
    verdict: str
    code_line: str
    torchrun_line: str
    equivalent: tuple[str, ...] = ()  # runnable options whose mean is within the margin of the fastest one's
    # with too_close_to_call: the decentralized option a validation run should try
    candidate: str | None = None
    on_network: bool = False  # too close because a preset network's doubt would flip it (crossover.py)

    @property
    def named(self) -> str:
        """The option the verdict names: the pick, or the candidate of a too-close verdict (the one it
        says to validate). Every view names this one (table marks, verdict, crossover line, --brief, JSON)."""
        return self.candidate if self.too_close_to_call and self.candidate else self.topology


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
    objective: str = ITERATION
    local_sgd: list[LocalSgdRow] = field(default_factory=list)  # the third family (families.py)
    families: list[FamilyBest] = field(default_factory=list)  # each family's best, in the objective's order
    # where the pick's speedup over All-Reduce crosses 1 (crossover.py); filled by with_crossovers
    crossovers: list = field(default_factory=list)
    # tuned_ddp.TunedDdp: All-Reduce with DDP's own setting; filled by with_tuned_ddp
    tuned_ddp: object = None
    # the held-out speedup error of this source (confidence.Margin.interval, None: `margin` serves both)
    # and what stands behind it (Margin.evidence: class, checks, runs, held-out coverage)
    interval_margin: float | None = None
    interval_evidence: dict | None = None
    # the All-Reduce family's rows with their memory (memory_fit.BaselineRow: DDP first, then the sharded
    # baselines); empty where memory was not asked
    baselines: list = field(default_factory=list)
    # the row `allreduce` is: "ddp", or the fastest sharded baseline that fits where DDP does not
    baseline: str = "ddp"
    memory: object = None  # memory_fit.MemoryQuestion the rows' memory was computed from

    @property
    def verdict_margin(self) -> float:
        return self.margin if self.interval_margin is None else self.interval_margin

    @property
    def family_verdict(self) -> str:
        """Across All-Reduce, gossip and local SGD (families.py); "" without local-SGD rows."""
        too_close = self.recommendation.too_close_to_call
        return family_verdict(self.families, self.objective, too_close) if self.local_sgd else ""

    def standing(self) -> dict[str, str]:
        """The "vs best" marks of every view (marks): 'best' on the option the verdict names."""
        return marks(self.allreduce.mean_s, self.rows, self.margin, self.recommendation.named, self.objective)


def check_objective(objective: str) -> str:
    """`objective` if it is one of OBJECTIVES, else an InvalidValue naming the choices (the shell shows
    it as --objective, or as the scenario file's key)."""
    if objective not in OBJECTIVES:
        raise InvalidValue("objective", f"one of {', '.join(OBJECTIVES)}", objective)
    return objective


def within_margin(mean_s: float, best_mean_s: float, margin: float) -> bool:
    """Is a mean within the relative margin of the best mean (the advisor's equivalence)?"""
    return abs(mean_s - best_mean_s) <= margin * best_mean_s


def _consensus_key(row: TopologyRow) -> tuple[float, float]:
    """Ties inside the margin go to the better consensus, then to the faster mean (module doc)."""
    return (row.convergence.transient_ratio, row.prediction.mean_s)


def pick(rows: list[TopologyRow], margin: float, objective: str = ITERATION) -> TopologyRow | None:
    """The decentralized option to recommend, or None where none may be.

    ITERATION: the fastest mean, except that among the options within the margin of it the one with the
    best consensus is taken (a 0.03 ms gap inside a 30 % margin must not choose a ring of 1,024).
    ACCURACY (time to the same loss): hopeless consensus is never picked; options known to keep
    All-Reduce's iterations (exact, or within what was measured) are ranked before extrapolated ones,
    since only theirs is a known time to the same loss; then as ITERATION."""
    pool = ranked_pool(rows, objective)
    if not pool:
        return None
    fastest_s = min(r.prediction.mean_s for r in pool)
    tied = [r for r in pool if within_margin(r.prediction.mean_s, fastest_s, margin)]
    return min(tied, key=_consensus_key)


def ranked_pool(rows: list[TopologyRow], objective: str = ITERATION) -> list[TopologyRow]:
    """The decentralized rows the objective ranks: every runnable one; for ACCURACY never a hopeless
    consensus, and only those known to keep All-Reduce's iterations where any is (pick's doc)."""
    pool = [r for r in rows if r.applicable and r.runnable and r.fits]
    if objective == ACCURACY:
        pool = [r for r in pool if r.convergence.kind != HOPELESS]
        pool = [r for r in pool if r.convergence.kind in (EXACT, MEASURED)] or pool
    return pool


def standing(
    allreduce_mean_s: float,
    rows: list[TopologyRow],
    margin: float,
    best: str | None = None,
    objective: str = ITERATION,
) -> dict[str, str]:
    """'best' for the recommended option (`best`; by default the fastest ranked mean, All-Reduce
    included), 'equivalent' for every other option the objective ranks (ranked_pool) whose mean is within
    the margin of the fastest of them; options not named are neither (under ACCURACY a row whose time to
    the loss is not known is never marked beside one that is: issue 50)."""
    means = {"allreduce": allreduce_mean_s}
    means.update({r.topology: r.prediction.mean_s for r in ranked_pool(rows, objective)})
    fastest = min(means, key=means.get)
    best = fastest if best not in means else best
    out = {name: "equivalent" for name, m in means.items() if within_margin(m, means[fastest], margin)}
    out[best] = "best"
    return out


def marks(
    allreduce_mean_s: float, rows: list[TopologyRow], margin: float, named: str, objective: str = ITERATION
) -> dict[str, str]:
    """The "vs best" marks: 'best' on the option the verdict names where its mean is within the margin of
    the fastest ranked option's, else on the fastest. Why: a row marked best is then never slower, beyond
    the margin, than one marked equivalent (All-Reduce kept by a too-close verdict, 35 % slower: issue
    64), and the table, the verdict, the crossover line, --brief and the JSON name one option."""
    by_speed = standing(allreduce_mean_s, rows, margin, None, objective)
    best = named if named in by_speed else next(n for n, mark in by_speed.items() if mark == "best")
    return standing(allreduce_mean_s, rows, margin, best, objective)


def _display(name: str) -> str:
    return "All-Reduce" if name == "allreduce" else name


def _with_equivalents(
    rec: Recommendation, ar: IterationPrediction, rows: list[TopologyRow], margin: float, objective: str
):
    """Add the options equivalent to the pick (within the margin of the fastest the objective ranks)."""
    st = marks(ar.mean_s, rows, margin, rec.named, objective)
    same = tuple(name for name, s in st.items() if s == "equivalent")
    if not same:
        return rec
    means = {"allreduce": ar.mean_s, **{r.topology: r.prediction.mean_s for r in rows if r.prediction}}
    fastest = min(st, key=means.get)  # the fastest runnable option is always 'best' or 'equivalent'
    listed = ", ".join(f"{_display(n)} ({means[n] * 1e3:.1f} ms)" for n in same)
    verdict = (
        f"{rec.verdict} Equivalent per iteration (within the {margin:.1%} margin of the fastest, "
        f"{_display(fastest)} at {means[fastest] * 1e3:.1f} ms): {listed}."
    )
    return replace(rec, verdict=verdict, equivalent=same)


def advise(
    scenario: Scenario,
    margin: float | Margin = MARGIN,
    topologies: list[str] | None = None,
    provenance: dict[str, str] | None = None,
    objective: str = ITERATION,
    local_sgd: list[LocalSgd] | None = None,
    memory=None,
) -> Advice:
    """Predict every topology, rank them, and decide (or say it is too close to call); `local_sgd`: the
    local-SGD configurations to compare beside them (families.py); `memory`: a memory_fit.MemoryQuestion,
    to judge every row's memory and never pick one that does not fit."""
    return advise_many([scenario], margin, topologies, provenance, objective, local_sgd, memory)[0]


def advise_many(
    scenarios: list[Scenario],
    margin: float | Margin = MARGIN,
    topologies: list[str] | None = None,
    provenance: dict[str, str] | None = None,
    objective: str = ITERATION,
    local_sgd: list[LocalSgd] | None = None,
    memory=None,
) -> list[Advice]:
    """`advise` for each scenario (a sweep's), their recurrences run together: the runs that share n and
    draws (every topology at one n; the reduced systems of every n above FULL_MAX_N) take one loop.
    `margin`: one figure for equivalence and the verdict's interval, or a confidence.Margin with both."""
    check_objective(objective)
    if not isinstance(margin, Margin):
        margin = Margin(margin, margin, "")
    plans, preds, sds = predict_many(scenarios, topologies)
    asked = _Asked(margin, provenance, objective, memory)
    advices = [_advice(scenario, ar, models, preds, sds, asked) for scenario, ar, models in plans]
    return [_with_local_sgd(a, local_sgd or []) for a in advices]


def _with_local_sgd(advice: Advice, configs: list[LocalSgd]) -> Advice:
    """The advice with local-SGD rows and the families' ranking (the pick itself is unchanged)."""
    if not configs:
        return advice
    rows = local_sgd_rows(advice.scenario, advice.allreduce.mean_s, configs, advice.memory)
    if advice.scenario.shape.gpus_per_node > 1:
        extra = sharded_replica_configs(rows, configs)
        rows += local_sgd_rows(advice.scenario, advice.allreduce.mean_s, extra, advice.memory)
    gossip = pick(advice.rows, advice.margin, advice.objective)
    best = family_candidates(advice.allreduce.mean_s, gossip, rows, advice.objective, advice.baseline)
    provenance = {**advice.provenance, "local SGD": LOCAL_SGD_PROVENANCE}
    return replace(advice, local_sgd=rows, families=best, provenance=provenance)


@dataclass(frozen=True)
class _Asked:
    """What advise_many was asked, the same for every scenario of a batch."""

    margin: Margin
    provenance: dict | None
    objective: str
    memory: object  # memory_fit.MemoryQuestion or None


def _advice(scenario, ar, models: dict, preds, sds, asked: _Asked) -> Advice:
    """One scenario's Advice from its models and (the next of) the batch's predictions and their 1-sigma;
    with a memory question (memory_fit.MemoryQuestion) each row's memory, and the verdict against the
    All-Reduce family's row that fits (memory_fit.chosen_baseline)."""
    margin, provenance, objective, memory = asked.margin, asked.provenance, asked.objective, asked.memory
    ar_sd = uncertainty_s(scenario, allreduce_prediction, ar.mean_s)
    gossip_memory_use = baselines = chosen = None
    if memory is not None:
        from runtime_model.advice.memory_fit import baseline_rows, chosen_baseline, gossip_memory

        gossip_memory_use = gossip_memory(scenario, memory)
        baselines = baseline_rows(scenario, ar, memory)
        chosen = chosen_baseline(baselines)
        if chosen is not None and chosen.method != "ddp":
            ar, ar_sd = chosen.prediction, chosen.uncertainty_s
    rows: list[TopologyRow] = []
    for name, model in models.items():
        builtin = topology_info(name).decent_dp_name is not None
        if isinstance(model, TopologyNotApplicable):
            rows.append(TopologyRow(name, False, str(model), None, None, None, builtin))
            continue
        pred = next(preds)
        sd = next(sds)
        metrics = model.consensus()
        rows.append(
            TopologyRow(
                name,
                True,
                reason=model.decent_dp_note,
                prediction=pred,
                speedup=ar.mean_s / pred.mean_s,
                consensus=metrics,
                decent_dp_builtin=builtin,
                uncertainty_s=sd,
                runnable=model.decent_dp_runnable,
                convergence=consensus_cost(scenario.shape.gpus, metrics),
                library=model.exchange.library,
                nic_bytes_per_iteration=_nic_bytes(scenario, model.schedule),
                memory=gossip_memory_use,
            )
        )
    baseline = "ddp" if chosen is None else chosen.method
    if memory is not None and chosen is None:
        from runtime_model.advice.memory_fit import nothing_fits

        rec = keep_allreduce(scenario, nothing_fits(scenario, memory, baselines, gossip_memory_use))
    else:
        rec = _recommend(scenario, ar, ar_sd, rows, margin.equivalence, objective, margin.interval, baseline)
        rec = _with_equivalents(rec, ar, rows, margin.equivalence, objective)
        if baseline != "ddp":
            from runtime_model.advice.memory_fit import against_baseline

            rec = replace(rec, verdict=f"{against_baseline(chosen, baselines[0])} {rec.verdict}")
    return Advice(
        scenario,
        ar,
        ar_sd,
        rows,
        rec,
        margin.equivalence,
        dict(provenance or {}),
        objective=objective,
        interval_margin=margin.interval,
        interval_evidence=margin.evidence,
        baselines=baselines or [],
        baseline=baseline,
        memory=memory,
    )


def _nic_bytes(scenario: Scenario, schedule) -> float | None:
    """The busiest NIC's bytes per iteration of a schedule built rank by rank (None: reduced system)."""
    if schedule is None:
        return None
    net = scenario.network
    return gossip_nic_bytes(schedule, scenario.shape, net.nics_per_node, scenario.buckets.message_bytes, net)


def recommend_against(
    advice: Advice, allreduce: IterationPrediction, allreduce_sd_s: float
) -> Recommendation:
    """The recommendation were All-Reduce to run as `allreduce` (DDP tuned): the same rows, ranked and
    judged against it (a gossip row does not depend on DDP's settings)."""
    rows = [
        r if r.prediction is None else replace(r, speedup=allreduce.mean_s / r.prediction.mean_s)
        for r in advice.rows
    ]
    rec = _recommend(
        advice.scenario,
        allreduce,
        allreduce_sd_s,
        rows,
        advice.margin,
        advice.objective,
        advice.verdict_margin,
        advice.baseline,
    )
    return _with_equivalents(rec, allreduce, rows, advice.margin, advice.objective)


def keep_allreduce(scenario: Scenario, verdict: str, baseline: str = "ddp", **kw) -> Recommendation:
    """Keep All-Reduce: the verdict, and the line of the All-Reduce-family row it keeps (DDP's, or a
    sharded baseline's where DDP does not fit: memory_fit.BASELINE_CODE), never a topology's."""
    from runtime_model.advice.memory_fit import BASELINE_CODE

    line = BASELINE_CODE.get(baseline) or code_line("allreduce", True)
    return Recommendation("allreduce", 1.0, False, verdict, line, torchrun_line(scenario), **kw)


def baseline_label(baseline: str) -> str:
    """How a verdict names the row it is against: All-Reduce (DDP), or the sharded baseline's method."""
    return "All-Reduce" if baseline == "ddp" else baseline


def _recommend(
    scenario, ar, ar_sd, rows, margin, objective, interval_margin, baseline: str = "ddp"
) -> Recommendation:
    """The pick and its verdict against `ar`, the All-Reduce-family row named by `baseline` (DDP's, or
    the sharded one that fits where DDP does not); rows that do not fit in memory are never picked."""
    ranked = RANKED_BY[objective]
    label = baseline_label(baseline)
    runnable = [r for r in rows if r.applicable and r.runnable]
    if not runnable:
        return keep_allreduce(scenario, f"No decentralized topology fits this shape: keep {label}.", baseline)
    if not any(r.fits for r in runnable):
        from runtime_model.advice.memory_fit import does_not_fit

        return keep_allreduce(
            scenario,
            f"Keep {label}: no decentralized topology fits in memory: Decent-DP {does_not_fit(runnable[0].memory)}"
            " (gossip needs a full replica per rank, its communication blocks and its optimizer's "
            "states).",
            baseline,
        )
    best = pick(rows, margin, objective)
    if best is None:
        return keep_allreduce(
            scenario,
            f"Keep {label}: every runnable topology's consensus is hopeless at {scenario.shape.gpus} GPUs "
            f"({ranked}).",
            baseline,
        )
    s, noise = best.speedup, speedup_uncertainty(best, ar, ar_sd, interval_margin)
    low, high = speedup_interval(s, noise)
    if low <= 1.0 <= high:
        verdict = (
            f"Too close to call: {best.topology} is predicted at {s:.2f}x {label}'s speed, and speedups "
            f"from these inputs err by ±{noise:.1%} ({interval_text(low, high)}). Keep {label} unless a "
            f"validation run says otherwise ({validate_line(best.topology)})."
        )
        verdict += _consensus_warning(best, scenario.shape.gpus)
        rec = keep_allreduce(scenario, verdict, baseline, candidate=best.topology)
        return replace(rec, too_close_to_call=True)
    if s < 1.0:
        return keep_allreduce(
            scenario,
            f"Keep {label}: the best decentralized topology ({best.topology}) is {s:.2f}x {label}'s "
            f"speed ({best.prediction.mean_s * 1e3:.1f} ms vs {ar.mean_s * 1e3:.1f} ms; {ranked}).",
            baseline,
        )
    parts = sorted(
        ((name, v) for name, v in best.prediction.factors.named_s() if abs(v) >= SHOWN_FACTOR_S),
        key=lambda kv: -abs(kv[1]),
    )
    why = ", ".join(f"{name} {val * 1e3:+.1f} ms" for name, val in parts)
    verdict = (
        f"Use {best.topology}: {s:.2f}x {label}'s speed per iteration "
        f"({best.prediction.mean_s * 1e3:.1f} ms vs {ar.mean_s * 1e3:.1f} ms; ±{noise:.1%} on the speedup: "
        f"{interval_text(low, high)}; "
        f"{ranked}); why: {why}.{_consensus_warning(best, scenario.shape.gpus)}"
    )
    return Recommendation(
        best.topology,
        best.speedup,
        False,
        verdict,
        code_line(best.topology, best.decent_dp_builtin),
        torchrun_line(scenario),
    )


def _consensus_warning(row: TopologyRow, gpus: int) -> str:
    """The explicit warning a pick beyond the measured consensus carries (convergence.py)."""
    cost = row.convergence
    if cost.kind == HOPELESS:
        return (
            f" WARNING: {row.topology}'s consensus is hopeless at {gpus} GPUs ({cost.describe()}): its "
            "models will barely agree; --objective accuracy ranks by time to the same loss."
        )
    if cost.kind not in (EXACT, MEASURED):
        return (
            f" Caution: {row.topology} is not measured to keep accuracy at {gpus} GPUs ({cost.describe()})."
        )
    return ""
