"""What every row's memory is judged from: the GPU's capacity, the training recipe and the activations
per GPU, from the best source there is.

Why here: a preset answer knows the GPU (its memory, gpus.toml), the model's optimizer and its measured
activations per batch unit (models.toml, `python -m profiler.memcount`); a trace knows its GPU and, with
profile_memory, its peak; a profile taken on GPUs knows what each holds and its DDP run's peak; without
a known GPU (a profile of CPU ranks) memory is judged only where --gpu-memory-gib sizes it. Activations,
best first: --activation-gib; a trace's or a profile's measured peak less DDP's states; a profile's own
model estimated on FakeTensors; the model preset's measured figure at this batch per GPU (checkpointed
with --activation-checkpointing); else not known, and the rows are judged on their states alone (said in
the JSON and the table: "+act").
"""

from __future__ import annotations

from dataclasses import replace

from rtmodel_documents.profile_document import ProfileDocument
from rtmodel_util.launch_env import CLUSTER_HINT
from runtime_model.advice.memory_fit import GIB, MemoryQuestion
from runtime_model.core.errors import InvalidCombination
from runtime_model.memory.accounting import TrainingRecipe
from runtime_model.presets.to_model import device_units_per_gpu

# a profiled model that cannot run on FakeTensors is measured on real CPU tensors up to this size (advise
# runs it twice: about 16 bytes per parameter with Adam's states, so 1.6 GB at most)
REAL_UP_TO_PARAMS = 100_000_000
MEMORY_KEYS = ("gpu_memory_gib", "activation_gib", "activation_checkpointing")
# traffic.toml's optimizers as the accounting names them (AdamW and fused Adam keep Adam's two states)
OPTIMIZER_STATES = {"adam": "adam", "adamw": "adam", "fused-adam": "adam", "accum-adam": "accum-adam"}
ADAM_LIKE = ("adam",)


def check_memory_options(opts: dict) -> None:
    """--gpu-memory-gib and --activation-gib inside their bounds (fields.BOUNDS): one line naming the
    flag, before any source is read."""
    from rtmodel_inputs.fields import BOUNDS

    for name in ("gpu_memory_gib", "activation_gib"):
        if opts.get(name) is not None:
            BOUNDS[name].check(name, opts[name])


def _recipe(optimizer: str, ddp_bucket_view: bool, checkpointing: bool) -> TrainingRecipe:
    """The recipe rtmodel prices: parameters, gradients and optimizer states in fp32 (AMP autocasts the
    matmuls; torch.amp keeps fp32 parameters, so no master copy), on a GPU (the foreach step)."""
    return TrainingRecipe(
        optimizer=OPTIMIZER_STATES.get(optimizer, "adam"),
        ddp_bucket_view=ddp_bucket_view,
        foreach_step=optimizer != "fused-adam",
        checkpointing=checkpointing,
    )


def _gossip_optimizer(recipe: TrainingRecipe) -> str | None:
    """Decent-DP's rows train with the advised line's AccumAdam (run_lines.code_line) where the model
    trains with Adam: one state more per parameter (decent_dp/optim.py accum_grad)."""
    return "accum-adam" if recipe.optimizer in ADAM_LIKE else None


def _preset_activations(
    model, precision: str, units_per_gpu: float, checkpointing: bool, padded: bool = False
):
    """(bytes, source) of the preset model's measured activations at this batch per GPU (`padded`: the
    units are a padded batch's slots, each holding activations as a real unit does), or (None, why)."""
    from runtime_model.presets.preset_types import AMP_PRECISIONS

    prefix = "checkpointed_" if checkpointing else ""
    per_unit = getattr(model, f"{prefix}activation_bytes_per_unit")
    fixed = getattr(model, f"{prefix}activation_fixed_bytes")
    if not per_unit:
        what = "checkpointed activations" if checkpointing else "activations"
        return None, f"not known: the model records no {what}; give --activation-gib"
    mode = "amp" if precision in AMP_PRECISIONS else "full"
    nbytes = per_unit[mode] * units_per_gpu + (fixed[mode] if fixed else 0.0)
    how = ", checkpointed" if checkpointing else ""
    source = model.activation_source or "models.toml"
    slots = " slots (padded)" if padded else "s"
    return nbytes, f"{model.name}'s at {units_per_gpu:g} {model.unit}{slots} per GPU ({mode}{how}): {source}"


