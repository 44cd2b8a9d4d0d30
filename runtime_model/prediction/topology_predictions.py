"""Every topology's predicted iteration at each of several scenarios, their recurrences run in one
batch (the runs that share n and draws take one loop: pending.run_pending).

Why its own step: the advisor (advisor.advise_many) adds to these the consensus metrics, the NIC bytes
and a verdict; a sweep of n (rtmodel_plots/sweeps.py) draws the times alone, and at n up to 65,536 the
consensus and byte counts of 14 sizes cost more CPU than the predictions themselves.
"""

from __future__ import annotations

from collections.abc import Iterator

from runtime_model.prediction.iteration import allreduce_prediction
from runtime_model.prediction.link_uncertainty import spreads_s, topology_uncertainties
from runtime_model.prediction.pending import run_means, run_pending
from runtime_model.prediction.reduced_system import topology_model
from runtime_model.topology.registry import TopologyNotApplicable, topology_names


def predict_many(
    scenarios: list, topologies: list[str] | None = None, spreads: bool = True
) -> tuple[list[tuple], Iterator, Iterator[float]]:
    """(plans, predictions, 1-sigmas): a plan per scenario, (scenario, All-Reduce's prediction, {name:
    topology model, or the TopologyNotApplicable that says why not}); the predictions and the links'
    1-sigma of every applicable topology, plan by plan in the models' order (no 1-sigmas without
    `spreads`)."""
    plans, pending = _plans(scenarios, topologies)
    preds = run_pending(pending)
    if not spreads:
        return plans, iter(preds), iter([])
    bumped = topology_uncertainties(plans)  # the bumped links' runs are read for their means alone
    means = iter(run_means([p for runs in bumped for p in runs]))
    return plans, iter(preds), iter(spreads_s([p.mean_s for p in preds], bumped, means))


def predict_means(
    scenarios: list, topologies: list[str] | None = None
) -> tuple[list[tuple], Iterator[float]]:
    """(plans, means): predict_many's plans and every applicable topology's mean iteration alone, plan
    by plan (pending.run_means: no quantiles, no factor breakdown, no free column): what a figure of
    speedups draws. Each mean is predict_many's prediction's mean_s bit for bit."""
    plans, pending = _plans(scenarios, topologies)
    return plans, iter(run_means(pending))


def _plans(scenarios: list, topologies: list[str] | None) -> tuple[list[tuple], list]:
    plans, pending = [], []
    for scenario in scenarios:
        ar = allreduce_prediction(scenario)
        models: dict[str, object] = {}
        for name in dict.fromkeys(topologies or topology_names()):  # each once, however often it was named
            try:
                models[name] = topology_model(name, scenario.shape)  # per rank up to FULL_MAX_N, else reduced
            except TopologyNotApplicable as exc:
                models[name] = exc
                continue
            pending.append(models[name].pending(scenario, ar))
        plans.append((scenario, ar, models))
    return plans, pending
