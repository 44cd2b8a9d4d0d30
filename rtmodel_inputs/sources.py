"""What `rtmodel advise`, the plots and notebooks predict from: `resolve_inputs(options)`, every source
resolved once into one `AdviceInputs` (presets, a profile calibrated on the fly or the calibration file
`rtmodel calibrate --out` wrote, traces; an nccl-tests log for the link between nodes beside any of them;
your DDP step scaling any of them), with where each input came from and what a preset answer assumed.

Why below the shell: each view of an answer (the verdict, the tuned DDP, the crossovers, the plots)
must draw on the same measured inputs; which option may meet which is the table of inputs (fields.py).
A profile measured compute, its variance, each rank's speed and the gradient buckets, so the options that
would set these are refused beside it rather than silently ignored; --compute-ms is the exception (it
replaces the profile's compute: with_compute_ms), and --gpus, --gpus-per-node and --network/--intra
(links the profile could not measure) still apply.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rtmodel_inputs.compute_scaling import with_compute_ms
from rtmodel_inputs.fields import (
    BOUNDS,
    CALIBRATION_FIXED,
    LINK_OPTIONS,
    OPTION_NAMES,
    PATH_KEYS,
    REQUEST_KEYS,
)
from rtmodel_inputs.inputs import CALIBRATION, NCCL_TESTS, PROFILE, STEP, TRACE, AdviceInputs
from rtmodel_inputs.memory_inputs import MEMORY_KEYS, check_memory_options
from rtmodel_inputs.preset_inputs import STEP_KEYS
from rtmodel_inputs.refusals import refuse_options_a_profile_measured, refuse_options_a_profile_replaces
from rtmodel_inputs.request import check_batch_per_gpu, network_kw, own_numbers, variation_kw
from rtmodel_inputs.step import check_step
from rtmodel_util.shown import say
from runtime_model.core.defaults import DEFAULT_GPUS


def resolve_inputs(opts: dict) -> AdviceInputs:
    """Every source in `opts` (a command's options merged with its --scenario file, by option name; a
    missing name is not given) resolved once into the inputs an answer is drawn from: presets, or a
    profile / its calibration, or your training's traces; an nccl-tests log for the link between nodes
    with any of them; your measured DDP step scaling any of them; --margin over the sources' own."""
    from rtmodel_inputs.nccl_tests import said_once

    with said_once():  # an nccl-tests run's warnings once, for every scenario it is applied to
        return _resolved(opts)


def _resolved(opts: dict) -> AdviceInputs:
    """resolve_inputs' work."""
    from runtime_model.advice.confidence import Margin

    opts = {name: _as_paths(name, opts.get(name)) for name in OPTION_NAMES}
    if opts["margin"] is not None:
        BOUNDS["margin"].check("margin", opts["margin"])
    check_memory_options(opts)
    request = scenario_request(opts)
    check_step(request)
    if opts["trace"] or opts["profile"] is not None or opts["calibration"] is not None:
        resolved = _measured_at(opts, request, request["gpus"])
        if any(request.get(k) is not None for k in STEP_KEYS):  # your step corrects what they measured
            from rtmodel_inputs.step import with_step

            what = "your trace" if opts["trace"] else "your profile"
            here = resolved.scenario

            def at_n(n: int):
                return here if n == request["gpus"] else _measured_at(opts, request, n).scenario

            resolved = with_step(resolved, at_n, request, what)
    else:
        resolved = scenario_for(request, None, opts["presets"], opts["nccl_tests"])
    if opts["margin"] is not None:
        given = opts["margin"]
        resolved = replace(resolved, margin=Margin(given, given, f"±{given:.1%} on the speedup (--margin)"))
    if resolved.memory is None:  # a measured source: judged where its GPU is known (memory_inputs)
        resolved = _with_measured_memory(resolved, opts)
    provenance = {**resolved.provenance, "margin": resolved.margin.why}
    if resolved.sources:  # the header's and JSON's one line naming every measured source
        provenance["measured"] = ", ".join(_source_named(s, opts) for s in resolved.sources)
    return replace(resolved, provenance=provenance)


def _with_measured_memory(resolved: AdviceInputs, opts: dict) -> AdviceInputs:
    """A measured answer's memory question (memory_inputs.measured_memory), and its provenance line."""
    from rtmodel_inputs.memory_inputs import measured_memory

    memory = measured_memory(opts, resolved.scenario, resolved.document)
    if memory is None:
        line = "not judged: give --gpu-memory-gib with a profile (the GPU it ran on is not known)"
    else:
        line = f"{memory.device}; activations {memory.activation_source}"
    return replace(resolved, memory=memory, provenance={**resolved.provenance, "memory": line})


