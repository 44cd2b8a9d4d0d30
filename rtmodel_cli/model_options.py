"""The model's inputs as options, declared once: `rtmodel advise` and the plots that take them share them.

Why a dataclass read by a decorator: typer reads a command's options from its signature, and five
commands take the same ~20 inputs. Each field of `ModelInputs` is one option: its name is the parameter
(and scenario-file key), its annotation the option (rtmodel_cli.options), its default the default.
`takes_model_inputs` puts those options into a command's signature where its `inputs` parameter is and
hands the body one `ModelInputs` (rtmodel_cli.option_groups), so that a parameter cannot be renamed in
one command only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from rtmodel_cli.option_groups import field_options, takes_group
from rtmodel_cli.options import (
    ActivationCheckpointingOpt,
    ActivationGibOpt,
    BucketMibOpt,
    CalibrationOpt,
    ClusterOpt,
    ComputeCvOpt,
    ComputeMsOpt,
    DdpBucketViewOpt,
    DispatchUsOpt,
    GlobalBatchOpt,
    GpuMemoryGibOpt,
    GpuOpt,
    GpusPerNodeOpt,
    IntraOpt,
    MessageDtypeOpt,
    MfuOpt,
    ModelOpt,
    NcclAlgoOpt,
    NcclTestsOpt,
    NetworkOpt,
    NicsPerNodeOpt,
    NodeCvOpt,
    OptimizerMsOpt,
    PaddingEfficiencyOpt,
    ParamMbOpt,
    ParamsOpt,
    PrecisionOpt,
    PresetsOpt,
    ProfileOpt,
    RankCvOpt,
    ScenarioOpt,
    StragglerOpt,
    TracedBatchOpt,
    TraceOpt,
)

INPUTS = "inputs"  # the command's parameter that receives the ModelInputs (and marks where they go)


@dataclasses.dataclass(frozen=True)
class ModelInputs:
    """One field per scenario-file key that describes the model and the cluster (scenario_file.KEYS but
    the question a command asks: gpus, margin, topology, objective), in the order --help lists them;
    and `scenario`, the file that fills the ones not given (scenario_file.merge). None = not given.
    `plot speedup` takes lists for network, model and cluster (its flags --networks, --models, --clusters)."""

    network: NetworkOpt = None
    model: ModelOpt = None
    cluster: ClusterOpt = None
    params: ParamsOpt = None
    param_mb: ParamMbOpt = None
    gpu: GpuOpt = None
    gpus_per_node: GpusPerNodeOpt = None
    gpu_memory_gib: GpuMemoryGibOpt = None
    activation_gib: ActivationGibOpt = None
    activation_checkpointing: ActivationCheckpointingOpt = None
    intra: IntraOpt = None
    global_batch: GlobalBatchOpt = None
    precision: PrecisionOpt = None
    mfu: MfuOpt = None
    padding_efficiency: PaddingEfficiencyOpt = None
    compute_cv: ComputeCvOpt = None
    bucket_cap_mb: BucketMibOpt = None
    ddp_bucket_view: DdpBucketViewOpt = None
    presets: PresetsOpt = None
    compute_ms: ComputeMsOpt = None
    optimizer_ms: OptimizerMsOpt = None
    dispatch_us: DispatchUsOpt = None
    message_dtype: MessageDtypeOpt = None
    nics_per_node: NicsPerNodeOpt = None
    nccl_algo: NcclAlgoOpt = None
    straggler: StragglerOpt = None
    rank_cv: RankCvOpt = None
    node_cv: NodeCvOpt = None
    profile: ProfileOpt = None
    calibration: CalibrationOpt = None
    nccl_tests: NcclTestsOpt = None
    trace: TraceOpt = None
    traced_batch: TracedBatchOpt = None
    scenario: ScenarioOpt = None

    def as_dict(self) -> dict:
        """The inputs by name (not `scenario`: it is where they come from, not one of them)."""
        return {name: getattr(self, name) for name in input_names()}


def input_names() -> tuple[str, ...]:
    """The names of the model's inputs: ModelInputs' fields but `scenario`."""
    return tuple(f.name for f in dataclasses.fields(ModelInputs) if f.name != "scenario")


def takes_model_inputs(without: Iterable[str] = (), instead: dict | None = None):
    """Decorator for a command whose parameters include `inputs: ModelInputs` (keyword-only): typer
    sees the command's own options, with every field of ModelInputs as an option in place of `inputs`;
    the body gets them as one ModelInputs. `without` names fields the command takes no flag for (they
    stay None, for its scenario file to fill); `instead` maps a field to the option this command
    declares it as (e.g. a repeatable --network). The parameter names stay the options' names, so
    errors name the flag (failing.guarded)."""
    without, instead = frozenset(without), dict(instead or {})
    unknown = (without | set(instead)) - {f.name for f in dataclasses.fields(ModelInputs)}
    if unknown:
        raise TypeError(f"not fields of ModelInputs: {', '.join(sorted(unknown))}")
    return takes_group(INPUTS, ModelInputs, field_options(ModelInputs, without, instead))
