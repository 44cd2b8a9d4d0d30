"""`--help` in panels: the options a first-time user needs come first, then the measurements that replace
the presets, then the finer details (issue 50).

Why a table of flags here and not a panel on each option: click's plain help (app.py: whole flag names
at 80 columns, which rich's table cut) has no panels, and the same flag (--model, --profile, --format)
belongs to the same panel in every command that takes it; a flag not listed lands in "Other options".
"""

from __future__ import annotations

from typer.core import TyperCommand

PANELS: dict[str, tuple[str, ...]] = {
    "Common": (
        "--gpus",
        "--gpus-range",
        "--gpus-list",
        "--cluster",
        "--clusters",
        "--model",
        "--models",
        "--network",
        "--networks",
        "--gpu",
        "--gpus-per-node",
        "--global-batch",
        "--batch-per-gpu",
        "--out",
        "--profile",
        "--topology",
        "--topologies",
        "--recommended",
        "--quick",
        "--brief",
        "--format",
    ),
    "Your measurements (in place of the presets)": (
        "--calibration",
        "--trace",
        "--traced-batch",
        "--nccl-tests",
        "--compute-ms",
        "--optimizer-ms",
        "--step-ms",
        "--step-gpus",
        "--dispatch-us",
        "--activation-gib",
        "--scenario",
    ),
    "Memory": ("--gpu-memory-gib", "--activation-checkpointing"),
    "The advice": ("--objective", "--margin", "--verbose"),
    "Local SGD (DiLoCo)": (
        "--local-sgd-h",
        "--local-sgd-overlap",
        "--local-sgd-fragments",
        "--local-sgd-bits",
        "--local-sgd-replica",
    ),
    "The measuring run (profile, validate)": (
        "--model-arg",
        "--batch-per-rank",
        "--optimizer",
        "--nproc-per-node",
        "--ranks-per-node",
        "--iterations",
        "--warmup",
        "--reps",
        "--timeout-s",
        "--backend",
        "--resume",
        "--results",
        "--report",
        "--quiet",
    ),
    "Model and cluster details": (
        "--params",
        "--param-mb",
        "--intra",
        "--precision",
        "--mfu",
        "--padding-efficiency",
        "--compute-cv",
        "--bucket-cap-mb",
        "--ddp-bucket-view",
        "--presets",
        "--message-dtype",
        "--nics-per-node",
        "--nccl-algo",
        "--straggler",
        "--rank-cv",
        "--node-cv",
    ),
}
OTHER = "Other options"
PANEL_OF = {flag: panel for panel, flags in PANELS.items() for flag in flags}


class PanelledCommand(TyperCommand):
    """A command whose --help lists its options panel by panel (PANELS' order, declaration order inside)."""

    def format_options(self, ctx, formatter) -> None:
        args, panels = [], {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append(record)
            else:
                panel = next((PANEL_OF[o] for o in param.opts if o in PANEL_OF), OTHER)
                panels.setdefault(panel, []).append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        for panel in (*PANELS, OTHER):
            if panel in panels:
                with formatter.section(panel if len(panels) > 1 else "Options"):
                    formatter.write_dl(panels[panel])
