"""A group of options declared once as a dataclass, spliced into each command that takes it.

Why: typer reads a command's options from its signature, and several commands take the same group (the
model's inputs, local SGD's five options). Each field of the group's dataclass is one option (its name
the parameter, its annotation the Option, its default the default); the command declares one
keyword-only parameter of the group's type, and `takes_group` puts the fields' options in its place and
hands the body one object, so an option of a group is declared in one place only.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing


def takes_group(param: str, group: type, options: dict[str, inspect.Parameter]):
    """Decorator: the command's keyword-only parameter `param` becomes `options` (parameters named as
    `group`'s fields) in its signature; the body gets `group(**their values)` as `param`."""

    def decorate(command):
        own = resolved_parameters(command)
        names = list(own)
        if param not in own or own[param].kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"{command.__name__} needs a keyword-only parameter `{param}: {group.__name__}`")
        if set(options) & set(own):
            raise TypeError(
                f"{command.__name__} declares {', '.join(sorted(set(options) & set(own)))} itself"
            )
        at = names.index(param)
        params = [*(own[n] for n in names[:at]), *options.values(), *(own[n] for n in names[at + 1 :])]

        @functools.wraps(command)
        def run(**kwargs):
            grouped = group(**{name: kwargs.pop(name) for name in options})  # before kwargs is passed on
            return command(**kwargs, **{param: grouped})

        run.__signature__ = inspect.Signature(params)
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


def field_options(
    group: type, without=frozenset(), instead: dict | None = None
) -> dict[str, inspect.Parameter]:
    """`group`'s fields as keyword-only parameters (their annotations the options), but `without`, and
    with `instead`'s option for a field a command declares otherwise (e.g. a repeatable --network)."""
    hints, instead = typing.get_type_hints(group, include_extras=True), instead or {}
    return {
        f.name: inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=f.default,
            annotation=instead.get(f.name, hints[f.name]),
        )
        for f in dataclasses.fields(group)
        if f.name not in without
    }


def resolved_parameters(command) -> dict[str, inspect.Parameter]:
    """The command's parameters, keyword-only (typer passes options by name), with their annotations
    evaluated (typer finds its Option in them; they are strings under `from __future__ import annotations`)."""
    hints = typing.get_type_hints(command, include_extras=True)
    return {
        name: p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(name, p.annotation))
        for name, p in inspect.signature(command).parameters.items()
    }
