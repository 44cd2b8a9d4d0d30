"""The model's inputs are declared once (rtmodel_cli.model_options) and every command that takes them
takes exactly the scenario-file keys it accepts: renaming a parameter in one place fails here, instead
of a plot's input silently becoming None."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_cli.local_sgd_options import KEYS as LOCAL_SGD_KEYS
from rtmodel_cli.model_options import ModelInputs, takes_model_inputs
from rtmodel_cli.scenario_file import KEYS, PLOT_FROM_FILE_ONLY, PLOT_IGNORES, PLOT_KEYS

CLI = Path(__file__).resolve().parent.parent / "rtmodel_cli"
# What a command asks (not the model's inputs): its output, the sweep, and --scenario itself.
PLOT_OWN = {"out", "gpus", "topology", "batch_per_gpu", "scenario"}
# command -> (its own options, the file keys it takes from the file only, the inputs it takes as flags only)
COMMANDS = {
    ("advise",): ({"verbose", "brief", "format", "scenario"}, set(), set()),
    # a sweep has no --nccl-tests: a file naming one is refused in one line (plot_common.refuse_nccl_tests)
    ("plot", "speedup"): (PLOT_OWN | set(LOCAL_SGD_KEYS), {"precision", "mfu", "compute_cv", "nccl_tests"}, set()),
    ("plot", "factors"): (PLOT_OWN, {"precision", "mfu", "compute_cv", "nccl_tests"}, set()),
    ("plot", "what-if"): (PLOT_OWN, {"precision", "mfu", "compute_cv", "nccl_tests"}, set()),
    ("plot", "variance"): (
        PLOT_OWN | {"straggler_max", "cv_max"},
        {"precision", "mfu", "compute_cv", "nics_per_node", "nccl_algo"},
        {"profile"},  # a plot's file may not name a profile; plot variance's command line may
    ),
    ("plot", "crossover"): (
        PLOT_OWN - {"topology"},
        {"precision", "mfu", "compute_cv", "nics_per_node", "nccl_algo"},
        {"profile"},
    ),
}


def parameters(path: tuple[str, ...]) -> list[str]:
    """The parameter names of a command as the CLI built it (click's, after typer and failing.guarded)."""
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return [p.name for p in command.params if p.name != "help"]


def accepted_keys(path: tuple[str, ...]) -> set[str]:
    """The scenario-file keys the command takes (scenario_file: advise all, a plot PLOT_KEYS)."""
    return set(KEYS) if path == ("advise",) else set(PLOT_KEYS)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_a_commands_model_inputs_are_the_scenario_keys_it_accepts(path):
    own, file_only, flag_only = COMMANDS[path]
    params = parameters(path)
    assert len(params) == len(set(params))
    inputs = set(params) - own
    if path == ("advise",):
        inputs |= {"gpus", "margin", "topology", "objective", "step_ms", "step_gpus", "batch_per_gpu"}  # advise's question
    assert inputs == (accepted_keys(path) - file_only) | flag_only
    assert not file_only & set(params)


def test_plots_take_from_the_file_only_what_they_have_no_flag_for():
    assert set(PLOT_FROM_FILE_ONLY) == {"precision", "mfu", "compute_cv"}
    assert set(PLOT_KEYS) == set(KEYS) - set(PLOT_IGNORES) - {"profile"}


def test_model_inputs_has_one_field_per_scenario_input():
    names = {f.name for f in dataclasses.fields(ModelInputs)} - {"scenario"}
    advise_own = {"gpus", "margin", "topology", "objective", "step_ms", "step_gpus", "batch_per_gpu", *LOCAL_SGD_KEYS}
    assert names == set(KEYS) - advise_own
    assert ModelInputs().as_dict().keys() == names


def test_the_body_gets_the_flags_as_one_model_inputs(tmp_path):
    seen = {}

    @takes_model_inputs(without=("mfu",))
    def probe(first: int = 0, *, inputs: ModelInputs, last: str = "x"):
        seen.update(first=first, inputs=inputs, last=last)

    one = typer.Typer()
    one.command()(probe)
    one.command("other")(lambda: None)  # two commands: typer keeps the command names
    res = CliRunner().invoke(
        one, ["probe", "--first", "3", "--gpu", "A100", "--bucket-mb", "50", "--presets", str(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    assert seen["first"] == 3 and seen["last"] == "x"
    assert seen["inputs"].gpu == "A100" and seen["inputs"].bucket_cap_mb == 50.0
    assert seen["inputs"].presets == [tmp_path] and seen["inputs"].mfu is None
    assert CliRunner().invoke(one, ["probe", "--mfu", "0.5"]).exit_code == 2  # no flag without


def test_a_wrong_name_is_refused_when_the_command_is_defined():
    with pytest.raises(TypeError, match="not fields of ModelInputs: gpus_pernode"):
        takes_model_inputs(without=("gpus_pernode",))
    with pytest.raises(TypeError, match="keyword-only parameter `inputs"):
        takes_model_inputs()(lambda out: None)


def modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(CLI.glob("*.py"))}


def test_no_command_collects_its_options_from_locals():
    calls = [
        name
        for name, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "locals"
    ]
    assert calls == []


def test_no_module_imports_another_ones_private_names():
    private = [
        (name, node.module, alias.name)
        for name, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rtmodel_cli")
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []


def test_plot_variance_does_not_import_plot():
    imported = {
        node.module for node in ast.walk(modules()["plot_variance"]) if isinstance(node, ast.ImportFrom)
    }
    assert "rtmodel_cli.plot" not in imported
