"""Typed presets: one frozen dataclass per kind of TOML entry, and the library that holds them all.

Why dataclasses and not the TOML dicts: a misspelt or missing key is caught once, when its file is
loaded, with the file, entry and key named, instead of as a KeyError deep inside the model; and each
field spells its unit. Each field declares how its TOML value is read and checked (`_toml(...)`
metadata); the loader (`preset_loading`) reads only these declarations, so the accepted keys and the
dataclasses cannot drift apart. Fields without that metadata (`name`) are not TOML keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field

from runtime_model.core.constraints import (
    AT_LEAST_ONE,
    COMPUTE_CV,
    DISPATCH_US,
    LATENCY_US,
    LAUNCH_US,
    LINK_GBPS,
    MEMORY_BANDWIDTH_GBPS,
    MEMORY_GIB,
    MFU,
    NICS_PER_NODE,
    PARAMS_RANGE,
    PEAK_TFLOPS,
    Interval,
)
from runtime_model.core.errors import InvalidValue
from runtime_model.core.physical_bounds import MAX_BUFFER_BYTES, MAX_GPUS_PER_NODE
from runtime_model.core.scenario import ScenarioError

NON_NEGATIVE_INTEGER = Interval(0, None, closed="left", integer=True)
# A user's preset file is bounded key by key as the flags are, each by what real hardware and models hold:
# - the fraction of a peak a system sustains (a GPU's memory bandwidth streamed, a fabric's line rate as
#   nccl-tests' bus bandwidth): published figures run from 0.48 (NCCL over TCP sockets) to 0.98; under 0.05
#   no system runs as configured, and a fraction near 0 makes every time an artefact of the input;
EFFICIENCY = Interval(0.05, 1.0, closed="right")
# - FLOPs of one batch unit (forward + backward; or forward's share): a tiny MLP's unit is ~1e5, ResNet-50's
#   image 2.4e10, a 1e11-parameter model's token 6e11; 1e3 is below any network, 1e18 (that model over
#   1.6e6 tokens in one unit) above any;
FLOPS_PER_UNIT = Interval(1e3, 1e18, closed="both")
# - kernel-launching ops per iteration: eager ResNet-50 launches ~500, a large transformer thousands;
#   10^7 ops are 50 s of host time at 5 us each;
OPS_PER_ITERATION = Interval(0.0, 1e7, closed="both")
# - bytes the memory-bound kernels move per batch unit (ResNet-50's image: 2.4e8) and per iteration
#   whatever the batch (AMP's weight casts, ~6 bytes per parameter: 6e11 at 1e11 parameters): a terabyte
#   per unit, 10 TB per iteration are more than any device streams in a step (B200: 8 TB/s);
BYTES_PER_UNIT = Interval(0.0, 1e12, closed="both")
FIXED_BYTES = Interval(0.0, 1e13, closed="both")
# - an optimizer's or a pass's bytes per parameter (Adam: 76, AccumAdam 92) and its ops per call (2-9 here):
#   1 KiB per parameter and 10^6 ops per call are no optimizer; host work per tensor, in dispatches, 1,000;
BYTES_PER_PARAM = Interval(0.0, 1024.0, closed="both")
HOST_OPS = Interval(0.0, 1e6, closed="both")
DISPATCHES_PER_TENSOR = Interval(0.0, 1e3, closed="both")
# - GPUs in one node: 8 in a DGX, 72 in an NVL72 rack's NVLink domain; 1,024 leaves room for the next;
GPUS_PER_NODE = Interval(1, MAX_GPUS_PER_NODE, closed="both", integer=True)
# - a model's default global batch in units: at least one, at most GLOBAL_BATCH's 1e10.
DEFAULT_GLOBAL_BATCH = Interval(1.0, 1e10, closed="both")
# - activation bytes a replica keeps per batch unit and whatever the batch (ResNet-50's image: 8.7e7 in
#   fp32; AMP's weight copies, 2 bytes per parameter): each is alive at once on one GPU, so at most
#   MAX_BUFFER_BYTES (no accelerator holds 1 TiB).
ACTIVATION_BYTES = Interval(0.0, float(MAX_BUFFER_BYTES), closed="both")

# How the loader reads a field's TOML value.
TEXT = "text"  # a non-empty string
NUMBER = "number"  # an int or float, stored as float, inside `check`
INTEGER = "integer"  # an integral number, stored as int, inside `check`
NUMBER_TABLE = "number table"  # an inline table of name = number, each inside `check`
INTEGER_LIST = "integer list"  # a non-empty array of integers, each inside `check`

# What a field that names another preset refers to: a section of the library.
GPUS, INTER, INTRA, MODELS = "gpus", "inter", "intra", "models"
OPTIMIZERS, PASSES = "optimizers", "passes"
# The two ways a model's kernels run, as keys of a model's per-mode tables: "amp" (autocast to fp16/bf16,
# GradScaler) for the fp16/bf16 precisions, "full" (no autocast) for fp32/tf32.
MODES = ("amp", "full")
AMP_PRECISIONS = ("fp16", "bf16")
# An inter-node network's fabric: InfiniBand, RDMA over Ethernet (NCCL's IB verbs transport on both), or
# TCP sockets (NCCL's socket transport, gloo).
INFINIBAND, ROCE, TCP = "infiniband", "roce", "tcp"
FABRICS = (INFINIBAND, ROCE, TCP)


def _toml(kind: str, check: Interval | None = None, *, ref: str | None = None, default=MISSING):
    """A dataclass field read from the TOML key of the same name (required unless it has a default)."""
    return field(default=default, metadata={"toml": kind, "check": check, "ref": ref})


# Names that no longer say enough: an Ethernet network runs NCCL over TCP sockets or over RoCE (RDMA),
# at about half and about all of its line rate (networks.toml), so the name a user types says which.
RENAMED = {
    "eth-10g": "tcp-10g",
    "eth-25g": "tcp-25g (TCP sockets) or roce-25g (RDMA)",
    "eth-100g": "roce-100g (RDMA) or tcp-100g (TCP sockets)",
}


class UnknownPreset(ScenarioError):
    """A preset name that the library does not hold. `kind` says which list ("GPU", "network"),
    `input_name` the model input that named it ("gpu"), `choices` the valid names."""

    def __init__(self, kind: str, name: str, choices: Sequence[str], input_name: str):
        self.kind, self.name, self.choices, self.input_name = kind, name, tuple(choices), input_name
        if name in RENAMED:
            super().__init__(f"{kind} '{name}' is now {RENAMED[name]}: the name says how NCCL runs on it")
        else:
            super().__init__(f"unknown {kind} '{name}'; choose one of: {', '.join(self.choices)}")


@dataclass(frozen=True, kw_only=True)
class GpuPreset:
    """One accelerator and its usual host (gpus.toml): dense peak throughput, memory bandwidth, the
    efficiencies large-batch training reaches on them, and the host's cost per eager op."""

    name: str
    tflops: Mapping[str, float] = _toml(NUMBER_TABLE, PEAK_TFLOPS)  # dense peak TFLOP/s per precision
    memory_bandwidth_GBps: float = _toml(NUMBER, MEMORY_BANDWIDTH_GBPS)  # 10^9 bytes per second
    memory_GiB: float = _toml(NUMBER, MEMORY_GIB)
    default_precision: str = _toml(TEXT)
    mfu: Mapping[str, float] = _toml(NUMBER_TABLE, MFU)  # per precision: fraction of peak at large batch
    memory_efficiency: float = _toml(NUMBER, EFFICIENCY)  # fraction of memory bandwidth streamed
    dispatch_us: float = _toml(NUMBER, DISPATCH_US)  # host CPU time per kernel-launching op of eager PyTorch
    # what a CUDA launch adds on the host per kernel-launching op, above the CPU's dispatch
    launch_us: float = _toml(NUMBER, LAUNCH_US, default=0.0)
    default_intra: str | None = _toml(TEXT, ref=INTRA, default=None)  # None: the library's default
    source: str = _toml(TEXT)
    mfu_source: str = _toml(TEXT, default="")
    memory_efficiency_source: str = _toml(TEXT, default="")
    dispatch_source: str = _toml(TEXT, default="")
    launch_source: str = _toml(TEXT, default="")

    @property
    def host_op_us(self) -> float:
        """Host time per kernel-launching op on this GPU's host: the CPU's dispatch + the CUDA launch."""
        return self.dispatch_us + self.launch_us

    def __post_init__(self):
        if self.default_precision not in self.tflops:
            raise InvalidValue(
                "default_precision", f"a key of tflops ({', '.join(self.tflops)})", self.default_precision
            )
        if set(self.mfu) != set(self.tflops):
            raise InvalidValue(
                "mfu", f"a table with the keys of tflops ({', '.join(self.tflops)})", dict(self.mfu)
            )