def _given_activations(opts: dict):
    gib = opts.get("activation_gib")
    return None if gib is None else (gib * GIB, f"{gib:g} GiB per GPU (--activation-gib)")


def preset_memory(choice, library, opts: dict) -> MemoryQuestion:
    """The memory question of a preset answer: its GPU (or --gpu-memory-gib), its model's optimizer and
    activations, DDP's bucket view as the choice has it."""
    model = library.model(choice.model)
    checkpointing = bool(opts.get("activation_checkpointing"))
    recipe = _recipe(model.optimizer, choice.ddp_bucket_view, checkpointing)
    given = _given_activations(opts)
    if given is None:
        nbytes, source = _preset_activations(
            model,
            choice.precision,
            device_units_per_gpu(choice),
            checkpointing,
            padded=choice.padding_efficiency < 1,
        )
    else:
        nbytes, source = given
    capacity, device = _capacity(opts, library.gpu(choice.gpu).memory_GiB, choice.gpu)
    numels = model.backward_numels
    return MemoryQuestion(
        recipe,
        capacity,
        device,
        nbytes,
        source,
        _gossip_optimizer(recipe),
        float(max(numels)) if numels else 0.0,
        float(model.embedding_params),
    )


def measured_memory(opts: dict, scenario, facts: dict) -> MemoryQuestion | None:
    """The memory question beside a profile, calibration or trace: the GPU --gpu-memory-gib sizes, else
    the traced or profiled GPU's (what the trace's header or the profile's compute says it holds); None
    where neither is known (--gpu is refused beside them: they measured the compute). Activations:
    --activation-gib, else a trace's or a profile's measured peak less DDP's states
    (activations_from_peak), else a profile's model on FakeTensors. `facts`: the answer's JSON inputs."""
    checkpointing = bool(opts.get("activation_checkpointing"))
    if checkpointing and opts.get("activation_gib") is None and not facts.get("profile"):
        raise InvalidCombination(
            "{activation_checkpointing} needs {activation_gib} beside a trace or calibration (the presets' "
            "checkpointed figures are per preset model; a profile's model is estimated as it is)",
            activation_checkpointing=True,
            activation_gib=None,
        )
    profile = _profile_document(facts)
    measured_gib = (facts.get("trace_gpu_memory_bytes") or _profiled_gpu_bytes(profile) or 0) / GIB or None
    if measured_gib is None and opts.get("gpu_memory_gib") is None:
        return None
    gpu = facts.get("trace_gpu") or facts.get("trace_device") or _profiled_gpu_name(profile) or "your GPU"
    capacity, device = _capacity(opts, measured_gib, gpu)
    recipe = _recipe("adam", False, checkpointing)
    question = MemoryQuestion(
        recipe, capacity, device, None, "not known: give --activation-gib", _gossip_optimizer(recipe)
    )
    given = _given_activations(opts)
    if given is not None:
        return replace(question, activation_bytes=given[0], activation_source=given[1])
    peak = facts.get("trace_peak_allocated_bytes")
    if peak is not None:
        return activations_from_peak(question, scenario, peak, "your trace's peak allocated (profile_memory)")
    if profile is None:
        return question
    from rtmodel_documents.profile_bounds import profiled_peak_bytes

    peak = profiled_peak_bytes(profile, facts["profile"])
    if peak is not None:
        return activations_from_peak(question, scenario, peak, "your profile's DDP peak allocated")
    return activations_of_profiled_model(question, profile, checkpointing)


def _profile_document(facts: dict) -> ProfileDocument | None:
    """The profile an answer was calibrated from, read through its type (None for presets, traces and
    calibration files)."""
    from rtmodel_documents.profile_file import read_profile

    if not facts.get("profile") or "calibration" in facts:
        return None
    return read_profile(facts["profile"])


