"""`rtmodel advise`: predict All-Reduce and every gossip topology for one cluster, and recommend one.

Never imports torch: it answers offline from presets, or from a profile calibrated on the fly.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rtmodel_cli.local_sgd_options import (
    LocalSgdBitsOpt,
    LocalSgdFragmentsOpt,
    LocalSgdHOpt,
    LocalSgdOverlapOpt,
    LocalSgdReplicaOpt,
    local_sgd_configs,
)
from rtmodel_cli.model_options import ModelInputs, takes_model_inputs
from rtmodel_cli.options import (
    Format,
    FormatOpt,
    MarginOpt,
    TopologiesOpt,
    network_kw,
    own_numbers,
    variation_kw,
)

DEFAULT_GPUS = 64
# The question advise answers, its own options (scenario-file keys too; the model's inputs are ModelInputs).
GpusOpt = Annotated[int | None, typer.Option(help=f"Number of GPUs (workers) n (default {DEFAULT_GPUS}).")]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(
        help="What to rank: 'iteration' (time per iteration; ties inside the margin go to the better "
        "consensus) or 'accuracy' (time to the same loss: options known to keep All-Reduce's "
        "iterations first, hopeless consensus never). Default: iteration."
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", help="Print every note on the inputs under the verdict.")
]
BriefOpt = Annotated[
    bool,
    typer.Option("--brief", help="Only the verdict, the fastest rows and the lines to run (15 lines at most)."),
]


def register(app: typer.Typer) -> None:
    app.command("advise")(advise)


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


def refuse_options_a_profile_replaces(given: dict) -> None:
    """UserError naming every option in PROFILE_REPLACES that the user gave (not None) with --profile."""
    from rtmodel_cli.failing import flag_of
    from runtime_model.errors import UserError

    flags = [flag_of(name) for name in PROFILE_REPLACES if given.get(name) is not None]
    if flags:
        which, them = (flags[0], "it") if len(flags) == 1 else (", ".join(flags), "them")
        raise UserError(
            f"{which} cannot be used with --profile: the profile measured compute (each rank's too) and "
            f"gradient buckets on your cluster; drop {them} (--network and --intra may still name links it could not measure)"
        )


def refuse_options_a_profile_measured(given: dict, provenance: dict[str, str]) -> None:
    """UserError for an option that would have no effect with this profile: how collectives use the
    links (always measured), or a preset for a link class the profile measured itself."""
    from rtmodel_cli.failing import flag_of
    from runtime_model.errors import UserError

    for name in PROFILE_MEASURES_COLLECTIVES:
        if given.get(name) is not None:
            raise UserError(
                f"{flag_of(name)} cannot be used with --profile: the profile measured how collectives run on "
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
):
    """Presets, or a profile calibrated on the fly (same data types either way); `nccl_tests` (an
    nccl-tests output) replaces the presets' inter-node link (with_nccl_tests).

    `preset_request` holds `presets.resolve`'s keyword arguments (the user's preset choices); with a
    profile only gpus, gpus_per_node and the network names are used (the latter for links the profile
    could not measure), and any option the profile replaces is refused (`PROFILE_REPLACES`). Your own
    model's size (`your_model.KEYS`) adds it to the library as the model.
    Returns (scenario, provenance, notes, inputs)."""
    from runtime_model import presets

    library = presets.load_library(preset_dirs or ())
    if profile is None:
        return _preset_scenario(preset_request, library, nccl_tests)
    if nccl_tests is not None:
        from runtime_model.errors import UserError

        raise UserError(
            "--nccl-tests replaces a preset's inter-node link; with --profile the profile's measured links "
            "are used (give one or the other)"
        )
    from calibration import scenario_from_profile
    from calibration.unmeasured import say_link_choice

    refuse_options_a_profile_replaces(preset_request)
    network, intra = presets.link_names(
        preset_request.get("network"), preset_request.get("intra"), library=library
    )
    fallback = presets.network_preset(network, intra, library)
    profiled = scenario_from_profile(
        profile, preset_request["gpus"], preset_request.get("gpus_per_node"), fallback_network=fallback
    )
    refuse_options_a_profile_measured(preset_request, profiled.provenance)
    provenance = dict(profiled.provenance)  # a link the profile marks unmeasured: whose preset stands in
    say_link_choice(provenance, {cls: preset_request.get(name) for name, cls in LINK_OPTIONS.items()}, "the default")
    measured = profiled.measured_shape
    margin, why = profiled.margin()
    inputs = {
        "profile": str(profile),
        "measured_shape": {"gpus": measured.gpus, "gpus_per_node": measured.gpus_per_node},
        "profile_margin": margin,
    }
    scenario, notes = profiled.scenario, list(profiled.notes)
    if preset_request.get("compute_ms") is not None:
        scenario, line = with_compute_ms(scenario, preset_request["compute_ms"])
        provenance["compute"] = scenario.compute.source
        notes.append(line)
        print(line, file=sys.stderr)  # stderr: --format json keeps stdout one document
    return scenario, {**provenance, "margin": why}, notes, inputs


def _preset_scenario(preset_request: dict, library, nccl_tests: Path | None):
    """scenario_for's presets: (scenario, provenance, notes, inputs), the network from nccl-tests if given."""
    from rtmodel_cli import your_model
    from runtime_model import presets

    request = {k: v for k, v in preset_request.items() if k not in your_model.KEYS}
    library, request["model"] = your_model.add(
        library,
        your_model.given(preset_request),
        request.get("model"),
        request.get("compute_ms"),
        request.get("message_dtype"),
    )
    choice = presets.resolve(**request, library=library)
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
    inputs = {"preset": dict(vars(choice))}
    yours = your_model.provenance(library, choice, request.get("compute_cv") is not None)
    if yours is not None:
        prov["compute"], inputs["your_model"] = yours
    if nccl_tests is not None:
        sc, prov["network"] = with_nccl_tests(sc, nccl_tests)
        inputs["nccl_tests"] = str(nccl_tests)
    return sc, prov, [], inputs