@dataclass(frozen=True, kw_only=True)
class LinkPreset:
    """One link class (networks.toml): an inter-node network ([inter.NAME]) or an intra-node link
    ([intra.NAME]); Hockney alpha (latency_us) and line rate (bandwidth_Gbps, per direction)."""

    name: str
    description: str = _toml(TEXT)
    bandwidth_Gbps: float = _toml(NUMBER, LINK_GBPS)  # 10^9 bits per second
    latency_us: float = _toml(NUMBER, LATENCY_US)  # per ring step, software + wire
    # what the link carries / line rate: published nccl-tests bus bandwidth for the fabric, or, where one
    # flow cannot fill it (flow_cap_Gbps), what many flows together carry
    efficiency: float = _toml(NUMBER, EFFICIENCY, default=1.0)
    source: str = _toml(TEXT)
    latency_source: str = _toml(TEXT, default="")
    efficiency_source: str = _toml(TEXT, default="")
    # an inter-node network's fabric (FABRICS): which published checks its margin comes from
    # (runtime_model/advice/confidence.py); None: not declared (a user's file), said in a note
    fabric: str | None = _toml(TEXT, default=None)
    # the most one flow (one collective's connection: a NCCL communicator's sockets) moves, Gbit/s, where a
    # source shows it below the link's: q flows then get min(link / q, cap) each; None: a flow fills the link
    flow_cap_Gbps: float | None = _toml(NUMBER, LINK_GBPS, default=None)
    flow_cap_source: str = _toml(TEXT, default="")

    def __post_init__(self):
        if self.fabric is not None and self.fabric not in FABRICS:
            raise InvalidValue("fabric", f"one of {', '.join(FABRICS)}", self.fabric)
        if self.flow_cap_Gbps is not None and not self.flow_cap_source:
            raise InvalidValue("flow_cap_source", "the source of flow_cap_Gbps", "")

    @property
    def achievable_Gbps(self) -> float:
        return self.bandwidth_Gbps * self.efficiency


