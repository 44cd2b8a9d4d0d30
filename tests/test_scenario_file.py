"""`--scenario FILE`: a TOML or JSON file of advise's options gives the same answer as the flags,
the command line wins over it, its paths are relative to it, and a bad file is one named line."""

import inspect
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_cli.scenario_file import KEYS
from runtime_model.presets import to_model as presets

ROOT = Path(__file__).parent.parent
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
runner = CliRunner()
needs_model = pytest.mark.skipif(
    "compute_ms" not in inspect.signature(presets.resolve).parameters, reason="model side not merged yet"
)

TEAM_NETWORK = """
[inter.team-net]
description = "the team's 50 Gbit/s Ethernet"
bandwidth_Gbps = 50
latency_us = 15
source = "our switch's datasheet"
latency_source = "measured with nccl-tests"
"""
# Every key type: int, float, an int for a float, str, a list of str, a list of directories.
TEAM_TOML = """
gpus = 32
gpus_per_node = 4
gpu = "A100"
network = "team-net"
intra = "pcie4"
model = "transformer-base"
global_batch = 32000
precision = "bf16"
mfu = 0.35
compute_cv = 0.05
bucket_cap_mb = 50
margin = 0.1
topologies = ["ring", "base-2", "alternating-exp-ring"]
local_sgd_h = 50
local_sgd_bits = 8
local_sgd_replica = "gpu"
presets = ["team-presets"]
"""
TEAM_VALUES = dict(
    gpus=32, gpus_per_node=4, gpu="A100", network="team-net", intra="pcie4", model="transformer-base",
    global_batch=32000, precision="bf16", mfu=0.35, compute_cv=0.05, bucket_cap_mb=50, margin=0.1,
    topologies=["ring", "base-2", "alternating-exp-ring"], local_sgd_h=50, local_sgd_bits=8, local_sgd_replica="gpu",
)  # fmt: skip


def flags_of(values: dict) -> list[str]:
    """The same inputs as flags: --gpus-per-node 4, a list as one flag per item (--topologies ring ...)."""
    return [
        part
        for key, value in values.items()
        for item in (value if isinstance(value, list) else [value])
        for part in ("--" + key.replace("_", "-"), str(item))
    ]