def with_nccl_tests(scenario, path: Path):
    """(scenario with the nccl-tests run's inter-node link and its own group cost, the provenance line)."""
    from dataclasses import replace

    from calibration.nccl_tests_link import nccl_tests_link
    from calibration.nccl_tests_output import read_nccl_tests

    run = read_nccl_tests(path)
    link = nccl_tests_link(run, scenario.network)
    return replace(scenario, network=link.network), link.provenance(run)


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
    and ranks scales with it, and the optimizer time and gradient buckets stay as measured."""
    from dataclasses import replace

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


@takes_model_inputs()
def advise(
    gpus: GpusOpt = None,
    *,
    inputs: ModelInputs,
    margin: MarginOpt = None,
    topology: TopologiesOpt = None,
    objective: ObjectiveOpt = None,
    local_sgd_h: LocalSgdHOpt = None,
    local_sgd_overlap: LocalSgdOverlapOpt = None,
    local_sgd_fragments: LocalSgdFragmentsOpt = None,
    local_sgd_bits: LocalSgdBitsOpt = None,
    local_sgd_replica: LocalSgdReplicaOpt = None,
    verbose: VerboseOpt = False,
    brief: BriefOpt = False,
    format: FormatOpt = Format.table,
):
    """Predict per-iteration time of All-Reduce, each gossip topology and local SGD; recommend one."""
    from rtmodel_cli import scenario_file

    given = {**inputs.as_dict(), "gpus": gpus, "margin": margin, "topology": topology, "objective": objective}
    given.update(
        local_sgd_h=local_sgd_h,
        local_sgd_overlap=local_sgd_overlap,
        local_sgd_fragments=local_sgd_fragments,
        local_sgd_bits=local_sgd_bits,
        local_sgd_replica=local_sgd_replica,
    )
    if brief:
        from rtmodel_cli.brief import refuse_beside

        refuse_beside(verbose, None if format is Format.table else format.value)
    path = inputs.scenario
    opts, taken = scenario_file.merge(given, scenario_file.read(path) if path else {})
    with scenario_file.blamed(path, taken):
        _advise(opts, format, "brief" if brief else "verbose" if verbose else "")


def scenario_request(opts: dict) -> dict:
    """`scenario_for`'s request from a command's merged options (scenario_file.KEYS but margin, topology
    and objective): the presets' choices, your own numbers and the variation, checked; --gpus defaults."""
    from rtmodel_cli import your_model

    own = own_numbers(opts["compute_ms"], opts["optimizer_ms"], opts["message_dtype"], opts["dispatch_us"])
    own.update(your_model.given(opts))
    request = {name: opts[name] for name in REQUEST_KEYS}
    request.update(network_kw(opts["nics_per_node"], opts["nccl_algo"]))
    request["gpus"] = DEFAULT_GPUS if opts["gpus"] is None else opts["gpus"]
    varied = variation_kw(opts["straggler"], opts["rank_cv"], opts["node_cv"], request["gpus"])
    return {**request, **own, **varied}


def _advise(opts: dict, format: Format, view: str = "") -> None:
    """`advise` once the scenario file (if any) is merged under the command line's options."""
    from runtime_model import report
    from runtime_model.advisor import advise as run_advice
    from runtime_model.constraints import Interval
    from runtime_model.crossover import with_crossovers

    objective = _objective(opts["objective"])
    local_sgd = local_sgd_configs(opts)
    sc, prov, notes, inputs = scenario_for(
        scenario_request(opts), opts["profile"], opts["presets"], opts["nccl_tests"]
    )
    margin, prov["margin"] = _margin(opts["margin"], inputs.get("profile_margin"), prov.get("margin"))
    Interval(0.0, 1.0, closed="left").check("margin", margin)
    adv = run_advice(
        sc,
        margin=margin,
        topologies=opts["topology"] or None,
        provenance=prov,
        objective=objective,
        local_sgd=local_sgd,
    )
    adv.notes.extend(notes)
    adv = with_crossovers(adv)
    if format is Format.json:
        sys.stdout.write(report.to_json(adv, inputs) + "\n")
    elif format is Format.csv:
        sys.stdout.write(report.to_csv(adv, inputs))
    elif view == "brief":
        from rtmodel_cli.brief import render_brief
        from rtmodel_cli.tables import terminal_console

        render_brief(adv, terminal_console())
    else:
        from rtmodel_cli.tables import render_advice, terminal_console

        render_advice(adv, terminal_console(), verbose=view == "verbose")


def _objective(given: str | None) -> str:
    """--objective, checked: one line naming the choices for anything else."""
    from runtime_model.advisor import ITERATION, check_objective

    return ITERATION if given is None else check_objective(given)


def _margin(given: float | None, profile_margin: float | None, profile_why: str | None) -> tuple[float, str]:
    """The too-close-to-call margin on the speedup and why: yours, else the measured error of the
    inputs' source: presets against the paper's GPU runs; a profile's composed from what it measured
    (calibration.profiled.ProfiledScenario.margin)."""
    from runtime_model.confidence import PRESETS, margin_for

    if given is not None:
        return given, f"±{given:.1%} on the speedup (--margin)"
    if profile_margin is not None:
        return profile_margin, profile_why
    return margin_for(PRESETS)
