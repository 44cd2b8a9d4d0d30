"""Does each option fit in one GPU's memory, and which All-Reduce-family baseline the verdict is against.

Why in the advisor: a recommendation the GPU cannot hold is not advice (issue 66). DDP keeps a whole
replica, its gradients and their bucket copy; Decent-DP adds its communication blocks and AccumAdam's
third state; teams whose model does not fit DDP run a sharded baseline (FSDP2, ZeRO, HSDP), so the
verdict must be against the fastest of those that fits, and never pick a row that does not fit. The
bytes come from runtime_model.memory.accounting (each term cited there); this module only asks it for
every row and says what fits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from runtime_model.core.scenario import Scenario
from runtime_model.memory.accounting import MemoryUse, TrainingRecipe, method_memory
from runtime_model.prediction.iteration import IterationPrediction, allreduce_prediction
from runtime_model.prediction.sharded import SHARDED_METHODS, sharded_prediction

GIB = 2**30
DDP = "ddp"
# the All-Reduce family's rows: what runs each, and the line a verdict that keeps it prints
BASELINE_LIBRARY = {
    DDP: "PyTorch DDP",
    "fsdp": "FSDP2 fully_shard",
    "zero2": "FSDP2 no reshard",  # fully_shard(reshard_after_forward=False)
    "zero1": "ZeroRedundancyOpt",  # DDP + torch.distributed.optim.ZeroRedundancyOptimizer
    "hsdp": "FSDP2 2-D mesh",  # fully_shard(mesh=(replicate nodes, shard in a node))
}
BASELINE_CODE = {
    "fsdp": "# FSDP2 (ZeRO-3): keep All-Reduce, sharded\n"
    "for block in blocks: fully_shard(block)\nfully_shard(model)",
    "zero2": "# FSDP2 as ZeRO-2: keep All-Reduce, sharded\n"
    "for block in blocks: fully_shard(block, reshard_after_forward=False)\n"
    "fully_shard(model, reshard_after_forward=False)",
    "zero1": "# ZeRO-1: DDP, the optimizer's states sharded\n"
    "model = torch.nn.parallel.DistributedDataParallel(model)\n"
    "opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=...)",
    "hsdp": "# HSDP: sharded inside a node, replicated across nodes\n"
    'mesh = init_device_mesh("cuda", (NODES, GPUS_PER_NODE), mesh_dim_names=("replicate", "shard"))\n'
    "for block in blocks: fully_shard(block, mesh=mesh)\nfully_shard(model, mesh=mesh)",
}


@dataclass(frozen=True)
class MemoryQuestion:
    """What the memory of every row is computed from: the training recipe, one GPU's capacity, and the
    activations per rank where a source gives them (None: the states alone are judged, and said so)."""

    recipe: TrainingRecipe
    capacity_bytes: float
    device: str  # the GPU, as the verdict names it: "A100 (40 GiB)"
    activation_bytes: float | None = None
    activation_source: str = "not known: give --activation-gib, or a model preset that records them"
    # Decent-DP's rows train with the advised line's AccumAdam where the model trains with Adam
    gossip_optimizer: str | None = None
    largest_tensor_params: float = 0.0
    late_grad_params: float = 0.0  # parameters whose gradients come last (a preset's input embeddings)
    # the peak of activations plus the gradients made so far (an estimate on the model: ModelShape's)
    activation_grad_bytes: float | None = None

    @property
    def activations_known(self) -> bool:
        return self.activation_bytes is not None


@dataclass(frozen=True)
class BaselineRow:
    """One row of the All-Reduce family: DDP or a sharded baseline, its time and its memory."""

    method: str
    prediction: IterationPrediction
    memory: MemoryUse
    uncertainty_s: float = 0.0

    @property
    def fits(self) -> bool:
        return self.memory.fits is not False

    @property
    def library(self) -> str:
        return BASELINE_LIBRARY[self.method]


def _element_params(scenario: Scenario, nbytes: float) -> float:
    """Gradient elements in `nbytes` of the scenario's buckets (families.model_params for the whole
    message: this module stays below families, which asks it for local SGD's memory)."""
    return nbytes / scenario.buckets.element_bytes


