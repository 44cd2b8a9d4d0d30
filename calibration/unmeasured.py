"""Links a profile marks unmeasured (shape.unmeasured_links): which patterns they spoil, and the one line
that tells the user which preset stood in.

Why: on one GPU shared by two ranks, or on nodes the local launcher pretends on one machine, the
profiler's patterns time a host copy or a loopback, not the cluster's link. Used as the link, such a
number (1.7 GB/s "NVLink") moved every prediction; filled from a preset instead, and said so once,
the advice stays what it would be for the link the user named (or the presets' default).
"""

from __future__ import annotations

from runtime_model.core.scenario import GroupShape

WHAT = {"intra": "intra-node link", "inter": "inter-node link"}
FLAGS = {"intra": "--intra", "inter": "--network"}


def link_line_key(cls: str) -> str:
    """The provenance key of a marked link's one line: "intra-node link" / "inter-node link"."""
    return WHAT[cls]


def links_of(group: GroupShape) -> set[str]:
    """The link classes a group's all-reduce crosses: intra inside a node (or with several members per
    node of a group spanning nodes), inter between nodes."""
    if group.nodes == 1:
        return {"intra"}
    return {"inter", "intra"} if group.ranks_per_node > 1 else {"inter"}


def unused_pattern_note(label: str, group: GroupShape, unmeasured: dict[str, str]) -> str | None:
    """Why a pattern is left out (it crosses a link the profile marks unmeasured), else None."""
    spoiled = sorted(links_of(group) & set(unmeasured))
    if not spoiled:
        return None
    cls = spoiled[0]
    return (
        f"{label}: not used (neither as a group cost nor for a link): it crosses the {WHAT[cls]}, which the "
        f"profile did not measure ({unmeasured[cls]})"
    )


def kept_as_measured(unmeasured: dict[str, str]) -> list[str]:
    """Notes for a calibration that keeps marked links as measured (a run on the profiled machine)."""
    return [
        f"{WHAT[cls]} kept as measured for a run on the profiled machine, though it is no real link ({why})"
        for cls, why in unmeasured.items()
    ]


def say_link_choice(provenance: dict[str, str], named: dict[str, str | None], default: str) -> None:
    """Add to each marked link's line whether its preset was the user's (named[cls]: the name given to
    --intra / --network) or the default (`default`: how the caller's defaults are chosen)."""
    for cls, what in WHAT.items():
        line = provenance.get(what)
        if line is None:
            continue
        name = named.get(cls)
        why = f"given by {FLAGS[cls]} {name}" if name is not None else f"{default}; {FLAGS[cls]} NAME chooses"
        provenance[what] = f"{line} ({why})"
