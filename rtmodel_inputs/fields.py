"""Every input an answer takes, declared once: its value's type and which sources may set it.

Why one table (as scikit-learn declares `_parameter_constraints`): which option may meet which, what a
scenario file may hold, which paths are relative to it and what a profile or a calibration file already
fixes were thirteen name lists across the shell; each is now a question asked of this table. A new
input is one row here, its reader, and its docs (docs/development.md, "How to add an input").
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_model.core.constraints import (
    ACTIVATION_GIB,
    AT_LEAST_ONE,
    BUCKET_CAP_MIB_RANGE,
    COMPUTE_CV,
    COMPUTE_MS,
    DISPATCH_US,
    GLOBAL_BATCH,
    MEMORY_GIB,
    MFU,
    NICS_PER_NODE,
    OPTIMIZER_MS,
    PADDING_EFFICIENCY,
    PARAMS_RANGE,
    STEP_MS,
    Interval,
)

AT_LEAST_ONE_UNIT = Interval(1.0, None, closed="left")  # a batch per GPU: one unit at least
MARGIN_RANGE = Interval(0.0, 1.0, closed="left")

# The types a value may have, as a scenario file spells them (the option's type).
INT, FLOAT, TEXT, TEXTS, BOOL = "an integer", "a number", "a string", "a list of strings", "true or false"
NUMBER_TEXT = 'a number or a string (such as "1.5:4")'


@dataclass(frozen=True)
class InputField:
    """One input. `value`: its type (above); `request`: a keyword of presets.resolve as given;
    `profile_replaces`: a profile (or calibration, or trace) measured what it would set, so it is refused
    beside one; `profile_measures`: how collectives use the links, which a profile always measures;
    `link`: the link class a preset name fills where a profile did not measure it; `calibration_fixed`: a
    calibration file holds it already; `path`: a file or directory (relative to a scenario file);
    `measured`: a cluster's measured parameters (advise's scenario file only, never a plot's);
    `plot_ignores`: the question a plot asks itself (its own flags), dropped from a scenario file;
    `plot_file_only`: a plot has no flag for it and takes it from its scenario file; `choices`: the
    enum (rtmodel_inputs.request) its text must name; `bounds`: the range the model checks it against
    (runtime_model.core.constraints), from which tests generate a value outside it."""

    name: str
    value: str
    request: bool = False
    profile_replaces: bool = False
    profile_measures: bool = False
    link: str | None = None
    calibration_fixed: bool = False
    path: bool = False
    measured: bool = False
    plot_ignores: bool = False
    plot_file_only: bool = False
    choices: str | None = None
    bounds: Interval | None = None


F = InputField
FIELDS: tuple[InputField, ...] = (
    F("gpus", INT, plot_ignores=True, bounds=AT_LEAST_ONE),
    F("gpus_per_node", INT, request=True, bounds=AT_LEAST_ONE),
    F("gpu", TEXT, request=True, profile_replaces=True),
    F("network", TEXT, request=True, link="inter", calibration_fixed=True),
    F("intra", TEXT, request=True, link="intra", calibration_fixed=True),
    F("model", TEXT, request=True, profile_replaces=True),
    F(
        "params", FLOAT, profile_replaces=True, bounds=PARAMS_RANGE
    ),  # your own model instead of a preset: parameters
    F("param_mb", FLOAT, profile_replaces=True),  # or its gradient message in MiB
    F("global_batch", FLOAT, request=True, profile_replaces=True, bounds=GLOBAL_BATCH),
    F("precision", TEXT, request=True, profile_replaces=True, plot_file_only=True),
    F("mfu", FLOAT, request=True, profile_replaces=True, plot_file_only=True, bounds=MFU),
    F(
        "padding_efficiency", FLOAT, request=True, profile_replaces=True, plot_file_only=True,
        bounds=PADDING_EFFICIENCY,
    ),
    F("compute_cv", FLOAT, request=True, profile_replaces=True, plot_file_only=True, bounds=COMPUTE_CV),
    F("straggler", NUMBER_TEXT, profile_replaces=True),  # FACTOR[:COUNT]: 1.5 or "1.3:8"
    F("rank_cv", FLOAT, profile_replaces=True, bounds=COMPUTE_CV),
    F("node_cv", FLOAT, profile_replaces=True, bounds=COMPUTE_CV),
    F("bucket_cap_mb", FLOAT, request=True, profile_replaces=True, bounds=BUCKET_CAP_MIB_RANGE),
    F("ddp_bucket_view", BOOL, request=True, profile_replaces=True),  # gradient_as_bucket_view=True
    F("cluster", TEXT, request=True, profile_replaces=True),
    F(
        "compute_ms", FLOAT, bounds=COMPUTE_MS
    ),  # with a profile or trace: replaces its compute (with_compute_ms)
    F("optimizer_ms", FLOAT, profile_replaces=True, bounds=OPTIMIZER_MS),
    F(
        "dispatch_us", FLOAT, profile_replaces=True, bounds=DISPATCH_US
    ),  # your host's profiler.opcount --dispatch, us per op
    F("message_dtype", TEXT, profile_replaces=True, choices="MessageDtype"),
    F("nics_per_node", INT, request=True, profile_measures=True, bounds=NICS_PER_NODE),
    F("nccl_algo", TEXT, request=True, profile_measures=True, choices="NcclAlgo"),
    F(
        "step_ms", FLOAT, plot_ignores=True, bounds=STEP_MS
    ),  # your measured DDP iteration: scales any source's compute
    F("step_gpus", INT, plot_ignores=True, bounds=AT_LEAST_ONE),  # where it was measured
    F(
        "batch_per_gpu", FLOAT, profile_replaces=True, plot_ignores=True, bounds=AT_LEAST_ONE_UNIT
    ),  # weak scaling: global = it x n
    F("gpu_memory_gib", FLOAT, bounds=MEMORY_GIB),  # one GPU's memory, in place of --gpu's preset
    F("activation_gib", FLOAT, bounds=ACTIVATION_GIB),  # your activations per GPU (peak allocated less states)
    F("activation_checkpointing", BOOL),  # you checkpoint activations: the preset's checkpointed figure
    F("margin", FLOAT, plot_ignores=True, bounds=MARGIN_RANGE),
    F("objective", TEXT, plot_ignores=True),  # iteration | accuracy
    F("topologies", TEXTS, plot_ignores=True),  # --topologies: the rows to show
    F("local_sgd_h", INT, plot_ignores=True),  # local SGD's row (0: none)
    F("local_sgd_overlap", INT, plot_ignores=True),
    F("local_sgd_fragments", INT, plot_ignores=True),
    F("local_sgd_bits", INT, plot_ignores=True),
    F("local_sgd_replica", TEXT, plot_ignores=True),
    F("presets", TEXTS, path=True, calibration_fixed=True),  # directories of your own preset files
    F("profile", TEXT, path=True, measured=True),
    F("calibration", TEXT, path=True, measured=True),  # `rtmodel calibrate --out`, for a profile
    F("nccl_tests", TEXT, path=True),  # an nccl-tests output: the link between nodes
    F("trace", TEXTS, path=True, measured=True),  # torch.profiler traces, one per rank
    F("traced_batch", FLOAT, measured=True),  # the per-GPU batch the traces ran
)
del F


def names(**wanted) -> tuple[str, ...]:
    """The names of the inputs whose attributes equal `wanted`, in the table's order: names(path=True)."""
    return tuple(f.name for f in FIELDS if all(getattr(f, k) == v for k, v in wanted.items()))


OPTION_NAMES = names()
VALUE_TYPES = {f.name: f.value for f in FIELDS}
REQUEST_KEYS = ("gpus", *names(request=True))  # presets.resolve's keywords every model takes
PROFILE_REPLACES = names(profile_replaces=True)
PROFILE_MEASURES_COLLECTIVES = names(profile_measures=True)
LINK_OPTIONS = {f.name: f.link for f in FIELDS if f.link is not None}
CALIBRATION_FIXED = names(calibration_fixed=True)
PATH_KEYS = names(path=True)
MEASURED_KEYS = names(measured=True)
PLOT_IGNORES = names(plot_ignores=True)
PLOT_KEYS = tuple(f.name for f in FIELDS if not (f.plot_ignores or f.measured))
PLOT_FROM_FILE_ONLY = names(plot_file_only=True)
CHOICE_KEYS = {f.name: f.choices for f in FIELDS if f.choices is not None}
BOUNDS = {f.name: f.bounds for f in FIELDS if f.bounds is not None}