def advise_json(*args) -> dict:
    res = runner.invoke(app, ["advise", *map(str, args), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def answer(doc: dict) -> dict:
    """What a scenario decides: the predictions, the verdict and its margin (not timing or paths)."""
    return {
        "predictions": doc["predictions"],
        "recommendation": doc["recommendation"],
        "margin": doc["margin"],
    }


@pytest.fixture
def team(tmp_path, monkeypatch) -> Path:
    """A team repo (its scenario file and presets directory), run from another working directory."""
    repo = tmp_path / "repo"
    (repo / "team-presets").mkdir(parents=True)
    (repo / "team-presets" / "networks.toml").write_text(TEAM_NETWORK)
    (repo / "team.toml").write_text(TEAM_TOML)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return repo


def test_every_key_the_file_can_hold_is_an_advise_option():
    from rtmodel_cli.commands.advise import advise

    params = set(inspect.signature(advise).parameters)  # each key is its flag's name
    assert set(KEYS) <= params


def test_a_file_with_every_key_type_gives_the_flags_answer(team):
    from_file = advise_json("--scenario", team / "team.toml")
    from_flags = advise_json(*flags_of(TEAM_VALUES), "--presets", team / "team-presets")
    assert answer(from_file) == answer(from_flags)
    assert from_file["inputs"]["gpus"] == 32 and from_file["margin"] == 0.1
    names = [p["topology"] for p in from_file["predictions"] if p["family"] != "all-reduce"]
    assert names == ["ring", "base-2", "alternating-exp-ring", "local-sgd H=50 int8 per-gpu"]


def test_json_and_toml_give_the_same_answer(team):
    import tomllib

    (team / "team.json").write_text(json.dumps(tomllib.loads(TEAM_TOML)))
    assert answer(advise_json("--scenario", team / "team.json")) == answer(
        advise_json("--scenario", team / "team.toml")
    )


def test_the_command_line_wins_over_the_file(team):
    overridden = advise_json(
        "--scenario", team / "team.toml", "--gpus", "16", "--mfu", "0.5", "--topologies", "ring"
    )
    values = {**TEAM_VALUES, "gpus": 16, "mfu": 0.5, "topologies": ["ring"]}
    from_flags = advise_json(*flags_of(values), "--presets", team / "team-presets")
    assert answer(overridden) == answer(from_flags)
    assert answer(overridden) != answer(advise_json("--scenario", team / "team.toml"))
    assert overridden["inputs"]["gpus"] == 16


def test_the_files_gpus_is_not_overridden_by_the_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("small.toml").write_text("gpus = 8\n")
    assert advise_json("--scenario", "small.toml")["inputs"]["gpus"] == 8
    assert advise_json()["inputs"]["gpus"] == 64  # the default when neither gives it


def test_a_relative_profile_is_found_beside_the_file(team):
    (team / "profiles").mkdir()
    shutil.copy(PROFILE, team / "profiles" / "ours.json")
    (team / "profiled.toml").write_text('profile = "profiles/ours.json"\ngpus = 16\n')
    from_file = advise_json("--scenario", team / "profiled.toml")
    from_flags = advise_json("--profile", PROFILE, "--gpus", "16")
    assert answer(from_file) == answer(from_flags)


@needs_model
def test_your_own_numbers_from_the_file_give_the_flags_answer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("own.toml").write_text(
        'gpus = 16\ncluster = "a100-ib100"\ncompute_ms = 120\noptimizer_ms = 4.5\nmessage_dtype = "bf16"\n'
    )
    flags = ["--gpus", "16", "--cluster", "a100-ib100", "--compute-ms", "120", "--optimizer-ms", "4.5"]
    from_file = advise_json("--scenario", "own.toml")
    assert answer(from_file) == answer(advise_json(*flags, "--message-dtype", "bf16"))
    assert answer(from_file) != answer(advise_json("--gpus", "16", "--cluster", "a100-ib100"))
    assert answer(from_file) != answer(advise_json(*flags))  # bf16 messages: half the bytes


@needs_model
def test_plots_take_the_files_model_inputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("own.toml").write_text(
        'gpus = 16\nmargin = 0.2\ntopologies = ["ring"]\ncluster = "a100-ib100"\nnetwork = "tcp-25g"\n'
        "compute_ms = 120\nmfu = 0.3\n"
    )
    for sub in (["speedup", "--gpus-range", "8:16"], ["factors", "--gpus", "16"], ["what-if", "--gpus-range", "8:16"]):
        res = runner.invoke(app, ["plot", *sub, "--scenario", "own.toml", "--out", f"{sub[0]}.png"])
        assert res.exit_code == 0, res.output
        assert Path(f"{sub[0]}.png").stat().st_size > 0


def test_plots_take_your_model_from_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("mine.toml").write_text("param_mb = 512\ncompute_ms = 120\n")
    res = runner.invoke(app, ["plot", "factors", "--gpus", "16", "--scenario", "mine.toml", "--out", "f.png"])
    assert res.exit_code == 0, res.output
    assert Path("f.png").stat().st_size > 0


# ----------------------------------------------------------------------------- bad files: one line, exit 2

BAD_FILES = [
    ("team.toml", "gpu_count = 64\n", "unknown key 'gpu_count' (expected one of: gpus, gpus_per_node,"),
    ("team.toml", 'gpus = "64"\n', "'gpus' must be an integer, got \"64\""),
    ("team.toml", "gpus = 64.0\n", "'gpus' must be an integer, got 64.0"),
    ("team.toml", "mfu = true\n", "'mfu' must be a number, got true"),
    ("team.toml", "gpu = 100\n", "'gpu' must be a string, got 100"),
    ("team.toml", 'topologies = "ring"\n', "'topologies' must be a list of strings"),
    ("team.toml", 'topology = ["ring"]\n', "'topology' is now 'topologies' (the key is its flag's name)"),
    ("team.toml", "presets = [1]\n", "'presets' must be a list of strings"),
    ("team.toml", "[cluster]\ngpus = 8\n", "'cluster' must be a string, got a table"),
    ("team.toml", 'message_dtype = "fp8"\n', "'message_dtype' must be one of fp32, bf16, fp16"),
    ("team.toml", 'nccl_algo = "collnet"\n', "'nccl_algo' must be one of auto, ring, tree"),
    ("team.toml", 'nics_per_node = "8"\n', "'nics_per_node'"),
    ("team.toml", "gpus = \n", "not valid TOML"),
    ("team.json", '{"gpus": 64,', "not valid JSON"),
    ("team.json", "[64]", "must hold a JSON object"),
    ("team.json", '{"gpus": null}', "'gpus' must be an integer, got null"),
    ("team.yaml", "gpus: 64\n", "must end in .toml or .json"),
    ("team.toml", None, "no such file"),
    ("team.toml", "DIR", "is a directory"),
    ("team.toml", b"gpus = 64 # \xff\n", "not UTF-8"),
    # values in range are the model's to check; the file and its key are named, not a flag
    ("team.toml", "mfu = 5\n", "'mfu' must be in [0.01, 1], got 5.0"),
    ("team.toml", "gpus = 12\ngpus_per_node = 5\n", "'gpus_per_node' 5"),
    ("team.toml", "compute_ms = 0\n", "'compute_ms' must be in [0.001, 8.64e+07]"),
    ("team.toml", "optimizer_ms = -1\n", "'optimizer_ms' must be in [0, 8.64e+07]"),
    ("team.toml", "params = 0\ncompute_ms = 9\n", "'params' must be an integer in [1, 1e+11]"),
    ("team.toml", "param_mb = nan\ncompute_ms = 9\n", "'param_mb' must be a finite number > 0"),
    ("team.toml", "params = 1e8\n", "'params' 100000000 needs your measured forward + backward time"),
]


def refused(res, *fragments):
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: --scenario "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("name, content, fragment", BAD_FILES, ids=lambda x: str(x)[:30])
def test_a_bad_file_is_one_line_naming_it(tmp_path, monkeypatch, name, content, fragment):
    monkeypatch.chdir(tmp_path)
    if content == "DIR":
        Path(name).mkdir()
    elif isinstance(content, bytes):
        Path(name).write_bytes(content)
    elif content is not None:
        Path(name).write_text(content)
    refused(runner.invoke(app, ["advise", "--scenario", name]), f"--scenario {name}: ", fragment)


def test_plots_refuse_a_profile_and_name_a_bad_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("profiled.toml").write_text('profile = "p.json"\n')
    Path("bad.toml").write_text("gpus = [8]\n")
    for sub in ("speedup", "factors", "what-if"):
        res = runner.invoke(app, ["plot", sub, "--scenario", "profiled.toml", "--out", "f.png"])
        refused(res, "'profile' is for `rtmodel advise`")
        refused(runner.invoke(app, ["plot", sub, "--scenario", "bad.toml", "--out", "f.png"]), "'gpus'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml", "profiled.toml"]


def test_options_given_on_the_command_line_are_named_as_flags(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("team.toml").write_text("mfu = 0.3\n")
    res = runner.invoke(app, ["advise", "--scenario", "team.toml", "--mfu", "7"])
    assert res.exit_code == 2 and res.stderr.strip() == "error: --mfu must be in [0.01, 1], got 7.0"
