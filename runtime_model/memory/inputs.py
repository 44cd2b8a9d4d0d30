"""The inputs of the memory model besides the method: how a replica is stored and stepped (TrainingRecipe)
and the model's shape where buffers depend on it (ModelShape). Checked on construction: one-line errors."""

from __future__ import annotations

from dataclasses import dataclass, fields

from runtime_model.core.constraints import AT_LEAST_ONE, MAX_PARAMS, Interval
from runtime_model.core.errors import InvalidCombination, InvalidValue
from runtime_model.memory.optimizer_terms import OPTIMIZERS

BACKENDS = ("nccl", "gloo")  # gloo's reduce-scatter copies its input (fsdp_timeline.py)
REPLICAS = ("node", "gpu")  # a local-SGD replica: one node running DDP inside, or one GPU alone
ELEMENT_BYTES = (1, 2, 4, 8)  # fp8/int8, fp16/bf16, fp32, fp64


@dataclass(frozen=True)
class TrainingRecipe:
    """How one replica's tensors are stored and stepped; checked on construction."""

    param_bytes: int = 4  # bytes per parameter element as stored
    grad_bytes: int = 4
    optimizer: str = "adam"  # "adam" | "accum-adam" | "sgd-momentum" | "sgd"
    state_bytes: int = 4  # bytes per optimizer-state element
    master_copy: bool = False  # an fp32 master copy beside low-precision parameters
    ddp_bucket_view: bool = False  # DDP gradient_as_bucket_view
    foreach_step: bool = (
        True  # the optimizer's foreach (multi-tensor) path: CUDA default; CPU runs the per-tensor loop
    )
    checkpointing: bool = False  # informational: activations given already reflect it

    def __post_init__(self):
        for name in ("param_bytes", "grad_bytes", "state_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or value not in ELEMENT_BYTES:
                raise InvalidValue(name, f"one of {', '.join(map(str, ELEMENT_BYTES))}", value)
        if self.optimizer not in OPTIMIZERS:
            raise InvalidValue("optimizer", f"one of {', '.join(OPTIMIZERS)}", self.optimizer)
        for name in ("master_copy", "ddp_bucket_view", "foreach_step", "checkpointing"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidValue(name, "true or false", getattr(self, name))


@dataclass(frozen=True)
class ModelShape:
    """What a method's buffers depend on beyond the parameter count (all per model, not per rank)."""

    largest_tensor_params: float = 0.0  # the largest parameter tensor: the per-tensor optimizer step's peak
    unit_params: tuple[
        float, ...
    ] = ()  # FSDP units (fully_shard per block) in forward order; the root holds the rest
    bucket_params: tuple[float, ...] = ()  # Decent-DP's (or DDP's) buckets in backward order, elements each
    backend: str = "nccl"  # "gloo": its reduce-scatter copies the input (FSDP)
    replica: str = (
        "node"  # local SGD: "node" runs DDP inside each node (gpus_per_node > 1), "gpu" trains alone
    )
    fragments: int = 1  # local SGD: Streaming DiLoCo's fragments (each synchronised alone)
    buffer_bytes: float = 0.0  # the model's buffers (BatchNorm statistics, masks): whole on every rank
    late_grad_params: float = (
        0.0  # FSDP root parameters whose gradients backward makes last (input embeddings)
    )
    activation_grad_bytes: float | None = None  # peak of activations + gradients made so far over forward and
    # backward (profiler/activation_memory.py ActivationMeasure: peak_total - parameter - buffer - optimizer bytes)


def model_shape(params: float, shape: dict) -> ModelShape:
    known = {f.name for f in fields(ModelShape)}
    unknown = sorted(set(shape) - known)
    if unknown:
        raise TypeError(f"method_memory() got unexpected keyword argument(s) {', '.join(unknown)}")
    model = ModelShape(
        **{k: (tuple(v) if k in ("unit_params", "bucket_params") else v) for k, v in shape.items()}
    )
    Interval(0.0, float(params), closed="both").check("largest_tensor_params", model.largest_tensor_params)
    for name in ("unit_params", "bucket_params"):
        for value in getattr(model, name):
            Interval(0.0, MAX_PARAMS, closed="both").check(name, value)
    if sum(model.unit_params) > params * (1 + 1e-9):
        raise InvalidCombination(
            "unit_params add up to more than the model's {params} parameters", params=params
        )
    if model.backend not in BACKENDS:
        raise InvalidValue("backend", f"one of {', '.join(BACKENDS)}", model.backend)
    if model.replica not in REPLICAS:
        raise InvalidValue("replica", f"one of {', '.join(REPLICAS)}", model.replica)
    AT_LEAST_ONE.check("fragments", model.fragments)
    Interval(0.0, None, closed="left").check("buffer_bytes", model.buffer_bytes)
    Interval(0.0, float(params), closed="both").check("late_grad_params", model.late_grad_params)
    if model.activation_grad_bytes is not None:
        Interval(0.0, None, closed="left").check("activation_grad_bytes", model.activation_grad_bytes)
    return model
