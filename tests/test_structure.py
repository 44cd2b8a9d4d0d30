"""The shape of the tree (README "Development"): the model at the bottom imports nothing above it,
and no module grows past what a reader takes in at once."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGES = (
    "rtmodel_cli",
    "rtmodel_plots",
    "runtime_model",
    "rtmodel_util",
    "rtmodel_decentdp",
    "profiler",
    "calibration",
    "validation",
    "emulation",
)
# runtime_model is pure numpy/scipy: not the stages above it, not the shell's or the plots' libraries.
MODEL_MAY_NOT_IMPORT = {
    "calibration",
    "profiler",
    "validation",
    "emulation",
    "rtmodel_cli",
    "rtmodel_plots",
    "typer",
    "rich",
    "matplotlib",
    "pandas",
    "torch",
}
MAX_MODULE_LINES = 400


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
def test_model_imports_nothing_above_it(path):
    assert not imported_top_level_names(path) & MODEL_MAY_NOT_IMPORT


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
    command = next(line for line in ci.splitlines() if line.startswith("pip install"))
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