def _profiled_gpu_bytes(profile: ProfileDocument | None) -> float | None:
    """The smallest GPU a profile ran on (compute.device_memory_bytes; CPU ranks name no GPU)."""
    if profile is None or profile.shape is None or profile.shape.device != "cuda" or profile.compute is None:
        return None
    held = profile.compute.device_memory_bytes or ()
    return float(min(held)) if held else None


def _profiled_gpu_name(profile: ProfileDocument | None) -> str | None:
    return None if profile is None or profile.shape is None else profile.shape.device_name


def activations_of_profiled_model(
    question: MemoryQuestion, profile: ProfileDocument, checkpointing: bool
) -> MemoryQuestion:
    """The question with the activations of the profile's own workload (its model, model_args and batch
    per rank), estimated on FakeTensors by PyTorch's MemTracker (profiler/activation_memory.py: no GPU,
    nothing allocated; a small model that reads its data on real CPU tensors). A model that does not build
    there is one line (ActivationMemoryError); without torch the activations stay unknown, said so."""
    import importlib.util

    workload = profile.workload
    name, batch = (workload.model, workload.batch_per_rank) if workload is not None else (None, None)
    if not name or not batch:
        return question
    if importlib.util.find_spec("torch") is None:  # advise runs without the [cluster] extra
        return replace(
            question,
            activation_source=f"not known: estimating the profile's model needs torch ({CLUSTER_HINT}); "
            "give --activation-gib",
        )
    from profiler.activation_memory import NotOnFakeTensors, estimate_for_workload
    from rtmodel_util.run_dirs import torch_caches_scratch

    amp = str(workload.precision or "fp32") in ("bf16", "fp16")

    try:
        with torch_caches_scratch():  # MemTracker's import would leave TMPDIR/torchinductor_<user>
            measure = estimate_for_workload(
                name,
                int(batch),
                model_args=dict(workload.model_args or {}),
                amp=amp,
                checkpointing=checkpointing,
                real_up_to_params=REAL_UP_TO_PARAMS,
            )
    except NotOnFakeTensors as exc:  # it builds but reads its data, and is too large to run here for real
        return replace(question, activation_source=f"not known: {exc}; give --activation-gib")
    source = (
        f"the profile's model ({name}, {batch} per rank{', checkpointed' if checkpointing else ''}) on "
        "FakeTensors (profiler/activation_memory.py, PyTorch's MemTracker)"
    )
    return replace(
        question,
        activation_bytes=float(measure.activation_bytes),
        activation_grad_bytes=float(max(measure.activation_grad_bytes, measure.activation_bytes)),
        activation_source=source,
    )


def activations_from_peak(question: MemoryQuestion, scenario, peak_bytes: float, what: str) -> MemoryQuestion:
    """The question with the activations a measured DDP run's peak allocation (`what`: a trace's, a
    profile's) implies: the peak less DDP's forward/backward memory without activations (accounting's
    phases: parameters, optimizer states, DDP's buckets and what persists), never below 0. Where the
    measured peak was the optimizer step's, this is an upper bound on the activations, and said so."""
    from runtime_model.advice.memory_fit import memory_of

    ddp = memory_of(scenario, "ddp", question)
    states = dict(ddp.phases)["forward/backward"]
    activations = max(0.0, peak_bytes - states)
    bound = (
        " (at most: the peak may be the optimizer step's)" if activations <= ddp.peak_bytes - states else ""
    )
    source = f"{what} ({peak_bytes / GIB:.3g} GiB) less DDP's states ({states / GIB:.3g} GiB){bound}"
    return replace(question, activation_bytes=activations, activation_source=source)


def _capacity(opts: dict, preset_gib: float | None, gpu: str) -> tuple[float, str]:
    """(bytes, the device as a verdict names it): --gpu-memory-gib over the GPU preset's memory."""
    gib = opts.get("gpu_memory_gib")
    if gib is not None:
        return gib * GIB, f"{gpu} ({gib:g} GiB, --gpu-memory-gib)"
    return preset_gib * GIB, f"{gpu} ({preset_gib:g} GiB)"