def memory_of(
    scenario: Scenario, method: str, question: MemoryQuestion, recipe_changes: dict | None = None, **shape
) -> MemoryUse:
    """`method`'s memory per rank on `scenario` (accounting.method_memory). FSDP's units are the
    scenario's gradient buckets in forward order (Decent-DP's: one per ~25 MiB, as FSDP wraps blocks of
    about that size; the sharded time model takes the same units: prediction/sharded.py); the buckets
    are DDP's for DDP and ZeRO-1, Decent-DP's otherwise; the backend NCCL wherever the network is priced
    as NCCL's (gloo's reduce-scatter copies its input). `shape`: more of ModelShape's fields (local SGD's
    replica and fragments)."""
    recipe = replace(question.recipe, **recipe_changes) if recipe_changes else question.recipe
    buckets = scenario.buckets.ddp if method in (DDP, "zero1") else scenario.buckets.gossip
    units = tuple(_element_params(scenario, b.nbytes) for b in reversed(scenario.buckets.gossip))
    return method_memory(
        method,
        _element_params(scenario, scenario.buckets.message_bytes),
        recipe,
        world=scenario.shape.gpus,
        gpus_per_node=scenario.shape.gpus_per_node,
        activation_bytes=question.activation_bytes,
        capacity_bytes=question.capacity_bytes,
        largest_tensor_params=question.largest_tensor_params,
        unit_params=units,
        bucket_params=tuple(_element_params(scenario, b.nbytes) for b in buckets),
        backend="gloo" if scenario.network.nccl_algo is None else "nccl",
        late_grad_params=question.late_grad_params,
        activation_grad_bytes=question.activation_grad_bytes,
        **shape,
    )


def gossip_memory(scenario: Scenario, question: MemoryQuestion) -> MemoryUse:
    """Decent-DP's memory per rank: the same for every topology (a full replica, its communication
    blocks, its optimizer per bucket); the topology changes who it talks to, not what it keeps."""
    changes = {"optimizer": question.gossip_optimizer} if question.gossip_optimizer else None
    return memory_of(scenario, "decent-dp", question, changes)


def local_sgd_memory(scenario: Scenario, opts, question: MemoryQuestion) -> MemoryUse:
    """One local-SGD configuration's memory per rank (prediction/local_sgd.LocalSgd): DDP inside the
    replica as rtmodel_harness/local_sgd.py runs it (accounting's local-sgd), or FSDP2 over the node's GPUs
    as torchft's DiLoCo runs a replica one GPU cannot hold: the node's FSDP memory, plus the outer
    optimizer's momentum over each GPU's shard (torchft/local_sgd.py keeps the outer copy of the weights,
    `extract_local_tensor`'s local shards, in CPU memory by default: not on the GPU)."""
    from runtime_model.core.scenario import ClusterShape

    if opts.inner != "fsdp":
        return memory_of(scenario, "local-sgd", question, replica=opts.replica, fragments=opts.fragments)
    k = scenario.shape.gpus_per_node
    node = memory_of(replace(scenario, shape=ClusterShape(k, k)), "fsdp", question)
    momentum = _element_params(scenario, scenario.buckets.message_bytes) * question.recipe.param_bytes / k
    return replace(
        node,
        parts=(*node.parts, ("outer momentum", momentum)),
        peak_bytes=node.peak_bytes + momentum,
        phases=tuple((name, nbytes + momentum) for name, nbytes in node.phases),
    )


def baseline_predictor(method: str):
    """scenario -> IterationPrediction of one All-Reduce-family row (DDP's is allreduce_prediction)."""
    return allreduce_prediction if method == DDP else partial(sharded_prediction, method=method)