def _source_named(source: str, opts: dict) -> str:
    """A measured source as the header names it: its kind and its file (or the step's figure)."""
    files = {PROFILE: opts["profile"], CALIBRATION: opts["calibration"], NCCL_TESTS: opts["nccl_tests"]}
    if source == TRACE:
        return f"{TRACE} ({len(opts['trace'])} file{'s' if len(opts['trace']) > 1 else ''})"
    if source in files:
        return f"{source} ({Path(files[source]).name})"
    at = opts["step_gpus"] or opts["gpus"] or DEFAULT_GPUS
    return f"DDP step ({opts['step_ms']:g} ms at {at} GPUs)"


def _measured_at(opts: dict, request: dict, gpus: int) -> AdviceInputs:
    """The inputs a profile, its calibration or traces give at `gpus` (your step aside: with_step)."""
    at = {**request, "gpus": gpus, **dict.fromkeys(STEP_KEYS)}
    if not opts["trace"]:
        return scenario_for(at, opts["profile"], opts["presets"], opts["nccl_tests"], opts["calibration"])
    from rtmodel_inputs.traces import traced_scenario

    sc, prov, notes, doc = traced_scenario({**opts, "gpus": gpus}, at)
    sources = (TRACE, NCCL_TESTS) if opts["nccl_tests"] is not None else (TRACE,)
    return AdviceInputs(sc, prov, preset_margin(sc), tuple(notes), doc, None, sources)


def _as_paths(name: str, value):
    """A path input as Path(s) (the Python entry point takes strings, as a scenario file spells them)."""
    if name not in PATH_KEYS or value is None:
        return value
    return [Path(v) for v in value] if isinstance(value, list | tuple) else Path(value)


def scenario_for(
    preset_request: dict,
    profile: Path | None,
    preset_dirs: list[Path] | None = None,
    nccl_tests: Path | None = None,
    calibration: Path | None = None,
) -> AdviceInputs:
    """Presets, or measured parameters: a profile calibrated on the fly, or the calibration file
    `rtmodel calibrate PROFILE --out FILE` wrote (the same scenario, provenance, notes and margin as that
    profile gives; same data types either way); `nccl_tests` (an nccl-tests output) replaces the
    inter-node link of either (nccl_tests.with_nccl_tests).

    `preset_request` holds `presets.resolve`'s keyword arguments (the user's preset choices); with a
    profile only gpus, gpus_per_node and the network names are used (the latter for links the profile
    could not measure; a calibration file holds its links already: CALIBRATION_FIXED), and any option the
    profile replaces is refused (`PROFILE_REPLACES`). Your own model's size (`your_model.KEYS`) adds it
    to the library as the model."""
    from rtmodel_inputs.preset_inputs import preset_parts
    from runtime_model.presets import to_model as presets

    if profile is None and calibration is None:
        p = preset_parts(preset_request, presets.load_library(preset_dirs or ()), nccl_tests)
        margin = preset_margin(p.scenario, STEP in p.sources)
        return AdviceInputs(
            p.scenario, p.provenance, margin, (), p.document, p.tuned_ddp_scenario, p.sources, p.memory
        )
    flag = _measured_flag(profile, calibration)
    refuse_options_a_profile_replaces(preset_request, flag)
    if calibration is None:
        profiled, inputs = _profiled(profile, preset_request, preset_dirs)
    else:
        profiled, inputs = _calibrated(calibration, {**preset_request, "presets": preset_dirs})
    refuse_options_a_profile_measured(preset_request, profiled.provenance, flag)
    provenance = dict(profiled.provenance)  # a link the profile marks unmeasured: whose preset stands in
    if calibration is None:  # a calibration file's lines say it already (`rtmodel calibrate`)
        from calibration.unmeasured import say_link_choice

        say_link_choice(
            provenance, {cls: preset_request.get(name) for name, cls in LINK_OPTIONS.items()}, "the default"
        )
    measured = profiled.measured_shape
    margin = profiled.margin()
    inputs.update(
        measured_shape={"gpus": measured.gpus, "gpus_per_node": measured.gpus_per_node},
        profile_margin=margin.equivalence,
        profile_interval_margin=margin.interval,
    )
    scenario, notes = profiled.scenario, list(profiled.notes)
    sources = (PROFILE,) if calibration is None else (CALIBRATION,)
    if nccl_tests is not None:
        scenario, line = _profile_with_nccl_tests(scenario, provenance, nccl_tests, flag)
        provenance["network"], inputs["nccl_tests"] = line, str(nccl_tests)
        sources += (NCCL_TESTS,)
    if preset_request.get("compute_ms") is not None:
        scenario, line = with_compute_ms(scenario, preset_request["compute_ms"])
        provenance["compute"] = scenario.compute.source
        notes.append(line)
        say(line)  # stderr: --format json keeps stdout one document
    return AdviceInputs(
        scenario, {**provenance, "margin": margin.why}, margin, tuple(notes), inputs, None, sources
    )


