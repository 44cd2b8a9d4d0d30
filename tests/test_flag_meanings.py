"""One name, one meaning (issue "The house"): a flag takes the same kind of value in every command that has
it. `--gpus` used to be a count in advise, a range `8:1024` or a list in the sweep plots and either in
`plot factors`; `--topology` one name in validate and a repeatable filter in advise. Each command's
options are read from the CLI as built (click's params, after typer), so a future drift fails here.
"""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_cli.output_format import Format
from runtime_model.core.defaults import DEFAULT_GPUS

# click's Path takes the text as typed and only hands it on as a Path: for the user the same kind of value
TEXT_TYPES = {"str", "text", "string", "path"}


def commands(cmd=None, path=()) -> dict[str, object]:
    """Every leaf command by its path ("advise", "plot speedup", "emulate run")."""
    cmd = cmd or typer.main.get_command(app)
    if not hasattr(cmd, "commands"):  # typer vendors click: its classes are read by what they have
        return {" ".join(path): cmd}
    out = {}
    for name, sub in cmd.commands.items():
        out.update(commands(sub, (*path, name)))
    return out


def value_kind(param) -> tuple:
    """What a flag takes, as the user types it: its value's type, whether it repeats, whether it is an
    on/off switch, how many values one use takes."""
    name = getattr(param.type, "name", type(param.type).__name__).lower()
    if hasattr(param.type, "choices"):
        name = "choice"
    elif name in TEXT_TYPES:
        name = "text"
    return (name, param.multiple, param.is_flag, param.nargs)


def flag_uses() -> dict[str, dict[str, object]]:
    """flag -> {command path: its click param}, over every option of every command."""
    uses: dict[str, dict[str, object]] = {}
    for where, cmd in commands().items():
        for param in cmd.params:
            if param.param_type_name != "option":
                continue
            for flag in (*param.opts, *param.secondary_opts):
                uses.setdefault(flag, {})[where] = param
    return uses


def test_the_survey_sees_every_command():
    assert {"advise", "topologies", "presets", "calibrate", "validate", "profile", "plot speedup",
            "plot factors", "emulate run"} <= set(commands())  # fmt: skip
    assert len(flag_uses()["--gpus"]) >= 7


@pytest.mark.parametrize("flag", sorted(flag_uses()))
def test_a_flag_takes_one_kind_of_value_in_every_command(flag):
    uses = flag_uses()[flag]
    kinds = {where: value_kind(param) for where, param in uses.items()}
    assert len(set(kinds.values())) == 1, f"{flag} takes different kinds of value: {kinds}"
    choices = {
        where: set(map(str, param.type.choices))
        for where, param in uses.items()
        if hasattr(param.type, "choices")
    }
    if choices:  # one set of names: each command may take fewer (the formats it writes), never others
        widest = max(choices.values(), key=len)
        assert all(c <= widest for c in choices.values()), f"{flag}'s choices differ: {choices}"


def test_a_flag_is_a_switch_or_takes_a_value_with_the_same_pair_everywhere():
    for flag, uses in flag_uses().items():
        pairs = {(tuple(p.opts), tuple(p.secondary_opts)) for p in uses.values() if p.is_flag}
        assert len(pairs) <= 1, f"{flag} pairs with different flags: {pairs}"


def test_gpus_is_one_count_and_a_sweep_has_its_own_names():
    uses = flag_uses()
    assert {value_kind(p)[0] for p in uses["--gpus"].values()} == {"gpu_count"}  # rtmodel_cli.gpu_counts
    assert all(not p.multiple for p in uses["--gpus"].values())
    sweeps = set(uses["--gpus-range"])
    assert sweeps == set(uses["--gpus-list"]) == {"plot speedup", "plot factors", "plot what-if"}
    assert sweeps <= set(uses["--gpus"])  # one n is still --gpus there


def test_topology_is_one_name_and_topologies_several():
    uses = flag_uses()
    assert all(not p.multiple for p in uses["--topology"].values())
    assert all(p.multiple for p in uses["--topologies"].values())
    assert not set(uses["--topology"]) & set(uses["--topologies"])


def test_plural_names_are_lists_of_the_singular():
    uses = flag_uses()
    for plural in ("--topologies", "--networks", "--models", "--clusters"):
        assert all(p.multiple and value_kind(p)[0] == "text" for p in uses[plural].values()), plural


def test_one_default_n_for_every_command_that_answers_for_one():
    uses = flag_uses()
    for where in ("topologies", "plot variance", "plot crossover"):
        assert uses["--gpus"][where].default == DEFAULT_GPUS, where
    from rtmodel_inputs.sources import DEFAULT_GPUS as ADVISE_DEFAULT  # what advise resolves None to

    assert ADVISE_DEFAULT == DEFAULT_GPUS
    shown = CliRunner().invoke(app, ["topologies", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["gpus"] == DEFAULT_GPUS


def test_only_format_asks_for_json():
    uses = flag_uses()
    assert "--json" not in uses
    for where, param in uses["--format"].items():
        assert {str(c) for c in param.type.choices} <= set(Format), where


@pytest.mark.parametrize(
    ("argv", "new"),
    [
        (["advise", "--gpus", "8:1024"], "--gpus-range 8:1024"),
        (["topologies", "--gpus", "8,16"], "--gpus-list 8,16"),
        (["plot", "speedup", "--out", "s.png", "--gpus", "8:64"], "--gpus-range 8:64"),
        (["plot", "factors", "--out", "f.png", "--gpus-range", "64"], "--gpus 64"),
        (["plot", "what-if", "--out", "w.png", "--gpus-list", "8:64"], "--gpus-range"),
        (["advise", "--topology", "ring"], "--topologies"),
        (["plot", "variance", "--out", "v.png", "--topology", "ring"], "--topologies"),
        (["plot", "speedup", "--out", "s.png", "--network", "ib-100"], "--networks"),
        (["presets", "--json"], "--format json"),
    ],
)
def test_an_old_spelling_is_one_line_naming_the_new_flag(argv, new, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and new in lines[0], res.output
    assert "Traceback" not in res.output and not list(tmp_path.iterdir())
