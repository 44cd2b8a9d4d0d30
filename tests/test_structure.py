"""The shape of the tree (docs/development.md "Architecture"): every package imports only the layers
below it, no module imports another in a circle, infrastructure is written once, and no module or
function grows past what a reader takes in at once."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
# Which packages each package may import (besides itself and the standard/third-party libraries): the
# layers of docs/development.md, bottom to top. The model at the bottom; the utilities (files, processes,
# the profile's schema); the torch-side harness (workloads, device and backend, timing); Decent-DP's
# registrations; the stages; the literature comparisons; the figures, which take data and read none;
# the shell on top, which holds every command (rtmodel_cli/commands).
MAY_IMPORT = {
    "runtime_model": set(),
    "rtmodel_util": {"runtime_model"},
    # the documents' schemas, both ways (profile, calibration): the model's types, the utilities' writers
    "rtmodel_documents": {"runtime_model", "rtmodel_util"},
    "rtmodel_harness": {"runtime_model", "rtmodel_util"},
    "rtmodel_decentdp": {"runtime_model"},
    "profiler": {"runtime_model", "rtmodel_util", "rtmodel_documents", "rtmodel_harness", "rtmodel_decentdp"},
    "calibration": {"runtime_model", "rtmodel_util", "rtmodel_documents"},
    "rtmodel_emulation": {"runtime_model", "rtmodel_util"},
    # profiler: its activation-memory estimate of the model a run trains (profiler/activation_memory.py)
    "rtmodel_validation": {
        "runtime_model", "rtmodel_util", "rtmodel_documents", "rtmodel_harness", "rtmodel_decentdp", "calibration",
        "profiler",
    },
    "rtmodel_literature": {"runtime_model"},
    "rtmodel_plots": {"runtime_model", "rtmodel_util"},  # rtmodel_util: the one atomic writer of outputs
    # profiler: a profiled model's activations, estimated on FakeTensors (rtmodel_inputs/memory_inputs.py)
    "rtmodel_inputs": {"runtime_model", "rtmodel_util", "rtmodel_documents", "calibration", "profiler"},
    "rtmodel_cli": {
        "runtime_model", "rtmodel_util", "rtmodel_documents", "rtmodel_harness", "rtmodel_decentdp", "profiler",
        "calibration", "rtmodel_emulation", "rtmodel_validation", "rtmodel_literature", "rtmodel_plots", "rtmodel_inputs",
    },
}  # fmt: skip
PACKAGES = tuple(MAY_IMPORT)
STAGES = ("profiler", "calibration", "rtmodel_validation", "rtmodel_emulation")
SHELL = ("rtmodel_cli", "rtmodel_plots")  # the command line and the figures: nothing below imports them
# runtime_model is pure numpy/scipy: not the shell's or the plots' libraries, and never torch.
MODEL_MAY_NOT_IMPORT = {"typer", "rich", "matplotlib", "pandas", "torch"}
# The model's floors (runtime_model/*/__init__.py say what each holds), bottom to top: each may import the
# floors listed, never one above it. This, not the line cap, is what keeps a module where a reader looks.
MODEL_FLOORS = {
    "core": set(),
    "topology": {"core"},
    "memory": {"core"},
    "convergence": {"core", "topology"},
    "prediction": {"core", "topology", "convergence"},
    "presets": {"core", "topology", "convergence", "prediction"},
    "advice": {"core", "topology", "convergence", "prediction", "presets", "memory"},
}
MAX_MODULE_LINES = 500  # generous: a module past it holds two jobs
# A function longer than this says why in its docstring (a line starting "Long because").
MAX_FUNCTION_LINES = 80


def imported_top_level_names(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions count too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "runtime_model").rglob("*.py")), ids=lambda p: p.name)
def test_model_imports_no_heavy_library(path):
    assert not imported_top_level_names(path) & MODEL_MAY_NOT_IMPORT


@pytest.mark.parametrize("path", sorted((ROOT / "rtmodel_literature").rglob("*.py")), ids=lambda p: p.name)
def test_the_literature_imports_no_torch(path):
    """The published comparisons run on any machine: they predict, they never train."""
    assert "torch" not in imported_top_level_names(path)


def package_modules() -> dict[str, Path]:
    """Every module of rtmodel's packages by dotted name."""
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def module_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The rtmodel modules `path` imports, at any depth; `from pkg import submodule` names the submodule."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                names.add(sub if sub in modules else node.module)
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def test_the_package_list_is_the_tree():
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "benchmarks"}
    assert on_disk == set(PACKAGES)


