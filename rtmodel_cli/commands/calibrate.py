"""`rtmodel calibrate PROFILE [--out PARAMS] [--format table|json]`, registered onto the main typer app.

Why in the shell (rtmodel_cli/commands/), not in calibration/: the calibration package is the fit and
knows nothing of the command line; this module parses the options, calls it and prints the result.
Heavy work (scipy fits) is imported only when the command runs, so `rtmodel --help` stays fast; torch
never.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rtmodel_cli.gpu_counts import GpusOpt
from rtmodel_cli.options import GpusPerNodeOpt, IntraOpt, NetworkOpt
from rtmodel_cli.output_format import Format, TableJsonFormatOpt

if TYPE_CHECKING:
    from rich.console import Console

    from rtmodel_documents.calibration_document import Calibration
    from runtime_model.core.scenario import Network

Resolver = Callable[[str | None, str | None], "Network"]
# (link class, its flag, what the flag names): the flags that choose a preset for a link not measured
LINK_FLAGS = (("inter", "--network", "inter-node network"), ("intra", "--intra", "intra-node link"))


def register(app: typer.Typer, resolve_network: Resolver | None = None) -> None:
    """Add the `calibrate` command to `app`.

    resolve_network(inter_name, intra_name) -> Network turns `--network` / `--intra` into the preset
    used for link classes the profile cannot measure (default: runtime_model.presets.to_model); a name left
    out (None) is the default; it raises ValueError with a one-line message for an unknown name.
    """

    @app.command("calibrate")
    def calibrate_cmd(
        profile: Annotated[Path, typer.Argument(help="profile JSON written by `rtmodel profile`")],
        out: Annotated[
            str | None,
            typer.Option(
                "--out", help="write the fitted parameters (PARAMS JSON) here; its directory must exist"
            ),
        ] = None,
        fmt: TableJsonFormatOpt = Format.table,
        network: NetworkOpt = None,
        intra: IntraOpt = None,
        distribution: Annotated[
            str,
            typer.Option("--distribution", help="compute distribution the model uses: empirical | normal"),
        ] = "empirical",
        gpus: GpusOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
    ) -> None:
        """Fit the runtime model's parameters (links, per-shape costs, compute) to a profile.

        --network / --intra: the presets for a link the profile could not measure (the inter-node link of a
        one-node profile; the intra-node link with 1 rank per node, or no per-byte cost resolved); default:
        the ones `rtmodel advise` uses."""
        opts = CalibrateOptions(out, fmt, network, intra, distribution, gpus, gpus_per_node)
        run_calibrate(profile, opts, resolve_network)


@dataclass(frozen=True)
class CalibrateOptions:
    """`rtmodel calibrate`'s choices besides the profile (the command's flags; None: not given)."""

    out: str | Path | None = None  # write the fitted parameters (PARAMS JSON) here
    fmt: str = "table"  # table | json
    network: str | None = None  # preset for an inter-node link the profile could not measure
    intra: str | None = None  # preset for an intra-node link the profile could not measure
    distribution: str = "empirical"  # compute distribution the model uses: empirical | normal
    gpus: int | None = None  # also say how the fit extrapolates to this many GPUs
    gpus_per_node: int | None = None  # ... at this many per node (default: the profile's)


def run_calibrate(
    profile: Path,
    opts: CalibrateOptions | None = None,
    resolve_network: Resolver | None = None,
    console: Console | None = None,
) -> None:
    """The command's body as a plain function; raises CalibrationError (and OSError) for the shell to show.

    --out is checked and locked before any work (rtmodel_util.files: not PROFILE nor another input, one
    writer at a time), and written whole or not at all."""
    from rtmodel_cli.command_files import command_input_files
    from rtmodel_util.files import check_output_path, output_lock

    o = CalibrateOptions() if opts is None else opts
    if o.out is None:
        return _calibrate(profile, o, None, resolve_network, console)
    out = check_output_path(o.out, "--out", inputs={"PROFILE": profile, **command_input_files(("out",))})
    with output_lock(out, "--out"):
        _calibrate(profile, o, out, resolve_network, console)


def _calibrate(
    profile: Path,
    o: CalibrateOptions,
    out: Path | None,
    resolve_network: Resolver | None,
    console: Console | None,
) -> None:
    """run_calibrate once --out (if any) is checked and locked."""
    from calibration.calibrate_profile import calibrate
    from calibration.extrapolate import extrapolation_notes
    from calibration.profile_view import load_profile
    from calibration.unmeasured import say_link_choice
    from rtmodel_documents.calibration_document import save_calibration
    from runtime_model.core.scenario import ClusterShape

    fmt, network, intra, gpus = o.fmt, o.network, o.intra, o.gpus
    # Always a fallback, as `rtmodel advise` does: a link the profile could not measure comes from the
    # preset named by --network / --intra, else from the preset library's default (said in the notes).
    fallback = (resolve_network or preset_network)(network, intra)
    doc = load_profile(profile)
    cal = calibrate(doc, fallback_network=fallback, distribution=o.distribution, origin=str(profile))
    explain_fallback(cal, {"inter": network, "intra": intra})
    say_link_choice(cal.provenance, {"inter": network, "intra": intra}, "the default, as in `rtmodel advise`")
    target = None
    if gpus is not None:
        target = ClusterShape(
            gpus, o.gpus_per_node if o.gpus_per_node is not None else cal.measured_shape.gpus_per_node
        )
    if out is not None:
        save_calibration(cal, out)

    if fmt == "json":
        typer.echo(json.dumps(cal.to_json(), indent=1))
    else:
        print_calibration(cal, console, extrapolation_notes(cal, target) if target else None)
        if out is not None:
            (console or _console()).print(f"parameters written to {out}", markup=False)


def preset_network(inter: str | None, intra: str | None) -> Network:
    """A fallback Network from rtmodel's presets; only the link class the profile lacks is used.

    A name left out is filled exactly as `rtmodel advise --profile` fills it (presets.link_names: the
    library's defaults.toml, the intra-node link of its default GPU), so both commands fall back alike.
    """
    from runtime_model.presets import to_model as presets

    library = presets.builtin_library()
    network, intra_link = presets.link_names(inter, intra, library=library)
    return presets.network_preset(network, intra_link, library)


def explain_fallback(cal: Calibration, named: dict[str, str | None]) -> None:
    """Say, in the calibration's notes and provenance, which link came from which preset and why.

    calibrate() already notes why a link was not measured; here the shell adds whether the preset was
    the user's choice or the default, and which flag chooses another. `named`: link class -> the
    preset name the user gave (None: not given).
    """
    for cls, flag, what in LINK_FLAGS:
        source = cal.provenance.get(f"{cls}.bandwidth_Bps", "")  # calibrate(): "measured (...)" / "preset X"
        name = named.get(cls)
        if source.startswith("measured"):
            if name is not None:
                cal.notes.append(f"{flag} {name} not used: the profile measured the {cls}-node link")
            continue
        why = f"given by {flag} {name}" if name is not None else f"default preset; {flag} NAME chooses"
        for param in ("latency_s", "bandwidth_Bps"):
            key = f"{cls}.{param}"
            cal.provenance[key] = f"{cal.provenance.get(key, source)} (not measured; {why})"
        if name is None:
            cal.notes.append(
                f"{cls}-node link: {source} is the default {what} (the presets' defaults.toml, as in "
                f"`rtmodel advise`), used because the profile could not measure this link; pass {flag} NAME "
                "for your cluster's"
            )


def print_calibration(
    cal: Calibration, console: Console | None = None, extrapolation: list[str] | None = None
) -> None:
    """Rich tables: fitted values with uncertainty and fit quality, then provenance and notes."""
    from rich.markup import escape
    from rich.table import Table

    console = console or _console()
    info = cal.profile_info
    ms = cal.measured_shape
    header = (
        f"of {info.get('origin', 'profile')}: {ms.nodes} node(s) x {ms.gpus_per_node} ranks, backend "
        f"{info.get('backend')}, device {info.get('device')}, model {info.get('model')}"
    )
    console.print(f"[bold]Calibration[/bold] {escape(header)}")
    table = Table(title="fitted parameters (± 1 sigma)")
    for col in ("fit", "parameter", "value", "R²", "worst resid.", "n", "sizes"):
        table.add_column(col, overflow="fold")
    for f in cal.fits:
        first = True
        for pname, (value, sd) in f.params.items():
            table.add_row(
                escape(f.name) if first else "",
                escape(pname),
                _fmt_value(pname, value, sd),
                f"{f.r2:.4f}" if (first and f.r2 is not None) else "",
                f"{f.worst_rel_residual:.1%}" if (first and f.worst_rel_residual is not None) else "",
                str(f.n_points) if first else "",
                _fmt_range(f.size_range_bytes) if first else "",
            )
            first = False
    console.print(table)
    for f in cal.fits:
        for w in f.warnings:
            console.print(f"warning ({f.name}): {w}", markup=False, style="yellow")

    prov = Table(title="provenance")
    prov.add_column("parameter")
    prov.add_column("source", overflow="fold")
    for k, v in cal.provenance.items():
        prov.add_row(escape(k), escape(v))  # a reason or a name read from the profile: never markup
    console.print(prov)
    for note in cal.notes:
        console.print(f"- {note}", markup=False)
    for note in extrapolation or []:
        console.print(f"* {note}", markup=False, style="yellow" if note.startswith("WARNING") else None)


def _console() -> Console:
    from rtmodel_cli.shown_console import terminal_console

    return terminal_console(highlight=True)


def _fmt_value(name: str, v: float, sd: float) -> str:
    """'39.9 ± 0.09 us', '3.005 GB/s ± 0.5%', 'S/40.3 GB/s ± 0.3%' (a per-byte cost as its bandwidth)."""
    if name.endswith("_Bps"):
        return f"{v / 1e9:.4g} GB/s ± {sd / v:.2%}" if v > 0 else "0"
    if name == "per_byte_s":
        return f"S/{1 / v / 1e9:.4g} GB/s ± {sd / v:.2%}" if v > 0 else "0 s/B"
    if name.endswith("_s"):
        unit, scale = _time_unit(max(abs(v), abs(sd)))
        return f"{v * scale:.4g} ± {sd * scale:.2g} {unit}" if sd > 0 else f"{v * scale:.4g} {unit}"
    return f"{v:.4g} ± {sd:.2g}"


def _time_unit(v: float) -> tuple[str, float]:
    if v != v or v == float("inf") or v < 1e-3:
        return "us", 1e6
    return ("ms", 1e3) if v < 1 else ("s", 1.0)


def _fmt_range(r: tuple[int, int] | None) -> str:
    if not r:
        return ""
    from calibration.units import fmt_bytes

    return f"{fmt_bytes(r[0])}..{fmt_bytes(r[1])}"
