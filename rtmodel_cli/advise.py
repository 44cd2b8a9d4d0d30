"""`rtmodel advise`: predict All-Reduce and every gossip topology for one cluster, and recommend one.

Never imports torch: it answers offline from presets, or from a profile calibrated on the fly.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rtmodel_cli.options import (
    BucketMibOpt,
    ClusterOpt,
    Format,
    FormatOpt,
    GlobalBatchOpt,
    GpuOpt,
    GpusPerNodeOpt,
    IntraOpt,
    MarginOpt,
    ModelOpt,
    NetworkOpt,
    PresetsOpt,
    ProfileOpt,
    TopologiesOpt,
)
from runtime_model import defaults
from runtime_model.constraints import COMPUTE_CV, MFU


def register(app: typer.Typer) -> None:
    app.command("advise")(advise)


# What a profile measured on the user's cluster (compute time and its variance, the gradient buckets):
# the preset options that would set these have no effect with --profile, so giving one is refused
# rather than silently ignored. --gpus, --gpus-per-node (the target shape) and --network/--intra
# (links the profile could not measure) still apply.
PROFILE_REPLACES = (
    "gpu",
    "precision",
    "mfu",
    "model",
    "global_batch",
    "compute_cv",
    "bucket_cap_mb",
    "cluster",
)


def refuse_options_a_profile_replaces(given: dict) -> None:
    """UserError naming every option in PROFILE_REPLACES that the user gave (not None) with --profile."""
    from rtmodel_cli.failing import flag_of
    from runtime_model.errors import UserError

    flags = [flag_of(name) for name in PROFILE_REPLACES if given.get(name) is not None]
    if flags:
        which, them = (flags[0], "it") if len(flags) == 1 else (", ".join(flags), "them")
        raise UserError(
            f"{which} cannot be used with --profile: the profile measured compute and gradient buckets "
            f"on your cluster; drop {them} (--network and --intra may still name links it could not measure)"
        )


def scenario_for(preset_request: dict, profile: Path | None, preset_dirs: list[Path] | None = None):
    """Presets, or a profile calibrated on the fly (same data types either way).

    `preset_request` holds `presets.resolve`'s keyword arguments (the user's preset choices); with a
    profile only gpus, gpus_per_node and the network names are used (the latter for links the profile
    could not measure), and any option the profile replaces is refused (`PROFILE_REPLACES`).
    Returns (scenario, provenance, notes, inputs)."""
    from runtime_model import presets

    library = presets.load_library(preset_dirs or ())
    if profile is None:
        choice = presets.resolve(**preset_request, library=library)
        sc = presets.scenario_from_choice(choice, library)
        unit = library.model(choice.model).unit
        prov = {
            "compute": sc.compute.source + f", global batch {choice.global_batch:g} {unit}s",
            "network": f"preset {choice.intra} (intra-node) + {choice.network} (inter-node)",
        }
        return sc, prov, [], {"preset": dict(vars(choice))}
    from calibration import scenario_from_profile

    refuse_options_a_profile_replaces(preset_request)
    network, intra = presets.link_names(
        preset_request.get("network"), preset_request.get("intra"), library=library
    )
    fallback = presets.network_preset(network, intra, library)
    profiled = scenario_from_profile(
        profile, preset_request["gpus"], preset_request.get("gpus_per_node"), fallback_network=fallback
    )
    measured = profiled.measured_shape
    inputs = {
        "profile": str(profile),
        "measured_shape": {"gpus": measured.gpus, "gpus_per_node": measured.gpus_per_node},
    }
    return profiled.scenario, dict(profiled.provenance), list(profiled.notes), inputs


def advise(
    gpus: Annotated[int, typer.Option(help="Number of GPUs (workers) n.")] = 64,
    gpus_per_node: GpusPerNodeOpt = None,
    gpu: GpuOpt = None,
    network: NetworkOpt = None,
    intra: IntraOpt = None,
    model: ModelOpt = None,
    global_batch: GlobalBatchOpt = None,
    precision: Annotated[
        str | None, typer.Option(help="fp32, tf32, fp16 or bf16 (default: the GPU's).")
    ] = None,
    mfu: Annotated[
        float | None,
        typer.Option(
            help=f"Model-FLOPs utilisation assumed for compute time, {MFU.describe()} (default: the GPU's)."
        ),
    ] = None,
    compute_cv: Annotated[
        float | None,
        typer.Option(
            help="Coefficient of variation of per-iteration compute, "
            f"{COMPUTE_CV.describe()} (0 = no variance; default: the model's)."
        ),
    ] = None,
    bucket_cap_mb: BucketMibOpt = None,
    cluster: ClusterOpt = None,
    profile: ProfileOpt = None,
    presets: PresetsOpt = None,
    margin: MarginOpt = defaults.MARGIN,
    topology: TopologiesOpt = None,
    format: FormatOpt = Format.table,
):
    """Predict per-iteration time of All-Reduce and each gossip topology, and recommend one."""
    from runtime_model import report
    from runtime_model.advisor import advise as run_advice
    from runtime_model.constraints import Interval

    Interval(0.0, 1.0, closed="left").check("margin", margin)
    request = dict(
        gpus=gpus,
        gpus_per_node=gpus_per_node,
        gpu=gpu,
        network=network,
        intra=intra,
        model=model,
        global_batch=global_batch,
        precision=precision,
        mfu=mfu,
        compute_cv=compute_cv,
        bucket_cap_mb=bucket_cap_mb,
        cluster=cluster,
    )
    sc, prov, notes, inputs = scenario_for(request, profile, presets)
    adv = run_advice(sc, margin=margin, topologies=topology or None, provenance=prov)
    adv.notes.extend(notes)
    if format is Format.json:
        sys.stdout.write(report.to_json(adv, inputs) + "\n")
    elif format is Format.csv:
        sys.stdout.write(report.to_csv(adv, inputs))
    else:
        from rtmodel_cli.tables import render_advice, terminal_console

        render_advice(adv, terminal_console())
