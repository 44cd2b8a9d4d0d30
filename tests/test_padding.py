"""Padded batches: the token-budget rule that measures a corpus's padding (profiler.padding) and the model's
--padding-efficiency, which prices the device's work on the slots and leaves the host's alone."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.padding import batch_padding, main
from runtime_model.core.errors import InvalidCombination, InvalidValue
from runtime_model.presets import to_model as presets
from runtime_model.presets.to_model import PresetRequest, device_units_per_gpu, iteration_work, resolve

# --- the batching rule -------------------------------------------------------------------------------


def test_sentences_of_one_length_leave_no_padding():
    padding = batch_padding([10] * 50, [12] * 50, tokens_per_gpu=100)
    assert (padding.source, padding.target, padding.both) == (1.0, 1.0, 1.0)
    assert padding.batches == 50 * 22 // 200 + 1  # 9 pairs (198 tokens) per batch: 5 full and one of 5


def test_one_batch_pads_each_side_to_its_longest():
    # both pairs fit one batch: source slots 2 x 4, target slots 2 x 4, six real tokens a side
    padding = batch_padding([4, 2], [2, 4], tokens_per_gpu=100)
    assert padding.batches == 1
    assert padding.source == pytest.approx(6 / 8)
    assert padding.target == pytest.approx(6 / 8)
    assert padding.both == pytest.approx(12 / 16)


def test_a_batch_closes_before_the_pair_that_takes_it_over_budget():
    # sorted longest first (sums 20, 20, 20); 2 x 25 real tokens hold two pairs, not three
    padding = batch_padding([10, 10, 10], [10, 10, 10], tokens_per_gpu=25)
    assert padding.batches == 2


def test_a_batch_closes_before_its_padding_passes_the_floor():
    # a long pair, then short ones: 120 real in 3 x 100 slots is 40 %; a fourth pair would leave 32.5 %
    lengths = [100, 10, 10, 10]
    padding = batch_padding(lengths, lengths, tokens_per_gpu=10_000, floor=0.35)
    assert padding.batches == 2
    assert padding.both == pytest.approx((120 + 10) / (300 + 10))
    assert batch_padding(lengths, lengths, tokens_per_gpu=10_000, floor=0.0).batches == 1


def test_a_pair_longer_than_the_budget_has_a_batch_of_its_own():
    padding = batch_padding([500, 5], [500, 5], tokens_per_gpu=100)
    assert padding.batches == 2
    assert padding.both == 1.0


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(1, 200), st.integers(1, 200)), min_size=1, max_size=300),
    budget=st.integers(1, 5_000),
    floor=st.floats(0.0, 1.0),
)
def test_every_side_keeps_at_least_the_floor_of_its_slots(pairs, budget, floor):
    """Each batch keeps each side's real share at or above the floor (a lone pair is all real), so the
    whole corpus does too; the share never exceeds 1."""
    source, target = [s for s, _ in pairs], [t for _, t in pairs]
    padding = batch_padding(source, target, budget, floor)
    for share in (padding.source, padding.target, padding.both):
        assert floor - 1e-12 <= share <= 1.0
    assert 1 <= padding.batches <= len(pairs)


@pytest.mark.parametrize(
    "source, target, budget, floor, message",
    [
        ([1, 2], [1], 10, 0.35, "2 source lengths but 1 target"),
        ([], [], 10, 0.35, "no sentence pairs"),
        ([1], [1], 0, 0.35, "at least 1"),
        ([1], [1], 10, 1.5, "floor"),
    ],
)
def test_a_bad_corpus_or_budget_is_refused(source, target, budget, floor, message):
    with pytest.raises(ValueError, match=message):
        batch_padding(source, target, budget, floor)


# --- the command -------------------------------------------------------------------------------------


def _corpus(tmp_path, source_lines, target_lines):
    src, tgt = tmp_path / "train.en", tmp_path / "train.de"
    src.write_text("".join(line + "\n" for line in source_lines))
    tgt.write_text("".join(line + "\n" for line in target_lines))
    return src, tgt


def test_the_command_prints_each_budgets_padding(tmp_path, capsys):
    src, tgt = _corpus(tmp_path, ["a b c d", "a b"], ["a b", "a b c d"])
    assert main([str(src), str(tgt), "--tokens-per-gpu", "100", "--special-tokens", "0"]) == 0
    out = capsys.readouterr().out
    assert "2 sentence pairs" in out
    assert "0.750" in out  # 6 real tokens in 8 slots a side (test_one_batch_pads_each_side_to_its_longest)
    assert "--padding-efficiency" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tokens-per-gpu", "0"], "--tokens-per-gpu must be at least 1"),
        (["--tokens-per-gpu", "1e3"], "whole number"),
        (["--tokens-per-gpu", "10", "--special-tokens", "-1"], "--special-tokens"),
        ([], "required"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    src, tgt = _corpus(tmp_path, ["a b"], ["a b"])
    with pytest.raises(SystemExit) as stop:
        main([str(src), str(tgt), *args])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err


def test_two_sides_of_different_lengths_and_a_missing_file_are_one_line(tmp_path):
    src, tgt = _corpus(tmp_path, ["a b", "c"], ["a b"])
    for files in ([src, tgt], [src, tmp_path / "missing.de"]):
        run = subprocess.run(
            [sys.executable, "-m", "profiler.padding", *map(str, files), "--tokens-per-gpu", "10"],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 2
        assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1
        assert "Traceback" not in run.stderr


# --- the model's --padding-efficiency ----------------------------------------------------------------


def _choice(**kw):
    return resolve(PresetRequest(16, cluster="t4-ib100", model="transformer-base", global_batch=25_000, **kw))


def test_no_padding_is_the_default():
    assert _choice() == _choice(padding_efficiency=1.0)
    assert iteration_work(_choice()) == iteration_work(_choice(padding_efficiency=1.0))


@pytest.mark.parametrize("efficiency", [0.5, 0.75, 0.9])
def test_padding_prices_the_devices_per_unit_work_on_the_slots_and_leaves_the_host(efficiency):
    """Device work = per-unit x units + fixed: on padded batches the units are the slots, so the per-unit
    part grows by 1/efficiency, the fixed part (weights read once) stays; the host issues the same ops."""
    plain, padded = _choice(), _choice(padding_efficiency=efficiency)
    half = replace(plain, global_batch=plain.global_batch / 2)  # the per-unit part is what halving removes
    for part in ("forward", "backward"):
        whole, at_half = getattr(iteration_work(plain), part), getattr(iteration_work(half), part)
        per_unit_s = 2 * (whole.device_s - at_half.device_s)
        fixed_s = whole.device_s - per_unit_s
        got = getattr(iteration_work(padded), part)
        assert got.device_s == pytest.approx(fixed_s + per_unit_s / efficiency, rel=1e-9)
        assert got.host_s == whole.host_s
    for part in ("optimizer", "ddp_copies", "mixing"):  # passes over the parameters, not over tokens
        assert getattr(iteration_work(padded), part) == getattr(iteration_work(plain), part)
    assert device_units_per_gpu(padded) == pytest.approx(plain.global_batch / 16 / efficiency)


def test_padding_slows_a_device_bound_step_and_not_the_hosts_floor():
    device_bound = _choice()  # T4 in fp32 at 1,562 tokens per GPU
    ddp_plain, _ = presets.computes_from_preset(device_bound, presets.buckets_from_preset(device_bound))
    ddp_padded, _ = presets.computes_from_preset(
        _choice(padding_efficiency=0.8), presets.buckets_from_preset(device_bound)
    )
    assert ddp_padded.compute_s > 1.2 * ddp_plain.compute_s
    assert "padded batches (1.25x slots per real unit)" in ddp_padded.source
    host_bound = resolve(
        PresetRequest(1024, cluster="a100-ib100", model="transformer-base", global_batch=25_000)
    )
    work = iteration_work(host_bound)
    assert work.forward.host_s + work.backward.host_s > 2 * (work.forward.device_s + work.backward.device_s)
    ddp_a, _ = presets.computes_from_preset(host_bound, presets.buckets_from_preset(host_bound))
    ddp_b, _ = presets.computes_from_preset(
        replace(host_bound, padding_efficiency=0.8), presets.buckets_from_preset(host_bound)
    )
    assert ddp_b.compute_s == pytest.approx(ddp_a.compute_s)


@pytest.mark.parametrize("bad", [0.0, 0.01, 1.5, float("nan")])
def test_a_padding_efficiency_outside_its_range_is_refused(bad):
    with pytest.raises(InvalidValue, match="padding_efficiency"):
        _choice(padding_efficiency=bad)


def test_a_measured_compute_already_ran_on_its_own_slots():
    with pytest.raises(InvalidCombination, match="compute_ms 300 .* padding_efficiency 0.8"):
        _choice(compute_ms=300.0, padding_efficiency=0.8)


def test_advise_says_the_slots_and_the_activations_grow_with_them(tmp_path):
    import json

    from typer.testing import CliRunner

    from rtmodel_cli.app import app

    args = ["advise", "--cluster", "t4-ib100", "--gpus", "16", "--global-batch", "25000", "--format", "json"]
    plain = json.loads(CliRunner().invoke(app, args).stdout)
    padded = json.loads(CliRunner().invoke(app, [*args, "--padding-efficiency", "0.8"]).stdout)
    assert padded["inputs"]["preset"]["padding_efficiency"] == 0.8
    plain_s = {r["topology"]: r["iteration_s"]["mean"] for r in plain["predictions"] if r["applicable"]}
    padded_s = {r["topology"]: r["iteration_s"]["mean"] for r in padded["predictions"] if r["applicable"]}
    assert plain_s.keys() == padded_s.keys()
    assert all(padded_s[t] > plain_s[t] for t in plain_s)
    fixed = padded["memory"]["activation_bytes"] - plain["memory"]["activation_bytes"] / 0.8
    assert abs(fixed) < 1e-6 * plain["memory"]["activation_bytes"]  # transformer-base in fp32: no fixed part
    line = CliRunner().invoke(app, [*args[:-2], "--padding-efficiency", "0.8"], env={"COLUMNS": "200"}).stdout
    assert "1,562 tokens per GPU in 1,953 padded slots (padding efficiency 0.8)" in " ".join(line.split())
