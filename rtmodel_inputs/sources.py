"""What `rtmodel advise` (and the plots that answer the same question) predict from: the user's options
as presets.resolve's request, a profile calibrated on the fly (or the calibration file `rtmodel
calibrate --out` wrote) or an nccl-tests output in place of a preset link, with where each input came from and what a preset answer assumed.

Why a module of its own: the advise command and the plots assemble the same inputs; the command module
keeps only its options and its views.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from rtmodel_inputs.request import check_batch_per_gpu, network_kw, own_numbers, variation_kw

DEFAULT_GPUS = 64
STEP_KEYS = ("step_ms", "step_gpus")  # your measured DDP step and its n (advise's, not presets.resolve's)
TUNED_DDP_SCENARIO = "tuned_ddp_scenario"  # an inputs key no document carries: advise pops it

# What a profile measured on the user's cluster (compute time, its variance and each rank's speed, the
# gradient buckets):
# the preset options that would set these have no effect with --profile, so giving one is refused
# rather than silently ignored. --compute-ms is the exception: it replaces the profile's compute
# (with_compute_ms), e.g. to ask about a bigger batch or another precision on the profiled cluster. --gpus, --gpus-per-node (the target shape) and --network/--intra
# (links the profile could not measure) still apply.
PROFILE_REPLACES = (
    "gpu",
    "precision",
    "mfu",
    "model",
    "global_batch",
    "compute_cv",
    "straggler",
    "rank_cv",
    "node_cv",
    "bucket_cap_mb",
    "ddp_bucket_view",
    "cluster",
    "optimizer_ms",
    "dispatch_us",
    "message_dtype",
    "params",
    "param_mb",
    "step_ms",
    "step_gpus",
    "batch_per_gpu",
)
# How collectives use the links: with a profile they are measured (NCCL's own algorithm choice on NCCL,
# gloo's ring on gloo), so these options would be silently ignored; they are refused instead.
PROFILE_MEASURES_COLLECTIVES = ("nics_per_node", "nccl_algo")
# The preset link options, by the link class they name: they fill only a link the profile did not measure.
LINK_OPTIONS = {"network": "inter", "intra": "intra"}
# presets.resolve's keyword arguments that every model takes (the user's own numbers go by own_numbers).
REQUEST_KEYS = (
    "gpus",
    "gpus_per_node",
    "gpu",
    "network",
    "intra",
    "model",
    "global_batch",
    "precision",
    "mfu",
    "compute_cv",
    "bucket_cap_mb",
    "ddp_bucket_view",
    "cluster",
    "nics_per_node",
    "nccl_algo",
)


# The links a calibration file holds were chosen when it was written (`rtmodel calibrate --network/--intra`
# for a link its profile could not measure): these options would be silently ignored beside it.
CALIBRATION_FIXED = ("network", "intra", "presets")


def refuse_options_a_profile_replaces(given: dict, flag: str = "--profile") -> None:
    """UserError naming every option in PROFILE_REPLACES that the user gave (not None) with --profile (or
    --calibration, `flag`: the same measured parameters, calibrated already)."""
    from rtmodel_inputs.request import flag_of
    from runtime_model.core.errors import UserError

    flags = [flag_of(name) for name in PROFILE_REPLACES if given.get(name) is not None]
    if flags:
        which, them = (flags[0], "it") if len(flags) == 1 else (", ".join(flags), "them")
        links = (
            " (--network and --intra may still name links it could not measure)"
            if flag == "--profile"
            else ""
        )
        what = (
            "your training's trace measured compute and"
            if flag == "--trace"
            else "the profile measured compute (each rank's too) and"
        )
        raise UserError(
            f"{which} cannot be used with {flag}: {what} gradient buckets on your cluster; drop {them}{links}"
        )


def refuse_options_a_profile_measured(
    given: dict, provenance: dict[str, str], flag: str = "--profile"
) -> None:
    """UserError for an option that would have no effect with this profile (or calibration, `flag`): how
    collectives use the links (always measured), or a preset for a link class the profile measured itself."""
    from rtmodel_inputs.request import flag_of
    from runtime_model.core.errors import UserError

    for name in PROFILE_MEASURES_COLLECTIVES:
        if given.get(name) is not None:
            raise UserError(
                f"{flag_of(name)} cannot be used with {flag}: the profile measured how collectives run on "
                "your cluster (its NICs and NCCL's or gloo's own algorithms); drop it"
            )
    for name, cls in LINK_OPTIONS.items():
        if given.get(name) is not None and provenance.get(f"{cls}.bandwidth_Bps", "").startswith("measured"):
            where = "between nodes" if cls == "inter" else "inside a node"
            raise UserError(
                f"{flag_of(name)} {given[name]} would not be used: the profile measured the link {where} itself; "
                f"drop {flag_of(name)} (it names only a link a profile could not measure)"
            )


def scenario_for(
    preset_request: dict,
    profile: Path | None,
    preset_dirs: list[Path] | None = None,
    nccl_tests: Path | None = None,
    calibration: Path | None = None,
):
    """Presets, or measured parameters: a profile calibrated on the fly, or the calibration file
    `rtmodel calibrate PROFILE --out FILE` wrote (the same scenario, provenance, notes and margin as that
    profile gives; same data types either way); `nccl_tests` (an nccl-tests output) replaces the presets'
    inter-node link (with_nccl_tests).

    `preset_request` holds `presets.resolve`'s keyword arguments (the user's preset choices); with a
    profile only gpus, gpus_per_node and the network names are used (the latter for links the profile
    could not measure; a calibration file holds its links already: CALIBRATION_FIXED), and any option the
    profile replaces is refused (`PROFILE_REPLACES`). Your own model's size (`your_model.KEYS`) adds it
    to the library as the model.
    Returns (scenario, provenance, notes, inputs)."""
    from runtime_model.presets import to_model as presets

    if profile is None and calibration is None:
        return _preset_scenario(preset_request, presets.load_library(preset_dirs or ()), nccl_tests)
    flag = _measured_flag(profile, calibration, nccl_tests)
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
    if preset_request.get("compute_ms") is not None:
        scenario, line = with_compute_ms(scenario, preset_request["compute_ms"])
        provenance["compute"] = scenario.compute.source
        notes.append(line)
        print(line, file=sys.stderr)  # stderr: --format json keeps stdout one document
    return scenario, {**provenance, "margin": margin.why}, notes, inputs


def _measured_flag(profile: Path | None, calibration: Path | None, nccl_tests: Path | None) -> str:
    """The flag that brought the measured parameters (--profile or --calibration): one of them, and no
    nccl-tests link beside it (one line each)."""
    from runtime_model.core.errors import UserError

    if profile is not None and calibration is not None:
        raise UserError(
            "--profile and --calibration both give your cluster's measured parameters: give one (--calibration "
            "is the file `rtmodel calibrate PROFILE --out FILE` wrote)"
        )
    flag = "--profile" if calibration is None else "--calibration"
    if nccl_tests is not None:
        raise UserError(
            f"--nccl-tests replaces a preset's inter-node link; with {flag} the profile's measured links "
            "are used (give one or the other)"
        )
    return flag


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
    from calibration import load_calibration, scenario_from_calibration
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


def _preset_scenario(preset_request: dict, library, nccl_tests: Path | None):
    """scenario_for's presets: (scenario, provenance, notes, inputs), the network from nccl-tests if given."""
    from rtmodel_inputs import your_model
    from runtime_model.advice.assumptions import preset_assumptions
    from runtime_model.presets import to_model as presets

    request = {
        k: v for k, v in preset_request.items() if k not in (*your_model.KEYS, *STEP_KEYS, "batch_per_gpu")
    }
    if preset_request.get("batch_per_gpu") is not None:  # weak scaling: the global batch at this n
        request["global_batch"] = preset_request["batch_per_gpu"] * request["gpus"]
    step_ms, step_gpus = (preset_request.get(k) for k in STEP_KEYS)
    library, request["model"] = your_model.add(
        library,
        your_model.given(preset_request),
        request.get("model"),
        request.get("compute_ms") if step_ms is None else step_ms,  # a step stands in for your compute
        request.get("message_dtype"),
    )
    anchor = None
    if step_ms is not None or step_gpus is not None:
        request, anchor = _anchored(request, library, step_ms, step_gpus, preset_request.get("batch_per_gpu"))
    choice = presets.resolve(presets.PresetRequest(**request), library=library)
    sc = presets.scenario_from_choice(choice, library)
    unit = library.model(choice.model).unit
    prov = {"compute": sc.compute.source + f", global batch {choice.global_batch:g} {unit}s"}
    if (dispatch := host_dispatch_provenance(choice, library)) is not None:
        prov["host dispatch"] = dispatch
    if (floor := presets.host_floor_line(choice, library)) is not None:
        prov["host floor"] = floor
    prov["network"] = f"preset {choice.intra} (intra-node) + {choice.network} (inter-node)"
    machine_keys = ("gpu", "network", "intra", "gpus_per_node", "cluster")
    if all(preset_request.get(k) is None for k in machine_keys):
        prov["machine"] = (
            f"{library.defaults.machine} (the defaults; --cluster, --gpu, --network choose yours)"
        )
    inputs = {
        "preset": dict(vars(choice)),
        "assumptions": preset_assumptions(choice, library, request, anchor).to_dict(),
    }
    if (
        not choice.ddp_bucket_view
    ):  # DDP as it could run with its own bucket view (tuned_ddp; popped by advise)
        inputs[TUNED_DDP_SCENARIO] = presets.scenario_from_choice(
            replace(choice, ddp_bucket_view=True), library
        )
    if anchor is not None:
        prov["step anchor"], inputs["step_anchor"] = anchor.line(), anchor.to_dict()
    yours = your_model.provenance(library, choice, request.get("compute_cv") is not None)
    if yours is not None:
        prov["compute"], inputs["your_model"] = yours
    if nccl_tests is not None:
        from rtmodel_inputs.nccl_tests import with_nccl_tests

        sc, prov["network"] = with_nccl_tests(sc, nccl_tests)
        inputs["nccl_tests"] = str(nccl_tests)
    return sc, prov, [], inputs