def baseline_rows(
    scenario: Scenario, ddp: IterationPrediction, question: MemoryQuestion
) -> list[BaselineRow]:
    """DDP and every sharded baseline, each with its time and memory (DDP first)."""
    from runtime_model.prediction.link_uncertainty import uncertainty_s

    rows = [BaselineRow(DDP, ddp, memory_of(scenario, DDP, question))]
    for method in SHARDED_METHODS:
        if method == "hsdp" and scenario.shape.nodes == 1:
            continue  # one node: HSDP is FSDP
        pred = sharded_prediction(scenario, method)
        sd = uncertainty_s(scenario, baseline_predictor(method), pred.mean_s)
        rows.append(BaselineRow(method, pred, memory_of(scenario, method, question), sd))
    return rows


def chosen_baseline(rows: list[BaselineRow]) -> BaselineRow | None:
    """What the verdict is against: DDP where it fits (the paper's baseline, and what runs with one line),
    else the fastest sharded row that fits; None where none does."""
    if rows and rows[0].fits:
        return rows[0]
    fitting = [r for r in rows[1:] if r.fits]
    return min(fitting, key=lambda r: r.prediction.mean_s) if fitting else None


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.3g}"


def does_not_fit(memory: MemoryUse) -> str:
    """'does not fit: 61 GiB of 40' (the issue's words), 'before activations' where they are not known."""
    known = "" if memory.activations_known else " before activations"
    return f"does not fit: {gib(memory.peak_bytes)} GiB of {gib(memory.capacity_bytes)}{known}"


def memory_text(memory: MemoryUse | None) -> str:
    """A row's memory in a few words: '12.3 GiB', '12.3 GiB + activations', or does_not_fit's line."""
    if memory is None:
        return ""
    if memory.fits is False:
        return does_not_fit(memory)
    return f"{gib(memory.peak_bytes)} GiB" + ("" if memory.activations_known else " + activations")


def against_baseline(row: BaselineRow, ddp: BaselineRow) -> str:
    """The sentence that leads a verdict against a sharded baseline (DDP does not fit)."""
    return (
        f"DDP {does_not_fit(ddp.memory)}. Against {row.method} ({row.library}, "
        f"{memory_text(row.memory)}), the fastest All-Reduce-family row that fits:"
    )


def fsdp_fits_from(scenario: Scenario, question: MemoryQuestion) -> int | None:
    """The fewest GPUs (a power of two times the node's GPUs, above today's) at which FSDP's row fits;
    None where even 2^20 GPUs would not (the activations or one unit alone exceed the GPU)."""
    from runtime_model.core.scenario import ClusterShape

    gpus = scenario.shape.gpus * 2
    while gpus <= 2**20:
        shape = ClusterShape(gpus, scenario.shape.gpus_per_node)
        if memory_of(replace(scenario, shape=shape), "fsdp", question).fits is not False:
            return gpus
        gpus *= 2
    return None


def nothing_fits(
    scenario: Scenario, question: MemoryQuestion, rows: list[BaselineRow], gossip: MemoryUse | None
) -> str:
    """The verdict where no row fits: each family's smallest need, and what would fit."""
    smallest = min(rows, key=lambda r: r.memory.peak_bytes)
    parts = [f"DDP needs {gib(rows[0].memory.peak_bytes)} GiB"]
    parts.append(f"the smallest sharded row ({smallest.method}) {gib(smallest.memory.peak_bytes)} GiB")
    if gossip is not None:
        parts.append(f"gossip (a full replica per rank) {gib(gossip.peak_bytes)} GiB")
    act = dict(smallest.memory.parts).get("activations", 0.0)
    would = []
    if act:
        would.append(f"fewer tokens per GPU (activations are {gib(act)} GiB of {smallest.method}'s)")
        if not question.recipe.checkpointing:
            would.append("activation checkpointing (--activation-checkpointing)")
    more = fsdp_fits_from(scenario, question)
    if more is not None:
        would.append(f"sharding over more GPUs (fsdp fits from {more})")
    would.append(f"a GPU with more than {gib(smallest.memory.peak_bytes)} GiB")
    return (
        f"Nothing fits on {question.device}: " + ", ".join(parts) + ". What would: " + "; ".join(would) + "."
    )
