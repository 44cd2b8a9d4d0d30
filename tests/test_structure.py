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
# registrations; the stages; the plots over the stages' results; the shell on top.
MAY_IMPORT = {
    "runtime_model": set(),
    "rtmodel_util": {"runtime_model"},
    "rtmodel_harness": {"runtime_model", "rtmodel_util"},
    "rtmodel_decentdp": {"runtime_model"},
    "profiler": {"runtime_model", "rtmodel_util", "rtmodel_harness", "rtmodel_decentdp"},
    "calibration": {"runtime_model", "rtmodel_util"},
    "emulation": {"runtime_model", "rtmodel_util"},
    "validation": {"runtime_model", "rtmodel_util", "rtmodel_harness", "rtmodel_decentdp", "calibration"},
    "rtmodel_plots": {"runtime_model", "calibration", "validation"},
    "rtmodel_cli": {
        "runtime_model", "rtmodel_util", "rtmodel_harness", "rtmodel_decentdp", "profiler", "calibration",
        "emulation", "validation", "rtmodel_plots",
    },
}  # fmt: skip
PACKAGES = tuple(MAY_IMPORT)
# A stage registers its command with the shell in these modules only (the one arrow upward).
REGISTRATIONS = ("cli.py", "__main__.py")
# runtime_model is pure numpy/scipy: not the shell's or the plots' libraries, and never torch.
MODEL_MAY_NOT_IMPORT = {"typer", "rich", "matplotlib", "pandas", "torch"}
# The model's floors (runtime_model/*/__init__.py say what each holds), bottom to top: each may import the
# floors listed, never one above it. This, not the line cap, is what keeps a module where a reader looks.
MODEL_FLOORS = {
    "core": set(),
    "topology": {"core"},
    "convergence": {"core", "topology"},
    "prediction": {"core", "topology", "convergence"},
    "presets": {"core", "topology", "convergence", "prediction"},
    "advice": {"core", "topology", "convergence", "prediction", "presets"},
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


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_only_the_layers_below_it(package):
    modules = package_modules()
    wrong = {
        f"{name} -> {dep}"
        for name, path in modules.items()
        if name.split(".")[0] == package and path.name not in REGISTRATIONS
        for dep in module_imports(path, modules)
        if dep.split(".")[0] not in MAY_IMPORT[package] | {package}
    }
    assert not wrong, sorted(wrong)


def test_the_model_floors_are_the_tree():
    on_disk = {p.parent.name for p in (ROOT / "runtime_model").glob("*/__init__.py")} - {"preset_data"}
    loose = {p.name for p in (ROOT / "runtime_model").glob("*.py")} - {"__init__.py"}
    assert on_disk == set(MODEL_FLOORS) and not loose, (on_disk, loose)


@pytest.mark.parametrize("floor", MODEL_FLOORS)
def test_each_model_floor_imports_only_the_floors_below_it(floor):
    modules = package_modules()
    wrong = {
        f"{name} -> {dep}"
        for name, path in modules.items()
        if name.startswith(f"runtime_model.{floor}.")
        for dep in module_imports(path, modules)
        if dep.startswith("runtime_model.") and dep.split(".")[1] not in MODEL_FLOORS[floor] | {floor}
    }
    assert not wrong, sorted(wrong)


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


@pytest.mark.parametrize("package", ["calibration", "validation"])
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
