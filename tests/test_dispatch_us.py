"""`--dispatch-us US` (scenario key `dispatch_us`): your host's `profiler.opcount --dispatch` figure
replaces the GPU preset's host cost per op. It is the library's GPU preset with that one number
replaced, moves a host-bound iteration the right way and leaves a device-bound one alone, reaches the
plots, and the advice says which host's figure it used."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.presets import to_model as presets

runner = CliRunner()
HOST_BOUND = {"gpus": 64}  # transformer-base's 390 tokens per GPU: the host issues slower than the A100 runs
DEVICE_BOUND = {"gpus": 8, "global_batch": 200_000.0}
PRESET_DISPATCH_US = presets.load_library().gpus["A100"].dispatch_us  # a slower host than it: 45.0  # 25,000 tokens per GPU: the device binds


def advise_json(*args) -> dict:
    res = runner.invoke(app, ["advise", *map(str, args), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def iteration_s(choice, library=None) -> tuple[float, float]:
    """(DDP's, Decent-DP's) compute per iteration, forward + backward + optimizer."""
    sc = presets.scenario_from_choice(choice, library)
    ddp, gossip = sc.compute, sc.decent_dp_compute
    return ddp.compute_s + ddp.optimizer_s, gossip.compute_s + gossip.optimizer_s


def library_with_dispatch(gpu: str, dispatch_us: float):
    lib = presets.builtin_library()
    return dataclasses.replace(
        lib, gpus={**lib.gpus, gpu: dataclasses.replace(lib.gpus[gpu], dispatch_us=dispatch_us)}
    )


@pytest.mark.parametrize("gpu", ["T4", "A100", "H100"])
@pytest.mark.parametrize("extra", [{}, {"compute_ms": 80.0}, {"optimizer_ms": 2.0}, DEVICE_BOUND])
def test_the_option_is_the_gpu_preset_with_its_dispatch_replaced(gpu, extra):
    extra = {**HOST_BOUND, **extra}
    ours = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(gpu=gpu, dispatch_us=45.0, **extra)))
    lib = library_with_dispatch(gpu, 45.0)
    theirs = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(gpu=gpu, **extra), library=lib), lib)
    for a, b in [(ours.compute, theirs.compute), (ours.decent_dp_compute, theirs.decent_dp_compute)]:
        assert (a.forward_s, a.backward_s, a.optimizer_s) == (b.forward_s, b.backward_s, b.optimizer_s)


@settings(max_examples=25, deadline=None)
@given(
    gpu=st.sampled_from(["T4", "A100", "H100"]),
    gpus=st.sampled_from([8, 64, 512]),
    low=st.floats(0.1, 100.0),
    factor=st.floats(1.0, 20.0),
)
def test_a_slower_host_never_predicts_a_faster_iteration(gpu, gpus, low, factor):
    fast = iteration_s(presets.resolve(presets.PresetRequest(gpus, gpu=gpu, dispatch_us=low)))
    slow = iteration_s(presets.resolve(presets.PresetRequest(gpus, gpu=gpu, dispatch_us=low * factor)))
    assert slow[0] >= fast[0] - 1e-12 and slow[1] >= fast[1] - 1e-12


def test_a_host_bound_iteration_follows_the_host_and_a_device_bound_one_does_not():
    default = iteration_s(presets.resolve(presets.PresetRequest(**HOST_BOUND)))
    slow = iteration_s(presets.resolve(presets.PresetRequest(dispatch_us=45.0, **HOST_BOUND)))
    assert all(s > 1.2 * d for s, d in zip(slow, default, strict=True))  # 45.0 vs the preset's 30.2 us
    default = iteration_s(presets.resolve(presets.PresetRequest(**DEVICE_BOUND)))
    slow = iteration_s(presets.resolve(presets.PresetRequest(dispatch_us=45.0, **DEVICE_BOUND)))
    assert slow == pytest.approx(default, rel=0.01)


def test_with_compute_ms_alone_it_still_prices_the_optimizer_step():
    """--compute-ms replaces forward + backward only: the step's host ops are still the host's."""
    base = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(64, compute_ms=100.0)))
    slow = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(64, compute_ms=100.0, dispatch_us=1000.0)))
    assert slow.compute.compute_s == base.compute.compute_s
    assert slow.decent_dp_compute.optimizer_s > base.decent_dp_compute.optimizer_s


def test_advise_uses_it_and_says_where_the_host_figure_came_from():
    doc = advise_json("--gpus", 64, "--dispatch-us", 45.0)
    lib = library_with_dispatch("A100", 45.0)
    want = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(64), library=lib), lib).compute
    assert doc["inputs"]["compute"]["forward_s"] == pytest.approx(want.forward_s, rel=1e-12)
    assert doc["inputs"]["preset"]["dispatch_us"] == 45.0
    launch_us = presets.load_library().gpus["A100"].launch_us  # the preset's, whatever its measurement
    launch = f" + {launch_us:g} us/op CUDA launch (measured on an H100 host: gpus.toml launch_source)"
    assert doc["provenance"]["host dispatch"] == "45 us/op (--dispatch-us, this host's opcount --dispatch)" + launch
    default = advise_json("--gpus", 64)
    assert default["provenance"]["host dispatch"] == (
        f"{PRESET_DISPATCH_US:g} us/op from the A100 preset, measured on another host{launch}: give --dispatch-us from "
        "`python -m profiler.opcount --model transformer-base --dispatch` on yours"
    )
    assert doc["predictions"][0]["iteration_s"]["mean"] > default["predictions"][0]["iteration_s"]["mean"]


def test_the_table_says_it_too():
    res = runner.invoke(app, ["advise", "--gpus", "64", "--dispatch-us", "45.0"])
    assert res.exit_code == 0, res.output
    assert "host dispatch: 45 us/op (--dispatch-us" in res.stdout


def test_no_host_line_where_nothing_is_left_for_it_to_price():
    measured = advise_json("--compute-ms", 100, "--optimizer-ms", 4)
    assert "host dispatch" not in measured["provenance"]
    profiled = advise_json("--profile", "tests/data/synthetic_profile_2x2.json", "--gpus", 16)
    assert "host dispatch" not in profiled["provenance"]


def test_the_scenario_key_is_the_option(tmp_path):
    path = tmp_path / "team.toml"
    path.write_text("gpus = 32\ndispatch_us = 24.5\n")
    assert advise_json("--scenario", path) == advise_json("--gpus", 32, "--dispatch-us", 24.5)


def test_plot_speedup_passes_it_to_the_sweep(tmp_path, monkeypatch):
    import rtmodel_plots as plots
    from rtmodel_cli.commands import plot

    seen = {}
    monkeypatch.setattr(plots, "speedup_vs_gpus", lambda *a, **kw: seen.update(kw))
    monkeypatch.setattr(plot, "render", lambda make, out, data=None: make())
    res = runner.invoke(app, ["plot", "speedup", "--out", str(tmp_path / "f.svg"), "--dispatch-us", "45.0"])
    assert res.exit_code == 0, res.output
    assert seen["dispatch_us"] == 45.0


def test_the_sweep_with_it_is_slower_where_the_host_binds():
    from rtmodel_plots.sweeps import sweep

    kw = {"network": "ib-100", "topologies": ["ring"]}
    base = sweep([64], **kw).set_index("topology")
    slow = sweep([64], dispatch_us=45.0, **kw).set_index("topology")
    assert slow.loc["ring", "allreduce_ms"] > base.loc["ring", "allreduce_ms"]


def test_the_host_floor_line_says_what_binds_and_moves_with_the_host():
    """advise on defaults states the host's issue time per DDP iteration against the device's work."""
    small = advise_json("--gpus", 64)["provenance"]["host floor"]
    assert small.endswith("host-bound: the GPU waits for Python")
    big = advise_json("--gpus", 8, "--global-batch", 400_000)["provenance"]["host floor"]
    assert big.endswith("device-bound: the GPU is the limit")
    choice = presets.resolve(presets.PresetRequest(64))
    w = presets.iteration_work(choice)
    host_ms = (w.forward.host_s + w.backward.host_s + w.ddp_copies.host_s + w.optimizer.host_s) * 1e3
    assert small.startswith(f"{host_ms:.1f} ms of host issue per DDP iteration")
    slower = advise_json("--gpus", 64, "--dispatch-us", 45.0)["provenance"]["host floor"]
    assert float(slower.split(" ms")[0]) > host_ms
    assert "host floor" not in advise_json("--compute-ms", 100)["provenance"]