def imports_where(importer, wrong) -> list[str]:
    """"module -> dependency" for every import by a module `importer(name)` accepts of a dependency
    `wrong(dep)` flags: the one walk behind the layering tests."""
    modules = package_modules()
    return sorted(
        f"{name} -> {dep}"
        for name, path in modules.items()
        if importer(name)
        for dep in module_imports(path, modules)
        if wrong(dep)
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_only_the_layers_below_it(package):
    allowed = MAY_IMPORT[package] | {package}
    wrong = imports_where(lambda n: n.split(".")[0] == package, lambda d: d.split(".")[0] not in allowed)
    assert not wrong, wrong


@pytest.mark.parametrize("stage", STAGES)
def test_no_stage_imports_the_shell(stage):
    """A stage is a library: its commands live in rtmodel_cli/commands, its figures take its data from
    the shell. Checked apart from MAY_IMPORT so that widening a stage's list cannot let the arrow back."""
    upward = imports_where(lambda n: n.split(".")[0] == stage, lambda d: d.split(".")[0] in SHELL)
    assert not upward, upward


def test_every_command_lives_in_the_shell():
    """Each `rtmodel` command is one module of rtmodel_cli/commands, and no stage keeps a cli.py."""
    from rtmodel_cli.app import COMMANDS

    on_disk = {p.stem for p in (ROOT / "rtmodel_cli" / "commands").glob("*.py")} - {"__init__"}
    assert on_disk == set(COMMANDS)
    assert not [f"{stage}/cli.py" for stage in STAGES if (ROOT / stage / "cli.py").exists()]


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports by name, at any depth; `from pkg import name` counts as pkg.name too
    (it may be a submodule), and a relative import is resolved against the file's package."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names)
    return names


def test_only_the_app_imports_a_command_module():
    """A command module holds its options and its views; what two commands (or a command and a plot)
    share lives beside them (rtmodel_inputs/, options, ...), never in a command that the
    other imports. Only rtmodel_cli/app.py, which registers them, imports rtmodel_cli.commands.*."""
    tops = [d for d in ROOT.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name != "tests"]
    files = [*ROOT.glob("*.py"), *(p for d in tops for p in d.rglob("*.py"))]
    importers = {
        path.relative_to(ROOT).as_posix()
        for path in files
        if any(name.split(".")[:2] == ["rtmodel_cli", "commands"] for name in imported_modules(path))
    }
    assert importers == {"rtmodel_cli/app.py"}


def test_the_model_floors_are_the_tree():
    on_disk = {p.parent.name for p in (ROOT / "runtime_model").glob("*/__init__.py")} - {"preset_data"}
    loose = {p.name for p in (ROOT / "runtime_model").glob("*.py")} - {"__init__.py"}
    assert on_disk == set(MODEL_FLOORS) and not loose, (on_disk, loose)


@pytest.mark.parametrize("floor", MODEL_FLOORS)
def test_each_model_floor_imports_only_the_floors_below_it(floor):
    allowed = MODEL_FLOORS[floor] | {floor}
    wrong = imports_where(
        lambda n: n.startswith(f"runtime_model.{floor}."),
        lambda d: d.startswith("runtime_model.") and d.split(".")[1] not in allowed,
    )
    assert not wrong, wrong


def test_no_module_imports_another_in_a_circle():
    import graphlib

    modules = package_modules()
    graph = {name: module_imports(path, modules) - {name} for name, path in modules.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


def test_files_are_written_by_one_helper():
    """Atomic writes (temp file + rename) live in rtmodel_util.files only: one rule for special files."""
    writers = {
        str(p.relative_to(ROOT))
        for pkg in PACKAGES
        if pkg != "rtmodel_util"
        for p in (ROOT / pkg).rglob("*.py")
        if "os.replace(" in p.read_text() or "os.rename(" in p.read_text()
    }
    assert not writers, writers


def test_modules_stay_small():
    long = {
        str(p.relative_to(ROOT)): n
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_cluster_extra_takes_ranges_and_ci_pins_the_cpu_build():
    """A GPU user's own CUDA torch must survive `pip install .[cluster]`; only CI pins (constraints)."""
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    cluster = meta["project"]["optional-dependencies"]["cluster"]
    assert cluster and not any("==" in req for req in cluster), cluster
    constraints = (ROOT / ".ci" / "cpu-constraints.txt").read_text()
    assert "torch==2.13.0" in constraints


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = [line for line in ci.splitlines() if line and not line.startswith("#")][-1]
    assert f"```bash\n{command}\n```" in readme


@pytest.mark.parametrize("package", ["calibration", "rtmodel_validation"])
def test_no_public_name_is_also_a_submodule(package):
    """`from calibration import calibrate` must give the function even after some code has imported a
    submodule of that name: Python then binds the submodule to the package attribute, and the lazy
    export never runs (it did: benchmarks/accuracy.py got a module and failed after other tests)."""
    import importlib

    exports = importlib.import_module(package)._EXPORTS
    submodules = {p.stem for p in (ROOT / package).glob("*.py")} | {
        p.name for p in (ROOT / package).iterdir() if (p / "__init__.py").exists()
    }
    assert not set(exports) & submodules


def test_functions_stay_short_or_say_why():
    long = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = node.end_lineno - node.lineno + 1
                    if n > MAX_FUNCTION_LINES and "Long because" not in (ast.get_docstring(node) or ""):
                        long[f"{p.relative_to(ROOT)}::{node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


MAX_PARAMETERS = 8  # issue 48: past it, a call is a list of values to keep in order; pass a typed object


def command_functions(tree: ast.Module) -> set[str]:
    """The typer commands a module defines: decorated with `X.command(...)` or registered by
    `X.command(...)(name)`. Exempt from MAX_PARAMETERS: typer reads every option from the signature."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(
                isinstance(d, ast.Call) and getattr(d.func, "attr", None) == "command"
                for d in node.decorator_list
            ):
                names.add(node.name)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Call):
            if getattr(node.func.func, "attr", None) == "command":
                names.update(a.id for a in node.args if isinstance(a, ast.Name))
    return names


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
    return n - bool(a.args and a.args[0].arg in ("self", "cls"))


def test_no_function_but_a_command_takes_more_than_8_parameters():
    """Options travel as one typed object (profiler.options.ProfileOptions, rtmodel_validation.options.ValidateOptions,
    rtmodel_cli.commands.calibrate.CalibrateOptions), not as a chain of parameters."""
    many = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(p.read_text())
            commands = command_functions(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name not in commands:
                    if (n := parameter_count(node)) > MAX_PARAMETERS:
                        many[f"{p.relative_to(ROOT)}::{node.name}"] = n
    assert not many, f"functions over {MAX_PARAMETERS} parameters: {many}"


def test_the_parameter_check_sees_the_commands_it_exempts():
    tree = ast.parse((ROOT / "rtmodel_cli" / "commands" / "validate.py").read_text())
    assert "validate_cmd" in command_functions(tree)  # decorated
    tree = ast.parse((ROOT / "rtmodel_cli" / "commands" / "plot.py").read_text())
    assert "speedup" in command_functions(tree)  # registered: plot.command("speedup")(speedup)


# The design card's three stage names stay at the top; every other installed package carries the
# project's prefix, so no other distribution on the package index installs the same top-level name.
CARD_NAMES = {"runtime_model", "profiler", "calibration"}


def test_installed_top_level_names_clash_with_no_other_distribution():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed = {p.rstrip("*") for p in meta["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert installed == set(PACKAGES)  # every layer is installed, and nothing else
    assert all(n in CARD_NAMES or n.startswith("rtmodel_") for n in installed), sorted(installed)
