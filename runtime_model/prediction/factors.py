"""The three factors (overlap window, heterogeneous links, variance) as Shapley values over three switches.

Each switch moves one aspect of an iteration from All-Reduce's world to the topology's:
- overlap: DDP's execution (its compute, buckets hidden only behind backward, the step after the last
  bucket) -> Decent-DP's (its compute with per-bucket steps and mixing; every exchange hidden behind a
  whole iteration);
- links: the global all-reduce of every bucket -> the topology's group exchanges (group sizes, link
  classes, NIC sharing);
- variance: waiting for the slowest of all n every iteration -> for the own group one iteration earlier
  (the recurrence's growth with free communication).
v(S) is the iteration time with the switches in S flipped; v(none) is All-Reduce's prediction. Every
world, v(all) included, is a first-order lockstep model (see `_iteration_s`): each round waits for its
slowest exchange. The recurrence (the topology's prediction) does better where exchanges are uneven
(they differ from round to round or from rank to rank): each rank waits only for its own group, and a
short exchange leaves slack for the next. That difference is an effect of its own, `uneven_s`, not
variance: with no compute variation nothing may be credited to variance (issue 27). Where the exchanges
are even, the lockstep model is exact without variation, and what the recurrence adds comes from the
compute variation borrowing slack, so it goes to variance; with neither, the lockstep model and the
recurrence differ only by the NICs' byte bound, a property of the links. The parts sum exactly to the gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OVERLAP, LINKS, VARIANCE = "overlap", "links", "variance"
SWITCHES = (OVERLAP, LINKS, VARIANCE)


@dataclass(frozen=True)
class FactorBreakdown:
    """How much of T_AR - T_topology each factor explains (seconds; positive = the topology gains): the
    three Shapley parts plus the uneven exchanges' slack (module doc) sum to `total_s`."""

    overlap_s: float
    links_s: float
    variance_s: float
    uneven_s: float = 0.0  # uneven exchanges: what the recurrence gains over the lockstep worlds
    one_node: bool = False  # every exchange on one node: the links part is the exchange pattern alone

    @property
    def links_name(self) -> str:
        """On one node there is no link heterogeneity: the links switch then only changes the exchange
        pattern (pairs or groups instead of the global all-reduce), and is named for that."""
        return "smaller exchanges" if self.one_node else "heterogeneous links"

    @property
    def total_s(self) -> float:
        return self.overlap_s + self.links_s + self.variance_s + self.uneven_s

    def named_s(self) -> tuple[tuple[str, float], ...]:
        """(effect, seconds) for the verdict's "why", each effect named for its cause."""
        return (
            ("overlap", self.overlap_s),
            (self.links_name, self.links_s),
            ("variance", self.variance_s),
            ("uneven exchanges", self.uneven_s),
        )


@dataclass(frozen=True)
class Worlds:
    """What the eight mixed worlds are built from (seconds)."""

    allreduce_s: float  # v(none)
    topology_s: float  # v(all)
    ddp_wait_all_s: float  # E[max over n] of DDP's compute
    ddp_wait_group_s: float  # DDP's compute, waiting only for the group
    ddp_optimizer_s: float
    ddp_tail_allreduce_s: float  # exposed tail of the global all-reduce behind backward
    ddp_tail_topology_s: float  # exposed tail of the topology's exchanges behind backward
    dp_wait_all_s: float  # E[max over n] of Decent-DP's compute
    dp_wait_group_s: float  # the recurrence's growth with free communication, minus the step
    dp_optimizer_s: float
    # the least iteration each hidden exchange allows (group_pipeline.exchange_bound_s: the exchange on its
    # channel(s), the pipelined wait and the last bucket's step): the global all-reduce volume on one
    # group, and each round's slowest group
    allreduce_bound_s: float
    round_bound_s: tuple[float, ...]
    uneven_exchanges: bool = False  # do exchanges differ between rounds or ranks (module doc)
    varied: bool = True  # does compute vary (i.i.d., persistent or node-correlated)? Without, no variance
    one_node: bool = False  # every exchange on one node (FactorBreakdown.links_name)


def _iteration_s(w: Worlds, on: frozenset) -> float:
    if OVERLAP not in on:  # DDP's execution: wait + exposed tail behind backward + the step
        wait = w.ddp_wait_group_s if VARIANCE in on else w.ddp_wait_all_s
        tail = w.ddp_tail_topology_s if LINKS in on else w.ddp_tail_allreduce_s
        return wait + tail + w.ddp_optimizer_s
    wait = w.dp_wait_group_s if VARIANCE in on else w.dp_wait_all_s
    compute = wait + w.dp_optimizer_s
    if LINKS in on:  # everyone meets every iteration, so a slow round cannot borrow slack
        return float(np.mean([max(compute, b) for b in w.round_bound_s]))
    return max(compute, w.allreduce_bound_s)


def shapley_factors(worlds: Worlds) -> FactorBreakdown:
    from runtime_model.core.attribution import shapley

    phi = shapley(SWITCHES, lambda on: _iteration_s(worlds, on))
    slack_s = _iteration_s(worlds, frozenset(SWITCHES)) - worlds.topology_s
    overlap_s, links_s, variance_s = -phi[OVERLAP], -phi[LINKS], -phi[VARIANCE]
    if not worlds.varied:  # the variance switch changes no world but by rounding: its cause is absent
        links_s, variance_s = links_s + variance_s, 0.0
    uneven_s = slack_s if worlds.uneven_exchanges else 0.0
    if not worlds.uneven_exchanges:
        if worlds.varied:
            variance_s += slack_s
        else:
            links_s += slack_s
    return FactorBreakdown(overlap_s, links_s, variance_s, uneven_s, worlds.one_node)