def _profile_with_nccl_tests(scenario, provenance: dict, nccl_tests: Path, flag: str):
    """(scenario, network line): the profile's links inside a node kept, the nccl-tests run's between
    nodes in place of the profile's (its measured shapes across nodes dropped: the run describes that
    link) or of the preset standing in for it; the line says which took precedence."""
    import re

    from rtmodel_inputs.nccl_tests import with_nccl_tests

    inter_measured = provenance.get("inter.bandwidth_Bps", "").startswith("measured")
    net = scenario.network
    inside = {k: v for k, v in net.group_costs.items() if re.search(r"-s1-", k + "-")}
    scenario = replace(scenario, network=replace(net, group_costs=inside))
    scenario, line = with_nccl_tests(scenario, nccl_tests)
    replaced = "the profile's measured one" if inter_measured else "the preset that stood in for it"
    precedence = (
        f"precedence: inside a node the {flag.removeprefix('--')}'s measured links; between nodes --nccl-tests "
        f"(in place of {replaced})"
    )
    provenance["precedence"] = precedence
    return scenario, f"{line}; {precedence}"


def _measured_flag(profile: Path | None, calibration: Path | None) -> str:
    """The flag that brought the measured parameters (--profile or --calibration): one of them."""
    from runtime_model.core.errors import UserError

    if profile is not None and calibration is not None:
        raise UserError(
            "--profile and --calibration both give your cluster's measured parameters: give one (--calibration "
            "is the file `rtmodel calibrate PROFILE --out FILE` wrote)"
        )
    return "--profile" if calibration is None else "--calibration"


def _profiled(profile: Path, preset_request: dict, preset_dirs: list[Path] | None):
    """(ProfiledScenario, inputs) of a profile calibrated now, a link it could not measure from the preset
    --network / --intra name (else the library's default), as `rtmodel calibrate` fills it."""
    from calibration import scenario_from_profile
    from runtime_model.presets import to_model as presets

    library = presets.load_library(preset_dirs or ())
    network, intra = presets.link_names(
        preset_request.get("network"), preset_request.get("intra"), library=library
    )
    fallback = presets.network_preset(network, intra, library)
    profiled = scenario_from_profile(
        profile, preset_request["gpus"], preset_request.get("gpus_per_node"), fallback_network=fallback
    )
    return profiled, {"profile": str(profile)}


def _calibrated(calibration: Path, given: dict):
    """(ProfiledScenario, inputs) of a calibration file (`rtmodel calibrate --out`), placed on the target
    as a profile calibrated now is (calibration.scenario_from_calibration): the links it holds stand.
    `given`: the request and --presets."""
    from calibration import scenario_from_calibration
    from rtmodel_documents.calibration_document import load_calibration
    from rtmodel_inputs.request import flag_of
    from runtime_model.core.errors import UserError

    for name in CALIBRATION_FIXED:
        if given.get(name) not in (None, []):
            raise UserError(
                f"{flag_of(name)} cannot be used with --calibration: the file holds the links `rtmodel calibrate` "
                "chose (for a link its profile could not measure: `rtmodel calibrate PROFILE --network NAME "
                "--intra NAME --out FILE`); drop it"
            )
    cal = load_calibration(calibration)
    origin = cal.profile_info.get("origin") or str(calibration)
    profiled = scenario_from_calibration(cal, given["gpus"], given.get("gpus_per_node"), f"profile {origin}")
    return profiled, {"calibration": str(calibration), "profile": origin}


def preset_margin(scenario, stepped: bool = False):
    """The margin of an answer on preset links (or an nccl-tests one): the measured errors of the
    scenario's source class (confidence.class_margin; `stepped`: its compute backed out of your DDP step);
    a profile states its own composed one."""
    from runtime_model.advice.confidence import class_margin, source_class

    return class_margin(source_class(scenario, stepped))


def scenario_request(opts: dict) -> dict:
    """`scenario_for`'s request from a command's merged options (scenario_file.KEYS but margin, topology
    and objective): the presets' choices, your own numbers and the variation, checked; --gpus defaults."""
    from rtmodel_inputs import your_model

    own = own_numbers(opts["compute_ms"], opts["optimizer_ms"], opts["message_dtype"], opts["dispatch_us"])
    own.update(your_model.given(opts))
    request = {name: opts[name] for name in REQUEST_KEYS}
    request.update({name: opts.get(name) for name in STEP_KEYS})  # advise's; a plot has none
    request.update(network_kw(opts["nics_per_node"], opts["nccl_algo"]))
    request["gpus"] = DEFAULT_GPUS if opts["gpus"] is None else opts["gpus"]
    request["batch_per_gpu"] = opts.get("batch_per_gpu")  # advise's weak scaling (a plot sweeps its own)
    request.update({name: opts.get(name) for name in MEMORY_KEYS})  # the memory question's (memory_inputs)
    check_batch_per_gpu(request["batch_per_gpu"], opts["global_batch"])
    varied = variation_kw(opts["straggler"], opts["rank_cv"], opts["node_cv"], request["gpus"])
    return {**request, **own, **varied}