def _anchored(request: dict, library, step_ms: float | None, step_gpus: int | None, per_gpu: float | None):
    """(request with the compute backed out of your DDP step, the StepAnchor): step_anchor.py. With
    --batch-per-gpu the step's n has its own global batch (weak scaling)."""
    from runtime_model.advice.confidence import class_margin, source_class
    from runtime_model.advice.step_anchor import anchor_compute
    from runtime_model.core.constraints import AT_LEAST_ONE
    from runtime_model.core.errors import InvalidCombination, InvalidValue, UserError
    from runtime_model.prediction.iteration import allreduce_prediction
    from runtime_model.presets import to_model as presets

    if step_ms is None:
        raise InvalidCombination(
            "{step_gpus} says where your --step-ms was measured: give the step too", step_gpus=step_gpus
        )
    if request.get("compute_ms") is not None:
        raise InvalidCombination(
            "{step_ms} backs the compute out of your DDP step and {compute_ms} gives it: give one",
            step_ms=step_ms,
            compute_ms=request["compute_ms"],
        )
    n = request["gpus"] if step_gpus is None else step_gpus
    AT_LEAST_ONE.check("step_gpus", n)
    at_n = {**request, "gpus": n, **({} if per_gpu is None else {"global_batch": per_gpu * n})}
    try:  # the shape at the step's n, checked once with the names the user typed
        at_step = presets.scenario_from_choice(
            presets.resolve(presets.PresetRequest(**{**at_n, "compute_ms": 1.0}), library=library), library
        )
    except (InvalidValue, InvalidCombination) as exc:
        from rtmodel_inputs.request import flag_of

        raise UserError(
            exc.message_for(lambda name: "--step-gpus" if name == "gpus" else flag_of(name))
        ) from exc

    def step_ms_at(compute_ms: float | None) -> float:
        choice = presets.resolve(presets.PresetRequest(**{**at_n, "compute_ms": compute_ms}), library=library)
        return allreduce_prediction(presets.scenario_from_choice(choice, library)).mean_s * 1e3

    own = library.model(request["model"] or library.defaults.model).params_only  # yours: no preset compute
    margin = class_margin(source_class(at_step)).equivalence
    anchor = anchor_compute(step_ms_at, step_ms, n, None if own else step_ms_at(None), margin)
    return {**request, "compute_ms": anchor.compute_ms}, anchor