# A model's optional per-mode activation tables (profiler/memcount.py): (per unit, fixed) pairs, plain and
# with every repeated block checkpointed; each pair is given whole or not at all.
ACTIVATION_PAIRS = (
    ("activation_bytes_per_unit", "activation_fixed_bytes"),
    ("checkpointed_activation_bytes_per_unit", "checkpointed_activation_fixed_bytes"),
)
# A model's per-precision-mode tables: kernel-launching ops and memory traffic, forward and backward.
PER_MODE_COUNTS = (
    "forward_ops",
    "backward_ops",
    "forward_bytes_per_unit",
    "backward_bytes_per_unit",
    "forward_fixed_bytes",
    "backward_fixed_bytes",
)


@dataclass(frozen=True, kw_only=True)
class ModelPreset:
    """One model (models.toml): what one training iteration costs per batch unit, as the kernels of
    eager PyTorch see it (counted by `python -m profiler.opcount`), and what it communicates."""

    name: str
    description: str = _toml(TEXT)
    params: int = _toml(INTEGER, PARAMS_RANGE)
    train_flops_per_unit: float = _toml(
        NUMBER, FLOPS_PER_UNIT
    )  # forward + backward matmul FLOPs per batch unit
    forward_flops_per_unit: float = _toml(NUMBER, FLOPS_PER_UNIT)  # the forward's share of them
    unit: str = _toml(TEXT)  # the batch unit: "image", "token"
    default_global_batch: float = _toml(NUMBER, DEFAULT_GLOBAL_BATCH)  # in units
    embedding_params: int = _toml(INTEGER, NON_NEGATIVE_INTEGER)  # gradients ready at the end of backward
    compute_cv: float = _toml(NUMBER, COMPUTE_CV)  # coefficient of variation of forward + backward time
    # Per mode (MODES): kernel-launching ops per iteration, and bytes the memory-bound (non-matmul)
    # kernels move per batch unit and per iteration regardless of batch (AMP's weight casts).
    forward_ops: Mapping[str, float] = _toml(NUMBER_TABLE, OPS_PER_ITERATION)
    backward_ops: Mapping[str, float] = _toml(NUMBER_TABLE, OPS_PER_ITERATION)
    forward_bytes_per_unit: Mapping[str, float] = _toml(NUMBER_TABLE, BYTES_PER_UNIT)
    backward_bytes_per_unit: Mapping[str, float] = _toml(NUMBER_TABLE, BYTES_PER_UNIT)
    forward_fixed_bytes: Mapping[str, float] = _toml(NUMBER_TABLE, FIXED_BYTES)
    backward_fixed_bytes: Mapping[str, float] = _toml(NUMBER_TABLE, FIXED_BYTES)
    backward_numels: tuple[int, ...] = _toml(INTEGER_LIST, AT_LEAST_ONE)  # parameters in gradient-ready order
    optimizer: str = _toml(TEXT, ref=OPTIMIZERS)  # its memory traffic: a [optimizer.NAME] of traffic.toml
    source: str = _toml(TEXT)
    counts_source: str = _toml(TEXT)  # the command that measured the per-mode tables and backward_numels
    compute_cv_source: str = _toml(TEXT, default="")
    # Optional, per mode: the activations one iteration keeps, fixed + per unit x batch units per GPU, as
    # profiler/activation_memory.py defines them (peak of MemTracker's Activation + Temp over forward and
    # backward); the checkpointed_ pair with every repeated block checkpointed. None: not measured.
    activation_bytes_per_unit: Mapping[str, float] | None = _toml(NUMBER_TABLE, ACTIVATION_BYTES, default=None)
    activation_fixed_bytes: Mapping[str, float] | None = _toml(NUMBER_TABLE, ACTIVATION_BYTES, default=None)
    checkpointed_activation_bytes_per_unit: Mapping[str, float] | None = _toml(
        NUMBER_TABLE, ACTIVATION_BYTES, default=None
    )
    checkpointed_activation_fixed_bytes: Mapping[str, float] | None = _toml(
        NUMBER_TABLE, ACTIVATION_BYTES, default=None
    )
    activation_source: str = _toml(TEXT, default="")  # the command that measured the activation tables
    # Known only by its parameter count (own_model): no FLOP or op counts, compute must be measured.
    params_only: bool = False

    def __post_init__(self):
        if self.embedding_params > self.params:
            raise InvalidValue("embedding_params", f"<= params ({self.params})", self.embedding_params)
        if self.forward_flops_per_unit >= self.train_flops_per_unit:
            raise InvalidValue(
                "forward_flops_per_unit",
                f"< train_flops_per_unit ({self.train_flops_per_unit:g})",
                self.forward_flops_per_unit,
            )
        if sum(self.backward_numels) != self.params:
            raise InvalidValue(
                "backward_numels", f"numbers summing to params ({self.params})", sum(self.backward_numels)
            )
        for key in PER_MODE_COUNTS:
            table = getattr(self, key)
            if set(table) != set(MODES):
                raise InvalidValue(key, f"a table with the keys {' and '.join(MODES)}", dict(table))
        self._check_activations()

    def _check_activations(self) -> None:
        """Each activation pair whole or absent, with both modes; the checkpointed pair only beside the
        plain one (it is what checkpointing changes)."""
        for pair in ACTIVATION_PAIRS:
            given = [getattr(self, key) is not None for key in pair]
            if any(given) and not all(given):
                missing = pair[given.index(False)]
                raise InvalidValue(missing, f"given with {pair[given.index(True)]} (a fit is both)", None)
            for key in pair:
                table = getattr(self, key)
                if table is not None and set(table) != set(MODES):
                    raise InvalidValue(key, f"a table with the keys {' and '.join(MODES)}", dict(table))
        plain, checkpointed = ACTIVATION_PAIRS
        if getattr(self, checkpointed[0]) is not None and getattr(self, plain[0]) is None:
            raise InvalidValue(plain[0], f"given with {checkpointed[0]}", None)


