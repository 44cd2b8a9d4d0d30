"""Per-iteration time of the sharded All-Reduce family, PyTorch's own implementations:

- "fsdp": FSDP2 `fully_shard` with reshard_after_forward=True (ZeRO-3; FSDP1's FULL_SHARD runs the same
  collectives): each unit's parameters all-gathered in forward, freed, all-gathered again in backward, its
  gradients reduce-scattered after its backward (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
  pre_forward, pre_backward, post_backward);
- "zero2": the same with reshard_after_forward=False (ZeRO-2, FSDP1's SHARD_GRAD_OP): no all-gather in
  backward;
- "zero1": torch.distributed.optim.ZeroRedundancyOptimizer under DDP: DDP's bucketed all-reduce (as
  allreduce_prediction), the optimizer on this rank's 1/n of the parameters, then every shard broadcast
  from its owner to every rank (zero_redundancy_optimizer.py step -> _sync_params: one async broadcast
  per parameter tensor, all waited for before step returns). With the default overlap_with_ddp=False
  nothing overlaps them: they are exposed;
- "hsdp": FSDP2 on a 2-D mesh (replicate across nodes, shard inside one): all-gathers and
  reduce-scatters inside the node (k = gpus_per_node ranks on the intra-node links), and each rank's 1/k
  shard all-reduced across the nodes, the k local ranks' groups at once sharing the node's NICs
  (foreach_reduce's all_reduce on the replicate group, on its own all_reduce_stream).

The optimizer steps on the rank's shard: optimizer_s / n (fsdp, zero2, zero1), / k (hsdp: a node holds
one replica). The units and the schedule: sharded_units.py.

Assumption: the scenario's gossip buckets stand for the FSDP units (the rtmodel Scenario carries no
module structure; a preset's gossip buckets are cut at Decent-DP's 25 MiB cap in gradient-ready order,
FSDP wraps modules, typically one per transformer block). Forward compute is spread over the units in
proportion to their bytes, backward by their ready fractions; the last unit in ready order is FSDP's
root (it holds the input embedding), which FSDP does not reshard after forward (_fsdp_state.py
_lazy_init: "For the root, do not reshard after forward"). Every rank meets every collective, so the
compute part is E[max over n of C] as for DDP (compute_wait_of_all); the exposed communication is the
mean compute's schedule's, as DDP's tail is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runtime_model.core.errors import InvalidValue
from runtime_model.core.scenario import GroupShape, Scenario
from runtime_model.prediction.collectives import allreduce_parts_s, global_allreduce_shape
from runtime_model.prediction.iteration import IterationPrediction, allreduce_prediction, compute_wait_of_all
from runtime_model.prediction.sharded_units import (
    UnitCosts,
    broadcast_s,
    gather_s,
    unit_schedule,
)
from runtime_model.topology.schedule import nics_in_use

SHARDED_METHODS = ("fsdp", "zero2", "zero1", "hsdp")


@dataclass(frozen=True)
class ShardedOptions:
    """Settings a sharded run is made with, each None for the default named.

    gather_bytes: bytes per element all-gathered (FSDP's param_dtype; None: the buckets' element size,
        MixedPrecisionPolicy()'s default of no cast); zero1 broadcasts in this dtype too.
    reduce_bytes: bytes per element reduce-scattered and all-reduced (reduce_dtype; None: gather_bytes).
    kept_units: units (indices in gradient-ready order) not resharded after forward (fsdp, hsdp)
        (None: the root's, the last: FSDP's own rule; torchtitan also keeps its last block's, index 0).
    param_tensors: zero1's broadcasts per step, one per parameter tensor (None: one per gossip bucket,
        the fewest the buckets allow, so its latency is then a lower bound).
    """

    gather_bytes: int | None = None
    reduce_bytes: int | None = None
    kept_units: tuple[int, ...] | None = None
    param_tensors: int | None = None


def sharded_prediction(
    scenario: Scenario, method: str, options: ShardedOptions | None = None
) -> IterationPrediction:
    """One iteration of `method` (SHARDED_METHODS): E[max_n C] + exposed communication + the sharded
    optimizer step; p50/p99 from the compute's order statistics plus the same fixed part."""
    options = options or ShardedOptions()
    if method not in SHARDED_METHODS:
        raise InvalidValue("sharded method", f"one of {', '.join(SHARDED_METHODS)}", method)
    shape, comp = scenario.shape, scenario.compute
    if method == "zero1":
        comm, exposed = _zero1_comm(scenario, options)
        shards = shape.gpus
    else:
        costs = unit_costs(scenario, method, options)
        comm, exposed = costs.comm_s, unit_schedule(costs).exposed_s
        shards = min(shape.gpus_per_node, shape.gpus) if method == "hsdp" else shape.gpus
    optimizer = comp.optimizer_s / shards
    wait, p50, p99 = compute_wait_of_all(comp, shape)
    fixed = exposed + optimizer
    return IterationPrediction(
        name=method,
        mean_s=wait + fixed,
        p50_s=p50 + fixed,
        p99_s=p99 + fixed,
        compute_wait_s=wait,
        comm_s=comm,
        exposed_comm_s=exposed,
        optimizer_s=optimizer,
    )


def hsdp_groups(scenario: Scenario) -> tuple[GroupShape, GroupShape]:
    """(the shard group: one node's k ranks; the replicate group: one rank per node, its k groups leaving
    each node at once through the node's NICs, local rank i on NIC i mod nics: nic_sharing flows each)."""
    shape, nics = scenario.shape, scenario.network.nics_per_node
    k = min(shape.gpus_per_node, shape.gpus)
    nodes = shape.gpus // k
    sharing = math.ceil(k / nics_in_use(nics, k))
    return GroupShape(size=k, nodes=1), GroupShape(size=nodes, nodes=nodes, nic_sharing=sharing, rails=1)


def unit_costs(scenario: Scenario, method: str, options: ShardedOptions) -> UnitCosts:
    """Each unit's compute and collectives (sharded_units.UnitCosts) for "fsdp", "zero2" or "hsdp"."""
    shape, net, comp, units = scenario.shape, scenario.network, scenario.compute, scenario.buckets.gossip
    element = scenario.buckets.element_bytes
    gather_bytes = options.gather_bytes or element
    reduce_bytes = options.reduce_bytes or gather_bytes
    elements = [b.nbytes / element for b in units]
    total = sum(elements)
    if method == "hsdp":
        shard, replicate = hsdp_groups(scenario)
    else:
        shard, replicate = global_allreduce_shape(shape.gpus, shape.gpus_per_node, net.nics_per_node), None
    gathers = [gather_s(shard, e * gather_bytes, net) for e in elements]
    kept = set(options.kept_units if options.kept_units is not None else (len(units) - 1,))
    regather = method in ("fsdp", "hsdp")
    readies = [0.0] + [b.ready_fraction for b in units]
    cross = [0.0] * len(units)
    if replicate is not None:
        cross = [sum(allreduce_parts_s(replicate, e * reduce_bytes / shard.size, net)) for e in elements]
    return UnitCosts(
        forward_s=[comp.forward_s * e / total for e in elements],
        backward_s=[comp.backward_s * max(0.0, b - a) for a, b in zip(readies, readies[1:], strict=False)],
        forward_gather_s=gathers,
        backward_gather_s=[g if regather and j not in kept else 0.0 for j, g in enumerate(gathers)],
        reduce_s=[gather_s(shard, e * reduce_bytes, net) for e in elements],
        cross_s=cross,
        tail_s=comp.backward_s * max(0.0, 1.0 - max(readies)),
    )


def _zero1_comm(scenario: Scenario, options: ShardedOptions) -> tuple[float, float]:
    """(communication, exposed) of ZeroRedundancyOptimizer under DDP: DDP's all-reduces and exposed tail
    (allreduce_prediction's), plus the parameter broadcasts after the step, all exposed, equal in size
    (their bytes add up to the model's whatever the split; their count sets the latency)."""
    shape, net, buckets = scenario.shape, scenario.network, scenario.buckets
    ddp = allreduce_prediction(scenario)
    group = global_allreduce_shape(shape.gpus, shape.gpus_per_node, net.nics_per_node)
    tensors = options.param_tensors or len(buckets.gossip)
    element = buckets.element_bytes
    param_bytes = buckets.message_bytes / element * (options.gather_bytes or element)
    sync = tensors * broadcast_s(group, param_bytes / tensors, net)
    return ddp.comm_s + sync, ddp.exposed_comm_s + sync
