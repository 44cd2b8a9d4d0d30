"""Your own model in a line (`--params N` / `--param-mb MB` with `--compute-ms`): the message is the
parameters' bytes, the buckets are cut as DDP and Decent-DP cut a preset's, the optimizer is the
presets' memory traffic, a scenario file or a params-only models.toml entry says the same, and the
provenance says where every number comes from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.presets import own_model
from runtime_model.presets import to_model as presets

MIB = 2**20
runner = CliRunner()
# A model's whole gradient exchanged per iteration: Decent-DP's buffers round each piece up to 32
# elements and bump equal-sized buckets by 32 elements (bucketing.py), a few kB on hundreds of MB.
DECENT_DP_PADDING = 1e-4


def advise_json(*args) -> dict:
    res = runner.invoke(app, ["advise", *map(str, args), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def allreduce_comm_s(doc: dict) -> float:
    return next(p for p in doc["predictions"] if p["topology"] == "allreduce")["comm_s"]


def answer(doc: dict) -> dict:
    return {k: doc[k] for k in ("predictions", "recommendation", "margin")}


def your_scenario(gpus=16, **kw):
    lib = own_model.add_yours(
        presets.builtin_library(), kw.pop("params", None), kw.pop("param_mb", None), 4, compute_ms=100
    )
    choice = presets.resolve(
        presets.PresetRequest(gpus, model=own_model.OWN_MODEL, compute_ms=100, **kw), library=lib
    )
    return presets.scenario_from_choice(choice, lib)


def test_the_message_is_the_parameters_bytes_in_the_message_dtype():
    fp32 = advise_json("--gpus", "16", "--params", "1e8", "--compute-ms", "100")
    assert fp32["inputs"]["your_model"] == {"name": "your-model", "params": 10**8, "message_bytes": 4e8}
    assert fp32["inputs"]["message_bytes"] == pytest.approx(4e8, rel=DECENT_DP_PADDING)
    bf16 = advise_json("--gpus", "16", "--params", "1e8", "--compute-ms", "100", "--message-dtype", "bf16")
    assert bf16["inputs"]["your_model"]["message_bytes"] == 2e8
    assert bf16["inputs"]["message_bytes"] == pytest.approx(
        fp32["inputs"]["message_bytes"] / 2, rel=DECENT_DP_PADDING
    )
    assert allreduce_comm_s(bf16) < allreduce_comm_s(fp32)


def test_param_mb_is_the_message_in_mib():
    doc = advise_json("--gpus", "16", "--param-mb", "256", "--compute-ms", "100")
    assert doc["inputs"]["your_model"]["message_bytes"] == 256 * MIB
    assert doc["inputs"]["your_model"]["params"] == 256 * MIB // 4  # fp32 elements
    same = advise_json("--gpus", "16", "--params", str(256 * MIB // 4), "--compute-ms", "100")
    assert answer(doc) == answer(same)
    half = advise_json("--gpus", "16", "--param-mb", "256", "--compute-ms", "100", "--message-dtype", "bf16")
    assert half["inputs"]["your_model"] == {**doc["inputs"]["your_model"], "params": 256 * MIB // 2}


def test_ddp_buckets_hold_exactly_the_gradient_cut_at_the_caps():
    sc = your_scenario(params=10**8)
    ddp = [b.nbytes for b in sc.buckets.ddp]
    assert sum(ddp) == 4 * 10**8
    assert ddp[0] == 1 * MIB and set(ddp[1:-1]) == {25 * MIB} and ddp[-1] <= 25 * MIB  # DDP's defaults
    assert sc.buckets.ddp[-1].ready_fraction == sc.buckets.gossip[-1].ready_fraction == 1.0
    gossip = [b.nbytes for b in sc.buckets.gossip]
    assert all(25 * MIB <= b < 25 * MIB + 4096 for b in gossip[:-1])  # Decent-DP: 25 MiB, bumped unique
    capped = [b.nbytes for b in your_scenario(params=10**8, bucket_cap_mb=50).buckets.ddp]
    assert set(capped[:-1]) == {50 * MIB} and sum(capped) == 4 * 10**8  # the cap applies to the first too


def test_a_larger_model_takes_longer_to_all_reduce():
    times = [
        allreduce_comm_s(advise_json("--gpus", "16", "--params", p, "--compute-ms", "100"))
        for p in ("1e7", "1e8", "1e9")
    ]
    assert times[0] < times[1] < times[2]
    assert times[2] / times[1] == pytest.approx(10, rel=0.2)  # bandwidth-bound: about linear in bytes


def test_the_optimizer_is_the_presets_memory_traffic_unless_given():
    lib = presets.builtin_library()
    small, large = (your_scenario(params=p).compute.optimizer_s for p in (10**8, 10**9))
    adam_bytes = (
        lib.optimizers["adam"].bytes_per_param + lib.memory_pass("grad-scaler-unscale").bytes_per_param
    )
    a100 = lib.gpu("A100")
    device_Bps = a100.memory_bandwidth_GBps * 1e9 * a100.memory_efficiency
    assert large - small == pytest.approx(adam_bytes * 9 * 10**8 / device_Bps, rel=1e-6)
    given = advise_json("--params", "1e8", "--compute-ms", "100", "--optimizer-ms", "7")
    assert given["inputs"]["compute"]["optimizer_s"] == pytest.approx(0.007)
    assert "optimizer from --optimizer-ms" in given["provenance"]["compute"]


def test_compute_is_yours_split_a_third_forward():
    compute = advise_json("--params", "1e8", "--compute-ms", "120")["inputs"]["compute"]
    assert compute["forward_s"] == pytest.approx(0.04) and compute["backward_s"] == pytest.approx(0.08)


def test_provenance_says_where_the_numbers_come_from():
    doc = advise_json("--params", "1.3e9", "--compute-ms", "300")
    line = doc["provenance"]["compute"]
    assert line.startswith(
        "your model: 1,300,000,000 parameters (4959 MiB message), compute from --compute-ms"
    )
    assert "adam's memory traffic at the A100's memory bandwidth" in line
    preset_cv = presets.load_library().models["transformer-base"].compute_cv  # the preset's, measured or not
    assert f"compute CV {preset_cv:g} (transformer-base's, the default model's" in line
    assert doc["inputs"]["compute"]["distribution"] == f"Normal(mean=300.000 ms, sd={300 * preset_cv:.3f} ms)"
    cv = advise_json("--params", "1.3e9", "--compute-ms", "300", "--compute-cv", "0.1")
    assert "compute CV 0.1 (--compute-cv)" in cv["provenance"]["compute"]
    table = runner.invoke(app, ["advise", "--params", "1.3e9", "--compute-ms", "300"])
    assert table.exit_code == 0 and "your model: 1,300,000,000 parameters" in " ".join(table.stdout.split())


def test_a_scenario_file_says_what_the_flags_say(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("mine.toml").write_text("gpus = 32\nparams = 350_000_000\ncompute_ms = 150\n")
    flags = advise_json("--gpus", "32", "--params", "3.5e8", "--compute-ms", "150")
    assert answer(advise_json("--scenario", "mine.toml")) == answer(flags)
    Path("mine.json").write_text('{"gpus": 32, "param_mb": 256, "compute_ms": 150}')
    by_size = advise_json("--gpus", "32", "--param-mb", "256", "--compute-ms", "150")
    assert answer(advise_json("--scenario", "mine.json")) == answer(by_size)


def test_a_params_only_models_toml_entry_is_your_model_by_name(tmp_path):
    (tmp_path / "models.toml").write_text('[team-llm]\nparams = 350_000_000\ndescription = "ours"\n')
    named = advise_json("--presets", tmp_path, "--model", "team-llm", "--compute-ms", "150")
    flags = advise_json("--params", "3.5e8", "--compute-ms", "150")
    assert answer(named) == answer(flags)
    assert named["provenance"]["compute"].startswith("your model team-llm: 350,000,000 parameters")
    res = runner.invoke(app, ["advise", "--presets", str(tmp_path), "--model", "team-llm"])
    assert res.exit_code == 2 and res.stderr.strip() == (
        "error: --model 'team-llm' gives only its parameter count: give --compute-ms too "
        "(your measured forward + backward time per iteration in ms)"
    )


def test_a_params_only_entry_may_name_its_optimizer_and_variation(tmp_path):
    (tmp_path / "models.toml").write_text(
        '[m]\nparams = 10_000_000\noptimizer = "fused-adam"\ncompute_cv = 0.2\n'
    )
    lib = presets.load_library(tmp_path)
    m = lib.model("m")
    assert (m.params_only, m.optimizer, m.compute_cv, m.compute_cv_source) == (
        True,
        "fused-adam",
        0.2,
        "your entry's",
    )
    fused = presets.scenario_from_choice(
        presets.resolve(presets.PresetRequest(8, model="m", compute_ms=10), library=lib), lib
    )
    (tmp_path / "models.toml").write_text("[m]\nparams = 10_000_000\n")
    lib = presets.load_library(tmp_path)
    adam = presets.scenario_from_choice(
        presets.resolve(presets.PresetRequest(8, model="m", compute_ms=10), library=lib), lib
    )
    assert fused.compute.optimizer_s < adam.compute.optimizer_s  # 32 vs 76 bytes per parameter


def test_an_incomplete_model_entry_points_at_the_params_only_form(tmp_path):
    (tmp_path / "models.toml").write_text('[m]\nparams = 10\nunit = "token"\n')
    with pytest.raises(
        presets.PresetFileError, match=r"missing key 'description'.*--params N --compute-ms MS"
    ):
        presets.load_library(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("sub", [["speedup", "--gpus-range", "8:16"], ["factors", "--gpus", "16"], ["what-if", "--gpus-range", "8:16"], ["variance", "--gpus", "16"]])  # fmt: skip
def test_plots_draw_your_model(sub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["plot", *sub, "--params", "1e9", "--compute-ms", "200", "--out", "f.png"])
    assert res.exit_code == 0, res.output
    assert Path("f.png").stat().st_size > 0


def test_plot_sweeps_see_your_model():
    from rtmodel_plots.sweeps import sweep

    lib = own_model.add_yours(presets.builtin_library(), 10**9, None, 4, compute_ms=200)
    df = sweep([16], model=own_model.OWN_MODEL, library=lib, compute_ms=200, topologies=["ring"])
    small = own_model.add_yours(presets.builtin_library(), 10**7, None, 4, compute_ms=200)
    df_small = sweep([16], model=own_model.OWN_MODEL, library=small, compute_ms=200, topologies=["ring"])
    assert df["allreduce_ms"].iloc[0] > df_small["allreduce_ms"].iloc[0]


def test_equal_buckets_are_bumped_as_decent_dp_bumps_them():
    """Decent-DP keeps buffer sizes unique by adding 32 elements while one equals an earlier bucket's;
    the layout does so without rescanning (a model of equal pieces has thousands of equal buckets)."""
    from runtime_model.prediction.bucketing import layout_from_order

    def bumped_one_by_one(elems: list[int]) -> list[int]:
        seen, out = set(), []
        for e in elems:
            while e in seen:
                e += 32
            seen.add(e)
            out.append(e)
        return out

    numels = [64, 64, 96, 64, 32, 64, 96, 64, 64, 128, 64]  # every param its own bucket (cap: 1 byte)
    lay = layout_from_order([(n, 4) for n in numels], list(range(len(numels))), 1e-6, 1e-6)
    assert lay.gossip_buckets_bytes == [4 * e for e in bumped_one_by_one(numels)]