@dataclass(frozen=True, kw_only=True)
class MemoryPass:
    """One memory-bound pass over the parameters per iteration (traffic.toml): an optimizer step
    ([optimizer.NAME]) or a library's own pass ([pass.NAME]: GradScaler unscale, Decent-DP mixing,
    DDP's bucket copies). Bytes per parameter as its implementation reads and writes them."""

    name: str
    bytes_per_param: float = _toml(NUMBER, BYTES_PER_PARAM)
    host_ops: float = _toml(NUMBER, HOST_OPS)  # kernel-launching ops per call (foreach: per tensor list)
    # host work per parameter tensor per call (Python bookkeeping, foreach list handling), in units of the
    # host's dispatch cost: it runs on the CPU and scales with it
    host_dispatches_per_tensor: float = _toml(NUMBER, DISPATCHES_PER_TENSOR, default=0.0)
    host_source: str = _toml(TEXT, default="")
    source: str = _toml(TEXT)


@dataclass(frozen=True, kw_only=True)
class ClusterPreset:
    """One named cluster (clusters.toml): each field names another preset, except gpus_per_node."""

    name: str
    gpu: str = _toml(TEXT, ref=GPUS)
    gpus_per_node: int = _toml(INTEGER, GPUS_PER_NODE)
    intra: str = _toml(TEXT, ref=INTRA)
    network: str = _toml(TEXT, ref=INTER)
    precision: str | None = _toml(TEXT, default=None)  # what this cluster trains in; None: the GPU's default
    nics_per_node: int = _toml(INTEGER, NICS_PER_NODE, default=1)  # inter-node NICs, rail-optimised
    source: str = _toml(TEXT)