def margin_of(scenario, inputs: dict, provenance: dict, given: float | None = None):
    """The confidence.Margin an advice states: yours (--margin, both figures), a profile's composed one
    (scenario_for put it in `inputs` and its why in `provenance`), else the measured errors of the
    preset's source class."""
    from runtime_model.advice.confidence import Margin, class_margin, source_class

    if given is not None:
        return Margin(given, given, f"±{given:.1%} on the speedup (--margin)")
    if "profile_margin" in inputs:
        return Margin(inputs["profile_margin"], inputs["profile_interval_margin"], provenance["margin"])
    return class_margin(source_class(scenario))


def host_dispatch_provenance(choice, library) -> str | None:
    """Where the host's cost per op came from: your --dispatch-us, else the GPU preset's figure and its
    source (a host that is not yours), each plus the CUDA launch cost measured on a GPU host; None when
    your measured times leave nothing for it to price."""
    if choice.compute_ms is not None and choice.optimizer_ms is not None and choice.dispatch_us is None:
        return None
    g = library.gpu(choice.gpu)
    launch = f" + {g.launch_us:g} us/op CUDA launch (measured on an H100 host: gpus.toml launch_source)"
    if choice.dispatch_us is not None:
        return f"{choice.dispatch_us:g} us/op (--dispatch-us, this host's opcount --dispatch){launch}"
    return (  # where the preset's figure was measured: gpus.toml's dispatch_source (`rtmodel presets`)
        f"{g.dispatch_us:g} us/op from the {g.name} preset, measured on another host{launch}: give "
        "--dispatch-us from `python -m profiler.opcount --model transformer-base --dispatch` on yours"
    )


