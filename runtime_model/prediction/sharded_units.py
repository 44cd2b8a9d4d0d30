"""What the sharded baselines (sharded.py) are made of: the cost of an all-gather, a reduce-scatter and a
broadcast on a group, and one iteration's schedule of FSDP units on a compute queue and a comm queue.

Collective costs, from the all-reduce model the rest of rtmodel uses (collectives.py):

- all-gather / reduce-scatter of S bytes (S: the unsharded size) on p ranks: NCCL's ring all-reduce is a
  reduce-scatter followed by an all-gather, each moving (p-1)/p S per rank in p-1 steps (NVIDIA/nccl
  src/graph/tuning.cc ncclTopoTuneModel: nsteps = nRanks-1 for either against 2(nRanks-1) for
  all-reduce), so each costs half the ring all-reduce of S on
  that group, latency and bytes. NCCL runs neither by tree (tuning.cc skips the tree for them; NVLS and
  PAT aside), so a network with an NCCL algorithm is priced by its ring whatever its all-reduce choice;
  gloo by its flat ring. A measured all-reduce fit for the exact group shape (network.group_costs)
  wins, halved, as every other collective of the model uses it.
- broadcast of S bytes (ZeroRedundancyOptimizer's parameter sync): ring only (tuning.cc skips every
  other algorithm for ncclFuncBroadcast), nRanks steps, and every rank (and every node's NIC) carries S,
  not (p-1)/p S (nccl-tests doc/PERFORMANCE.md: a broadcast's bus bandwidth is its algorithm bandwidth).
  So it costs the all-gather's latency and bytes, each x p/(p-1).

The schedule (unit_schedule) is a max-plus recurrence over one iteration, units in FSDP's order
(FSDP2: torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py; FSDP1 runs the same order):

- forward: the root's unit first (it holds the input embedding, ready last in backward); unit i's
  all-gather starts once the comm queue is free and unit i-1's compute has begun (implicit prefetch one
  unit ahead: FSDPCommContext's all_gather_copy_in_stream waits on the previous AllGatherState's event,
  recorded just before the previous unit's compute); unit i computes once its all-gather has ended;
- backward, in gradient-ready order: pre_backward(j) issues unit j+1's all-gather (one unit ahead,
  _backward_prefetch) where it was resharded after forward, then unit j computes once its own has
  ended, then post_backward(j) issues unit j's reduce-scatter, which waits for that compute;
- one comm queue: FSDP2 puts all-gathers and reduce-scatters on separate CUDA streams, but "for a
  single process group using NCCL backend, any collectives, even if issued from different streams,
  contend for the same per-device NCCL stream" (torch/distributed/fsdp/api.py BackwardPrefetch), so the
  queue serialises their bytes in issue order (AG j+1, RS j, AG j+2, RS j+1, ...). FSDP1's BACKWARD_PRE
  and BACKWARD_POST issue that same order (post_backward prefetches before it reduces:
  torch/distributed/fsdp/_runtime_utils.py _post_backward_hook), so one schedule stands for both;
- HSDP's cross-node all-reduce of unit j's shard runs on a queue of its own (FSDPCommContext's
  all_reduce_stream, another process group: "collectives use different network resources and can
  overlap in the typical intra-node sharding / inter-node replication case"), after unit j's
  reduce-scatter;
- the iteration ends when the compute and both queues are done (finalize_backward waits for the last
  reduce); the sharded optimizer step follows, and the next forward's all-gathers wait for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from runtime_model.core.scenario import GroupShape, Network
from runtime_model.prediction.collectives import modelled_parts_s


def gather_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts of an all-gather or a reduce-scatter of `nbytes` (the unsharded size):
    half of the ring all-reduce of `nbytes` on `group`, or half of a measured fit for that shape."""
    if group.size <= 1 or nbytes <= 0:
        return 0.0, 0.0
    fit = network.group_costs.get(group.key)
    if fit is not None:
        return fit.fixed_s / 2, max(0.0, fit.time_s(nbytes) - fit.fixed_s) / 2
    ring = network if network.nccl_algo is None else replace(network, nccl_algo="ring")
    latency, bandwidth = modelled_parts_s(group, nbytes, ring)
    return latency / 2, bandwidth / 2


def gather_s(group: GroupShape, nbytes: float, network: Network) -> float:
    """One all-gather (or reduce-scatter) of `nbytes` unsharded on `group` (gather_parts_s)."""
    return sum(gather_parts_s(group, nbytes, network))


def broadcast_s(group: GroupShape, nbytes: float, network: Network) -> float:
    """One ring broadcast of `nbytes` to every rank of `group`: the all-gather's time x p/(p-1) (p steps
    against p-1, S bytes through each rank against (p-1)/p S: module doc)."""
    p = group.size
    return gather_s(group, nbytes, network) * p / (p - 1) if p > 1 else 0.0


@dataclass(frozen=True)
class UnitCosts:
    """One iteration's work per FSDP unit, every tuple in gradient-ready order (index 0: the first unit
    whose gradients are ready in backward; the last: the root, first in forward).

    forward_s / backward_s: the unit's compute; tail_s: backward compute after the last unit is ready;
    forward_gather_s / backward_gather_s: its all-gathers (0 where it is not resharded after forward);
    reduce_s: its gradients' reduce-scatter; cross_s: HSDP's all-reduce of its shard across nodes."""

    forward_s: Sequence[float]
    backward_s: Sequence[float]
    forward_gather_s: Sequence[float]
    backward_gather_s: Sequence[float]
    reduce_s: Sequence[float]
    cross_s: Sequence[float]
    tail_s: float = 0.0

    @property
    def comm_s(self) -> float:
        """Every collective's time, added up (their serial sum)."""
        parts = (self.forward_gather_s, self.backward_gather_s, self.reduce_s, self.cross_s)
        return float(sum(sum(p) for p in parts))


@dataclass(frozen=True)
class Schedule:
    """The iteration's end (before the optimizer step) and its compute alone, in the same summation order
    (so that free communication gives exposed_s == 0 exactly)."""

    end_s: float
    compute_s: float

    @property
    def exposed_s(self) -> float:
        return max(0.0, self.end_s - self.compute_s)


def unit_schedule(costs: UnitCosts) -> Schedule:
    """One iteration of the units on a compute queue, a comm queue and HSDP's cross-node queue (module
    doc), every rank alike: the mean compute's schedule."""
    units = len(costs.forward_s)
    comm = compute = began = busy = 0.0
    for j in reversed(range(units)):  # forward: the root's unit first
        comm = max(comm, began) + costs.forward_gather_s[j]
        began = max(compute, comm)
        compute = began + costs.forward_s[j]
        busy += costs.forward_s[j]
    comm += costs.backward_gather_s[0]
    gathered = [0.0] * units
    gathered[0] = comm
    cross = 0.0
    for j in range(units):  # backward, in ready order
        if j + 1 < units:
            comm += costs.backward_gather_s[j + 1]
            gathered[j + 1] = comm
        compute = max(compute, gathered[j]) + costs.backward_s[j]
        busy += costs.backward_s[j]
        comm = max(comm, compute) + costs.reduce_s[j]
        if costs.cross_s[j] > 0:
            cross = max(cross, comm) + costs.cross_s[j]
    compute += costs.tail_s
    busy += costs.tail_s
    return Schedule(end_s=max(compute, comm, cross), compute_s=busy)
