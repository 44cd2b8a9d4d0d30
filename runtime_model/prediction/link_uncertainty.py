"""A prediction's 1-sigma from the links' stated uncertainties, by finite differences.

Why a module of its own: the advisor needs it for All-Reduce (analytic) and for every topology (a
recurrence each), and the topologies' runs go in the advisor's one batch (pending.run_pending): here are
the bumped scenarios and the arithmetic, there the batching.
"""

from __future__ import annotations

from dataclasses import replace

from runtime_model.core.scenario import Scenario
from runtime_model.topology.registry import TopologyNotApplicable


def uncertainty_s(scenario: Scenario, predict, base_s: float | None = None) -> float:
    """1-sigma of a prediction from the inputs' stated uncertainties (links), by finite differences;
    `base_s`: predict(scenario).mean_s where the caller has it already (not predicted again)."""
    bumped = _bumped_links(scenario)
    if not bumped:
        return 0.0
    base_s = predict(scenario).mean_s if base_s is None else base_s
    return spread_s(base_s, [predict(s).mean_s for s in bumped])


def spread_s(base_s: float, bumped_s: list[float]) -> float:
    return sum((b - base_s) ** 2 for b in bumped_s) ** 0.5


def _bumped_links(scenario: Scenario) -> list[Scenario]:
    """The scenario with each link's bandwidth and latency moved by its stated 1-sigma, one at a time
    ([] when the links state none): the finite differences of uncertainty_s."""
    net = scenario.network
    out = []
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
            out.append(replace(scenario, network=replace(net, **{link_name: bumped}, group_costs={})))
    return out


def topology_uncertainties(plans) -> list:
    """Per scenario, per applicable topology in order: the pending runs of its bumped scenarios (the
    base is the prediction itself). Only their means are read, so they run for means alone, in one
    batch (pending.run_means): each run's mean is the one it has alone, bit for bit."""
    out = []
    for scenario, _, models in plans:
        bumped = _bumped_links(scenario)
        for model in models.values():
            if not isinstance(model, TopologyNotApplicable):
                out.append([model.pending(s, None) for s in bumped])
    return out


def spreads_s(base_means_s: list[float], runs_per_topology: list[list], means) -> list[float]:
    """Each topology's 1-sigma from its prediction's mean and the means of its bumped runs
    (topology_uncertainties), taken in order from the iterator `means`; 0 where the links state no
    uncertainty."""
    out = []
    for base_s, runs in zip(base_means_s, runs_per_topology, strict=True):
        out.append(spread_s(base_s, [next(means) for _ in runs]) if runs else 0.0)
    return out