def with_compute_ms(scenario, compute_ms: float):
    """(scenario with forward + backward = compute_ms per iteration, the line that says so).

    Only the compute changes: forward/backward keep the profile's split, the spread across iterations
    and ranks scales with it, and the optimizer time and gradient buckets stay as measured. compute_ms
    is checked by the model's one check of it, as with presets."""
    from dataclasses import replace

    from runtime_model.presets.preset_choice import check_measured_times

    check_measured_times(compute_ms, None)

    def scaled(compute):
        factor = compute_ms * 1e-3 / compute.compute_s if compute.compute_s > 0 else 1.0
        return replace(
            compute,
            forward_s=compute.forward_s * factor,
            backward_s=compute.backward_s * factor,
            distribution=compute.distribution.scaled(factor),
            source=f"your --compute-ms {compute_ms:g} ms (profile's forward/backward split and spread; "
            f"optimizer {compute.optimizer_s * 1e3:.3g} ms and buckets as profiled)",
        )

    measured_ms = scenario.compute.compute_s * 1e3
    gossip = None if scenario.gossip_compute is None else scaled(scenario.gossip_compute)
    line = (
        f"--compute-ms {compute_ms:g}: replaces the profile's compute ({measured_ms:,.1f} ms forward + backward "
        "per iteration); its communication, optimizer time and buckets are kept"
    )
    return replace(scenario, compute=scaled(scenario.compute), gossip_compute=gossip), line


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
    check_batch_per_gpu(request["batch_per_gpu"], opts["global_batch"])
    varied = variation_kw(opts["straggler"], opts["rank_cv"], opts["node_cv"], request["gpus"])
    return {**request, **own, **varied}


def assumed_of(inputs: dict):
    """The preset answer's assumptions (None for a profile, whose network name says what it measured)."""
    from runtime_model.advice.assumptions import Assumptions

    doc = inputs.get("assumptions")
    return None if doc is None else Assumptions.from_dict(doc)
