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
PLOT_OWN = {"out", "data", "gpus", "batch_per_gpu", "scenario"}
SWEEP_OWN = PLOT_OWN | {"gpus_range", "gpus_list"}  # rtmodel_cli.gpu_counts.GpuSweep
# command -> (its own options, the file keys it takes from the file only, the inputs it takes as flags only)
COMMANDS = {
    ("advise",): ({"verbose", "brief", "format", "scenario", "topologies"}, set(), set()),
    # a sweep has no --nccl-tests: a file naming one is refused in one line (plot_common.refuse_nccl_tests)
    ("plot", "speedup"): (
        SWEEP_OWN | {"topologies", *LOCAL_SGD_KEYS}, {"precision", "mfu", "padding_efficiency", "compute_cv", "nccl_tests"}, set()
    ),
    ("plot", "factors"): (SWEEP_OWN | {"topology"}, {"precision", "mfu", "padding_efficiency", "compute_cv", "nccl_tests"}, set()),
    ("plot", "what-if"): (SWEEP_OWN | {"topology"}, {"precision", "mfu", "padding_efficiency", "compute_cv", "nccl_tests"}, set()),
    ("plot", "variance"): (
        PLOT_OWN | {"straggler_max", "cv_max", "topologies"},
        {"precision", "mfu", "padding_efficiency", "compute_cv", "nics_per_node", "nccl_algo"},
        {"profile", "calibration", "trace", "traced_batch"},  # a plot's file may not name them; plot variance's command line may
    ),
    ("plot", "crossover"): (
        PLOT_OWN,
        {"precision", "mfu", "padding_efficiency", "compute_cv", "nics_per_node", "nccl_algo"},
        {"profile", "calibration", "trace", "traced_batch"},
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
        inputs |= {"gpus", "margin", "topologies", "objective", "step_ms", "step_gpus", "batch_per_gpu"}  # advise's question
    assert inputs == (accepted_keys(path) - file_only) | flag_only
    assert not file_only & set(params)


def test_plots_take_from_the_file_only_what_they_have_no_flag_for():
    assert set(PLOT_FROM_FILE_ONLY) == {"precision", "mfu", "padding_efficiency", "compute_cv"}
    assert set(PLOT_KEYS) == set(KEYS) - set(PLOT_IGNORES) - {"profile", "calibration", "trace", "traced_batch"}


def test_model_inputs_has_one_field_per_scenario_input():
    names = {f.name for f in dataclasses.fields(ModelInputs)} - {"scenario"}
    advise_own = {"gpus", "margin", "topologies", "objective", "step_ms", "step_gpus", "batch_per_gpu", *LOCAL_SGD_KEYS}
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
    """The shell's modules, commands/ included, by path without .py ("plot_variance", "commands/plot")."""
    return {p.relative_to(CLI).with_suffix("").as_posix(): ast.parse(p.read_text(), str(p))
            for p in sorted(CLI.rglob("*.py"))}


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
    assert "rtmodel_cli.commands.plot" not in imported


# Flags declared in more than one place, with the most declarations each may have; a count may only go
# down. Any flag not listed is declared exactly once. Each name has one meaning, the same kind of value in
# every command (tests/test_flag_meanings.py); these are declared apart only because each help says what
# that command does with it (issue "The house": --gpus, --topology, --network, --cluster, --json retired).
SHARED_NAMES = {
    "--model": (2, "one model by name: a preset advise and the plots predict, or one profile/validate train"),
    "--precision": (2, "one precision: the one advise assumes (the GPU's) or the one profile/validate train in"),
    "--out": (3, "the one file this command writes: a profile, fitted parameters, a figure"),
    "--results": (2, "the validation results file: validate appends to it (default file); plot parity reads it"),
    "--ranks-per-node": (2, "ranks per node: emulate's real emulated nodes (default 1), or a pretend-node size"),
    "--timeout-s": (2, "a limit in seconds: emulate run's on the whole command (1800 s), a rank's wait (600 s)"),
}


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def flag_declarations() -> dict[str, list[str]]:
    """flag -> where it is declared: each `typer.Option(...)` under rtmodel_cli, by the names it gives,
    else by the parameter or field it annotates, else (a module-level `XOpt = Annotated[...]`) by the
    parameters, fields and `{"name": XOpt}` entries that use it anywhere under rtmodel_cli."""
    trees = modules()
    uses: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and isinstance(node.annotation, ast.Name):
                uses.setdefault(node.annotation.id, set()).add(flag_of(node.arg))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.annotation, ast.Name):
                uses.setdefault(node.annotation.id, set()).add(flag_of(node.target.id))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Name):
                        uses.setdefault(value.id, set()).add(flag_of(key.value))
    found: dict[str, list[str]] = {}
    for name, tree in trees.items():
        parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "typer.Option"):
                continue
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
            owner = parent[node]
            while not flags and not isinstance(owner, ast.arg | ast.Assign | ast.AnnAssign | ast.FunctionDef):
                owner = parent[owner]  # no name given: the parameter, field or alias it annotates names it
            if not flags and isinstance(owner, ast.FunctionDef):  # a factory: each `XOpt = factory(...)` declares
                for made in ast.walk(tree):
                    if isinstance(made, ast.Assign) and isinstance(made.value, ast.Call):
                        if ast.unparse(made.value.func) == owner.name:
                            for flag in sorted(uses.get(made.targets[0].id, {f"(unused {made.targets[0].id})"})):
                                found.setdefault(flag, []).append(f"{name}:{made.lineno}")
                continue
            if not flags and isinstance(owner, ast.Assign):
                flags = sorted(uses.get(owner.targets[0].id, {f"(unused {owner.targets[0].id})"}))
            elif not flags:
                flags = [flag_of(owner.arg if isinstance(owner, ast.arg) else owner.target.id)]
            for flag in flags:
                found.setdefault(flag, []).append(f"{name}:{node.lineno}")
    return found


def test_each_flag_is_declared_once():
    found = flag_declarations()
    assert {"--timeout-s", "--warmup", "--iterations", "--model-arg", "--gpu", "--local-sgd-h"} <= set(found)
    twice = {flag: where for flag, where in found.items() if len(where) > SHARED_NAMES.get(flag, (1,))[0]}
    assert not twice, f"declared in more than one place (use one Annotated type): {twice}"
    assert not [flag for flag in found if flag.startswith("(unused")]


def test_profile_and_validate_take_the_run_flags_with_one_default():
    """The torch-side flags (rtmodel_cli.run_options): the same names, defaults and help in both."""
    command = typer.main.get_command(app)
    profile, validate = ({p.name: p for p in command.commands[c].params} for c in ("profile", "validate"))
    shared = set(profile) & set(validate) - {"help"}
    assert {"timeout_s", "iterations", "warmup", "model", "model_arg", "nproc_per_node", "backend"} <= shared
    for name in shared:
        a, b = profile[name], validate[name]
        assert (a.opts, a.default, a.help) == (b.opts, b.default, b.help), name
    assert profile["timeout_s"].default == 600.0
