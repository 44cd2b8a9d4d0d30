"""Registers rtmodel's topologies that Decent-DP does not ship (e.g. `base-2`) with Decent-DP.

Why: the advisor may recommend a schedule Decent-DP has no class for; to run it (in a validation or
in your own training script) Decent-DP needs a `Topology` subclass under that name. Each class here
builds rtmodel's schedule for (world size, local world size) and hands Decent-DP its rounds:
`[[Edge(ranks=group, weight=w) for each group] for each round]`. Decent-DP's built-ins (complete,
ring, one-peer-exp, alternating-exp-ring) keep Decent-DP's own classes.

Schedules that are not rounds of disjoint groups (`static-exp`) and other libraries' rows (`sgp-exp`,
`osgp-exp`, `bluefog-dynamic-exp`: their exchange is not Decent-DP's) are not registered: Decent-DP runs
exactly one group per rank per iteration. Schedules with 1-rank groups on some shape (e.g. base-2 for
n not a power of 2) raise DecentDPTopologyError when instantiated for that shape, because Decent-DP
0.2.3 divides by |group| - 1.

Usage: `import rtmodel_decentdp` (registers on import; importing again is harmless), then
`DecentralizedDataParallel(model, optim_fn, topology="base-2")`. The import also makes decent_dp's
AccumAdam/AccumAdamW step on every torch in rtmodel's range (rtmodel_decentdp.compat), which is why the
advisor's AccumAdam line wants it even with a Decent-DP built-in topology. A top-level package of its
own, named for rtmodel: the line goes into the user's training script, whose folder may well hold a
`rtmodel_validation/`.
"""

from __future__ import annotations

from decent_dp.topo import Edge, Topology, TopologyReg

from rtmodel_decentdp.compat import ensure_optimizers_work
from runtime_model.core.errors import UserError
from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.exchange import DECENT_DP
from runtime_model.topology.registry import TOPOLOGIES, TopologyNotApplicable, build_schedule
from runtime_model.topology.schedule import Schedule

# shapes to build each topology on, to see its kind: the first one it applies to decides
_PROBE_SHAPES = (ClusterShape(8, 2), ClusterShape(16, 4))


class DecentDPTopologyError(UserError):
    """The schedule cannot be expressed as Decent-DP rounds on this shape."""


def schedule_edges(schedule: Schedule) -> list[list[Edge]]:
    """Decent-DP's rounds for a group-based schedule: one Edge per group, weight = the group's keep-weight."""
    blocker = schedule.decent_dp_note
    if blocker:
        raise DecentDPTopologyError(f"topology {schedule.name!r} cannot run on Decent-DP: {blocker}")
    rounds = []
    for rnd in schedule.rounds:
        edges = []
        for group in rnd.groups():
            weight = float(rnd.weights[rnd.labels[group[0]]])
            edges.append(Edge(ranks=[int(r) for r in group], weight=weight))
        rounds.append(edges)
    return rounds


def _decent_dp_runs(name: str) -> bool:
    """Group rounds exchanged Decent-DP's way: another library's rows (SGP, BlueFog) stay with that library."""
    for shape in _PROBE_SHAPES:
        try:
            schedule = build_schedule(name, shape)
        except TopologyNotApplicable:
            continue
        return schedule.static_graph is None and schedule.exchange is DECENT_DP
    return True  # cannot tell on the probe shapes; the class checks the real shape when built


def _make_class(name: str) -> type[Topology]:
    def _get_topo_edges(self) -> list[list[Edge]]:
        shape = ClusterShape(self._world_size, self._local_world_size)
        try:
            schedule = build_schedule(name, shape)
        except TopologyNotApplicable as exc:
            raise DecentDPTopologyError(
                f"topology {name!r} cannot run on {self._world_size} ranks: {exc}"
            ) from None
        return schedule_edges(schedule)

    cls_name = (
        "Rtmodel" + "".join(part.capitalize() for part in name.replace("_", "-").split("-")) + "Topology"
    )
    doc = f"rtmodel's {name!r} schedule ({TOPOLOGIES[name].description}) as a Decent-DP topology."
    return type(
        cls_name, (Topology,), {"_get_topo_edges": _get_topo_edges, "__doc__": doc, "rtmodel_name": name}
    )


def registrable_names() -> list[str]:
    """rtmodel topologies that are not Decent-DP built-ins, are rounds of disjoint groups and run Decent-DP's way."""
    return [n for n, info in TOPOLOGIES.items() if info.decent_dp_name is None and _decent_dp_runs(n)]


def register_all() -> list[str]:
    """Register every registrable topology not yet in Decent-DP's registry; returns the names now available.

    Idempotent: TopologyReg.register raises on a duplicate name, so names already present are skipped.
    """
    names = registrable_names()
    for name in names:
        if name not in TopologyReg.registry:
            TopologyReg.register(name)(_make_class(name))
    return names


REGISTERED = register_all()
ensure_optimizers_work()  # decent_dp 0.2.3's AccumAdam calls a torch check torch 2.11 lacks
