"""Execute every notebook (kernel python3, working directory notebooks/) and check figures and numbers.

Each notebook prints a JSON summary in its last cell; the checks below read it, so a notebook that
runs but computes nonsense (NaN speedups, an empty error table) fails here.
"""

import json
import math
import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NB_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = ("speedup_curves", "paper_comparison", "predicted_vs_measured")


def execute(name: str):
    nb = nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RTMODEL_")}  # the notebooks' own defaults
    client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": str(NB_DIR)}})
    client.execute(env=env)
    return nb


def outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def png_count(nb) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs(nb))


def summary(nb) -> dict:
    last = nb.cells[-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.get("output_type") == "stream")
    return json.loads(text)


def html(nb) -> str:
    return "\n".join(o.get("data", {}).get("text/html", "") for o in outputs(nb))


@pytest.fixture(scope="module")
def executed():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = execute(name)
        return cache[name]

    return get


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_are_stored_without_outputs(name):
    nb = nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear outputs before committing"


@pytest.mark.slow
def test_speedup_curves(executed):
    nb = executed("speedup_curves")
    assert png_count(nb) >= 4  # speedup grid, two factor charts, what-if
    s = summary(nb)
    assert len(s["pays_from"]) == 6  # 2 models x 3 networks
    assert all(v is None or v in [2**i for i in range(3, 13)] for v in s["pays_from"].values())
    assert s["speedups"] and all(v is not None and v > 0 and math.isfinite(v) for v in s["speedups"])
    assert all(v > 0 for v in s["best_speedup_at_1024"].values())
    assert len(s["what_if_best_at_1024"]) == 6
    base = s["what_if_best_at_1024"]["as configured"]
    assert base == pytest.approx(s["best_speedup_at_1024"]["transformer-base|ib-100"], rel=1e-6)
    assert "pays from n" in html(nb)


@pytest.mark.slow
def test_paper_comparison(executed):
    nb = executed("paper_comparison")
    assert png_count(nb) == 2
    s = summary(nb)
    from rtmodel_literature.paper import COLUMNS, published

    assert s["rows"] == len(published()) * len(COLUMNS)
    assert s["clusters"] == sorted(published()["cluster"].unique())
    assert len(s["error_table"]) == len(s["clusters"]) * len(COLUMNS)
    assert all(0 <= v < 1 and math.isfinite(v) for v in s["error_table"].values())
    assert 0 <= s["median_abs_error"] <= s["max_abs_error"] < 1
    assert 0 <= s["verdicts_agree"] <= s["verdicts_total"] == len(published())
    page = html(nb)
    assert "median_abs_error" in page and "Wang" in "".join(c.source for c in nb.cells)


@pytest.mark.slow
def test_predicted_vs_measured(executed):
    nb = executed("predicted_vs_measured")
    assert png_count(nb) == 1
    s = summary(nb)
    results = NB_DIR / s["results"]
    lines = [json.loads(x) for x in results.read_text().splitlines() if x.strip()]
    assert s["points"] == 2 * len(lines)  # each validation: its All-Reduce run and its Decent-DP run
    assert s["sources"] == ["measured"]  # the shipped example data is real (see notebooks/data/README.md)
    assert all(v > 0 for v in s["predicted_ms"] + s["measured_ms"])
    assert 0 <= s["within_5pct"] <= s["within_10pct"] <= 1 and math.isfinite(s["median_abs_error"])
    assert "allreduce" in s["profile_predictions_ms"]
    assert all(v > 0 for v in s["profile_predictions_ms"].values())
