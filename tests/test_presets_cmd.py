"""`rtmodel presets` lists every preset with its key figures (tables that fit the terminal, or JSON with
every field), one kind with --kind, a user's directory with --presets; bad input is one line, exit 2."""

import json

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.presets.preset_loading import builtin_library

runner = CliRunner()
LIB = builtin_library()
NAMES = {
    "gpus": sorted(LIB.gpus),
    "networks": sorted(LIB.inter_networks) + sorted(LIB.intra_links),
    "models": sorted(LIB.models),
    "clusters": sorted(LIB.clusters),
}
TITLES = {
    "gpus": "GPUs (--gpu)",
    "networks": "Inter-node networks",
    "models": "Models",
    "clusters": "Clusters",
}


def run(*args, columns=200):
    return runner.invoke(app, ["presets", *args], env={"COLUMNS": str(columns)})


def table_names(output: str) -> set[str]:
    """The first cell of every table row (the preset's name)."""
    return {line.split("│")[1].strip() for line in output.splitlines() if line.startswith("│")}


@pytest.mark.parametrize("columns", [200, 80, 40])
def test_the_tables_list_every_preset_name_whole_at_any_width(columns):
    res = run(columns=columns)
    assert res.exit_code == 0, res.output
    assert table_names(res.stdout) >= {n for names in NAMES.values() for n in names}
    assert "…" not in res.stdout
    assert all(len(line) <= columns for line in res.stdout.splitlines())
    for title in TITLES.values():
        assert title in res.stdout


def test_the_tables_show_the_key_figures():
    out = run("--kind", "gpus").stdout
    v100 = next(line for line in out.splitlines() if line.startswith("│ V100 "))
    cells = [c.strip() for c in v100.split("│")[1:-1]]
    assert cells[:8] == ["V100", "15.7", "-", "125", "-", "16", "900", "fp16"]  # no TF32 or BF16 on Volta
    assert "fp32 0.68, fp16 0.283" in v100 and "nvlink2" in v100
    out = run("--kind", "networks").stdout
    nvlink2 = next(line for line in out.splitlines() if line.startswith("│ nvlink2 "))
    assert [c.strip() for c in nvlink2.split("│")[1:6]] == ["nvlink2", "1,200", "0.8", "120.0", "4"]
    out = run("--kind", "clusters").stdout
    dgx1 = next(line for line in out.splitlines() if line.startswith("│ dgx1-v100 "))
    assert [c.strip() for c in dgx1.split("│")[1:6]] == ["dgx1-v100", "8 x V100", "nvlink2", "ib-100", "4"]
    out = run("--kind", "models").stdout
    resnet = next(line for line in out.splitlines() if line.startswith("│ resnet50 "))
    assert [c.strip() for c in resnet.split("│")[1:5]] == ["resnet50", "25.6 M", "image", "1,024"]


def test_json_parses_and_holds_every_preset_with_its_sources():
    res = run("--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "rtmodel-presets/1"
    assert sorted(doc["gpus"]) == NAMES["gpus"] and sorted(doc["models"]) == NAMES["models"]
    assert sorted(doc["clusters"]) == NAMES["clusters"]
    assert sorted(doc["networks"]["inter"]) + sorted(doc["networks"]["intra"]) == NAMES["networks"]
    assert doc["gpus"]["V100"]["tflops"] == {"fp32": 15.7, "fp16": 125.0}
    assert doc["gpus"]["A100-80GB"]["memory_bandwidth_GBps"] == 2039
    assert doc["networks"]["intra"]["nvlink2"]["efficiency_source"]
    assert doc["clusters"]["dgx1-v100"]["nics_per_node"] == 4
    assert doc["models"]["resnet50"]["parameter_tensors"] == len(LIB.models["resnet50"].backward_numels)
    assert doc["defaults"]["gpu"] == LIB.defaults.gpu
    for section in (doc["gpus"], doc["models"], doc["clusters"], *doc["networks"].values()):
        assert all(entry["source"].strip() for entry in section.values())


@pytest.mark.parametrize("kind", list(NAMES))
def test_kind_shows_only_that_kind(kind):
    doc = json.loads(run("--kind", kind, "--format", "json").stdout)
    assert set(doc) == {"schema", "files", "defaults", kind}
    out = run("--kind", kind).stdout
    assert table_names(out) == set(NAMES[kind])
    for other, title in TITLES.items():
        assert (title in out) == (other == kind)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--kind", "routers"], "'routers' is not one of"),
        (["--format", "csv"], "'csv' is not one of"),
        (["--json"], "use --format json"),  # retired: one way to ask for JSON
        (["--presets", "/nonexistent/presets"], "no such presets directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    res = run(*args)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.stderr
    assert "Traceback" not in res.output


def test_a_users_presets_dir_is_listed_over_the_builtins(tmp_path):
    (tmp_path / "clusters.toml").write_text(
        '[my-v100s]\ngpu = "V100-32GB"\ngpus_per_node = 4\nintra = "nvlink2"\nnetwork = "roce-100g"\nsource = "ours"\n'
    )
    res = run("--kind", "clusters", "--presets", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert table_names(res.stdout) == {*NAMES["clusters"], "my-v100s"}
    assert str(tmp_path / "clusters.toml") in " ".join(res.stdout.split())
    doc = json.loads(run("--kind", "clusters", "--format", "json", "--presets", str(tmp_path)).stdout)
    assert doc["clusters"]["my-v100s"]["source"] == "ours"
    assert doc["files"][-1] == str(tmp_path / "clusters.toml")


def test_a_model_known_by_its_size_only_shows_no_counted_figures(tmp_path):
    (tmp_path / "models.toml").write_text("[mine]\nparams = 1_300_000_000\n")
    out = run("--kind", "models", "--presets", str(tmp_path)).stdout
    mine = next(line for line in out.splitlines() if line.startswith("│ mine "))
    assert [c.strip() for c in mine.split("│")[1:6]] == ["mine", "1,300.0 M", "sample", "-", "-"]
