"""The options a measured source makes moot, refused by name rather than silently ignored.

Why a module of its own: presets, profiles, calibration files and traces (sources.py, traces.py) refuse
the same options for the same reason, read from the table of inputs (fields.py).
"""

from __future__ import annotations

from rtmodel_inputs.fields import LINK_OPTIONS, PROFILE_MEASURES_COLLECTIVES, PROFILE_REPLACES


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