@dataclass(frozen=True, kw_only=True)
class PresetDefaults:
    """What a preset run uses for a choice the user leaves out (defaults.toml)."""

    machine: str = _toml(TEXT)  # the real machine the default choices describe together
    gpu: str = _toml(TEXT, ref=GPUS)
    network: str = _toml(TEXT, ref=INTER)
    intra: str = _toml(TEXT, ref=INTRA)  # for a GPU whose entry names no default_intra
    model: str = _toml(TEXT, ref=MODELS)
    gpus_per_node: int = _toml(INTEGER, GPUS_PER_NODE)  # capped at the job's GPU count


def _lookup(table: str, kind: str, input_name: str):
    """A PresetLibrary method: the preset of that name in `table`, else UnknownPreset with the choices."""

    def get(self, name: str):
        return _pick(getattr(self, table), name, kind, input_name)

    get.__doc__ = f"The {kind} preset named `name` (UnknownPreset names the choices and --{input_name})."
    return get


@dataclass(frozen=True, eq=False)
class PresetLibrary:
    """Every preset by name, and the defaults: the built-ins, possibly with a user's files over them.

    Look names up with the methods (`gpu("A100")`), which raise UnknownPreset with the choices.
    `files` lists the files read, built-ins first, for provenance. Compared and hashed by identity,
    so that a caller may cache per library.
    """

    gpus: Mapping[str, GpuPreset]
    inter_networks: Mapping[str, LinkPreset]
    intra_links: Mapping[str, LinkPreset]
    models: Mapping[str, ModelPreset]
    clusters: Mapping[str, ClusterPreset]
    defaults: PresetDefaults
    optimizers: Mapping[str, MemoryPass]
    passes: Mapping[str, MemoryPass]
    files: tuple[str, ...] = ()

    # Look-ups by name that raise UnknownPreset naming the choices and the input (gpu, network, ...).
    gpu = _lookup("gpus", "GPU", "gpu")
    network = _lookup("inter_networks", "network", "network")
    intra = _lookup("intra_links", "intra-node link", "intra")
    model = _lookup("models", "model", "model")
    cluster = _lookup("clusters", "cluster", "cluster")
    memory_pass = _lookup("passes", "memory pass", "pass")

    def traffic(self, name: str) -> MemoryPass:
        """An optimizer's or a library pass's traffic.toml entry, by name (optimizers first)."""
        return self.optimizers[name] if name in self.optimizers else self.memory_pass(name)

    def step_passes(self, model: str, precision: str) -> tuple[str, ...]:
        """The passes one optimizer step of `model` makes: its optimizer, and under AMP GradScaler's unscale."""
        optimizer = self.model(model).optimizer
        return (optimizer, "grad-scaler-unscale") if precision in AMP_PRECISIONS else (optimizer,)

    def default_intra(self, gpu: str) -> str:
        """The intra-node link of `gpu`'s usual node: its own default_intra, else the library's default."""
        entry = self.gpus.get(gpu)
        return entry.default_intra if entry is not None and entry.default_intra else self.defaults.intra

    def names(self) -> dict[str, list[str]]:
        """Valid names per model input (for help texts and error messages)."""
        return {
            "gpu": sorted(self.gpus),
            "network": sorted(self.inter_networks),
            "intra": sorted(self.intra_links),
            "model": sorted(self.models),
            "cluster": sorted(self.clusters),
        }


def _pick(table: Mapping, name: str, kind: str, input_name: str):
    if name not in table:
        raise UnknownPreset(kind, name, sorted(table), input_name)
    return table[name]
