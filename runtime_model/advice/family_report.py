"""The advice JSON's entries for the third family (local SGD) and the fields every family shares.

Why beside report.py: the schema's gossip and All-Reduce entries are built there; local SGD has no
consensus rounds or factors, but the same columns read it (compute utilization, NIC bytes, the time to
All-Reduce's loss where known), so its entry fills the shared keys and adds its own under `local_sgd`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from runtime_model.advice.families import FamilyBest, LocalSgdRow
from runtime_model.core.scenario import Scenario
from runtime_model.prediction.link_bytes import allreduce_nic_bytes
from runtime_model.prediction.local_sgd import compute_utilization
from runtime_model.prediction.local_sgd_convergence import MEASURED

if TYPE_CHECKING:
    from runtime_model.advice.advisor import TopologyRow

ALLREDUCE, GOSSIP, LOCAL_SGD = "all-reduce", "gossip", "local-sgd"  # the entries' `family`
LOCAL_SGD_LIBRARY = "local SGD"  # "runs on": rtmodel validate's torch.distributed loop, OpenDiLoCo, prime
LOCAL_SGD_FSDP_LIBRARY = "torchft DiLoCo"  # FSDP2 inside each replica (torchft, torchtitan); validate runs DDP


def allreduce_shared(scenario: Scenario, mean_s: float) -> dict:
    """All-Reduce's shared keys: DDP all-reduces the whole gradient every iteration."""
    net = scenario.network
    return {
        "family": ALLREDUCE,
        "compute_utilization": compute_utilization(scenario.compute, mean_s),
        "nic_bytes_per_iteration": sum(  # each DDP bucket by the algorithm its size gets
            allreduce_nic_bytes(scenario.shape, net.nics_per_node, b.nbytes, net)
            for b in scenario.buckets.ddp
        ),
    }


def gossip_shared(scenario: Scenario, row: TopologyRow) -> dict:
    """A gossip entry's shared keys (null where the topology does not apply; NIC bytes null above
    symmetry.FULL_MAX_N, where no full schedule is built)."""
    if row.prediction is None:
        return {"family": GOSSIP, "compute_utilization": None, "nic_bytes_per_iteration": None}
    util = compute_utilization(scenario.decent_dp_compute, row.prediction.mean_s)
    return {
        "family": GOSSIP,
        "compute_utilization": util,
        "nic_bytes_per_iteration": row.nic_bytes_per_iteration,
    }


def local_sgd_entry(row: LocalSgdRow) -> dict:
    """One local-SGD configuration as a prediction entry (per-period parts under `local_sgd`)."""
    p, cost = row.prediction, row.convergence
    h = p.options.inner_steps
    known = cost.kind == MEASURED
    return {
        "topology": p.name,
        "family": LOCAL_SGD,
        "applicable": True,
        "reason": None,
        "iteration_s": {"mean": p.mean_s, "p50": None, "p99": None},
        "comm_s": p.outer_comm_s / h,
        "exposed_comm_s": p.exposed_comm_s / h,
        "compute_wait_s": None,
        "optimizer_s": None,
        "speedup_vs_allreduce": row.speedup,
        "factors": None,
        "consensus": None,
        "convergence": {
            **asdict(cost),
            "about": cost.describe(),
            "time_to_loss_vs_allreduce": 1.0 / row.speedup if known else None,
            "time_to_loss_vs_allreduce_at_least": 1.0 / row.speedup,
        },
        "compute_utilization": p.compute_utilization,
        "nic_bytes_per_iteration": p.nic_bytes_per_iteration,
        "local_sgd": {
            **asdict(p.options),
            "replicas": p.replicas,
            "period_s": p.period_s,
            "inner_step_s": p.inner_step_s,
            "wait_s": p.wait_s,
            "outer_comm_s": p.outer_comm_s,
            "exposed_comm_s": p.exposed_comm_s,
            "outer_step_s": p.outer_step_s,
        },
        "uncertainty_s": 0.0,
        "decent_dp_builtin": False,
        "runs_on_decent_dp": False,
        "library": LOCAL_SGD_FSDP_LIBRARY if p.options.inner == "fsdp" else LOCAL_SGD_LIBRARY,
        "vs_best": None,
    }


def families_dict(best: list[FamilyBest], verdict: str, objective: str) -> dict:
    """The JSON's `families`: each family's best option in the objective's order, and the sentence."""
    return {"objective": objective, "ranked": [asdict(b) for b in best], "verdict": verdict}
