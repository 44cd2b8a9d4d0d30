"""Activation memory (profiler/activation_memory.py, `python -m profiler.memcount`): what a replica keeps
above its states, measured by MemTracker on FakeTensors, checked against its own invariants (growth with
the batch, the fit through its points, checkpointing saves, fake agrees with real tensors), the preset
keys it fills, and one-line refusals of models it cannot run."""

from __future__ import annotations

import sys
import tomllib
from importlib import resources

import pytest

from runtime_model.core.errors import UserError
from runtime_model.presets.preset_loading import PresetFileError, load_library
from tests.test_presets import MODEL_LINES  # a minimal model preset, as the presets' tests write it

ACTIVATIONS = """activation_bytes_per_unit = { amp = 5e5, full = 1e6 }
activation_fixed_bytes = { amp = 2e3, full = 0 }
checkpointed_activation_bytes_per_unit = { amp = 1e5, full = 2e5 }
checkpointed_activation_fixed_bytes = { amp = 2e3, full = 0 }
activation_source = "python -m profiler.memcount --model m --checkpointing"
"""


def _model(tmp_path, text: str):
    (tmp_path / "models.toml").write_text(text)
    return load_library(tmp_path).model("m")


# --------------------------------------------------------------------------- preset keys (no torch)


def test_a_model_loads_with_and_without_activation_keys(tmp_path):
    bare = _model(tmp_path, MODEL_LINES)
    assert bare.activation_bytes_per_unit is None and bare.checkpointed_activation_fixed_bytes is None
    assert bare.activation_source == ""
    m = _model(tmp_path, MODEL_LINES + ACTIVATIONS)
    assert dict(m.activation_bytes_per_unit) == {"amp": 5e5, "full": 1e6}
    assert dict(m.checkpointed_activation_fixed_bytes) == {"amp": 2e3, "full": 0.0}
    assert m.activation_source.startswith("python -m profiler.memcount")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (("amp = 5e5, full = 1e6", "amp = -5e5, full = 1e6"), "activation_bytes_per_unit.amp must be in [0, "),
        (("amp = 5e5, full = 1e6", "amp = 1e300, full = 1e6"), "activation_bytes_per_unit.amp must be in [0, "),
        (("activation_fixed_bytes = { amp = 2e3,", "activation_fixed_bytes = { amp = nan,"), "activation_fixed_bytes.amp"),
        (("{ amp = 1e5, full = 2e5 }", "{ amp = 1e5 }"), "must be a table with the keys amp and full"),
        (("activation_fixed_bytes = { amp = 2e3, full = 0 }\n", ""), "activation_fixed_bytes must be given with"),
        (("activation_bytes_per_unit = { amp = 5e5, full = 1e6 }\nactivation_fixed_bytes = { amp = 2e3, full = 0 }\n", ""),
         "activation_bytes_per_unit must be given with checkpointed_activation_bytes_per_unit"),
    ],
)  # fmt: skip
def test_absurd_activation_entries_are_refused_in_one_line(tmp_path, change, says):
    old, new = change
    text = MODEL_LINES + ACTIVATIONS.replace(old, new, 1)
    with pytest.raises(PresetFileError) as info:
        _model(tmp_path, text)
    assert says in str(info.value) and "models.toml [m]" in str(info.value)
    assert "\n" not in str(info.value)


def test_every_preset_model_records_its_activations():
    from runtime_model.presets.preset_loading import builtin_library

    for model in builtin_library().models.values():
        for key in ("activation_bytes_per_unit", "checkpointed_activation_bytes_per_unit"):
            table = getattr(model, key)
            assert table is not None and table["amp"] > 0 and table["full"] > 0, (model.name, key)
            assert getattr(model, key.replace("bytes_per_unit", "fixed_bytes")) is not None
        assert "profiler.memcount" in model.activation_source
        # checkpointing keeps block inputs only: less per unit, in both modes
        for mode in ("amp", "full"):
            assert model.checkpointed_activation_bytes_per_unit[mode] < model.activation_bytes_per_unit[mode]


# --------------------------------------------------------------------------- the measure (torch)


@pytest.fixture
def am():
    pytest.importorskip("torch")
    from profiler import activation_memory

    return activation_memory


TINY = "transformer-tiny"  # 2 encoder layers, 64-token samples: a measure takes a fraction of a second


@pytest.mark.cluster
def test_activation_bytes_grow_with_the_batch_and_the_fit_passes_through_them(am):
    fit = am.fit_for_workload(TINY, (2, 4, 8))
    measured = [m.activation_bytes for m in fit.measures]
    assert measured == sorted(measured) and len(set(measured)) == 3
    assert fit.per_unit_bytes > 0
    for m in fit.measures:
        assert abs(m.activation_bytes - fit.at(m.batch)) <= fit.worst_residual_bytes + 1e-6
    assert fit.worst_residual_bytes <= 0.01 * max(measured)
    # the states do not depend on the batch; the parameter count is cross-checked by the bytes
    states = {(m.params, m.parameter_bytes, m.gradient_bytes, m.optimizer_bytes) for m in fit.measures}
    assert len(states) == 1
    m = fit.measures[0]
    assert m.parameter_bytes >= 4 * m.params and m.gradient_bytes == m.parameter_bytes
    assert m.peak_total_bytes >= m.activation_at_peak_bytes + m.parameter_bytes + m.optimizer_bytes


@pytest.mark.cluster
def test_checkpointing_keeps_less_and_names_the_blocks(am):
    plain = am.estimate_for_workload(TINY, 8)
    checkpointed = am.estimate_for_workload(TINY, 8, checkpointing=True)
    assert checkpointed.checkpointed_blocks == ("encoder.layers.0", "encoder.layers.1")
    assert plain.checkpointed_blocks == ()
    assert checkpointed.activation_bytes < plain.activation_bytes
    assert checkpointed.params == plain.params


@pytest.mark.cluster
def test_fake_tensors_measure_what_real_tensors_measure(am):
    """On FakeTensors nothing is allocated; a model small enough to run for real gives the same bytes."""
    import torch

    from rtmodel_harness.workloads import build_workload

    for amp in (False, True):
        fake = am.estimate_for_workload(TINY, 4, amp=amp, device_type="cpu")
        torch.manual_seed(0)
        w = build_workload(TINY, None, 4, "cpu", rank=0)
        real = am.measure_activation_bytes(
            w.model,
            lambda step, _b, _d, w=w: w.make_batch(step),
            w.loss_fn,
            4,
            amp=amp,
            device_type="cpu",
        )
        strip = lambda m: (m.activation_bytes, m.peak_total_bytes, m.gradient_bytes, m.optimizer_bytes)  # noqa: E731
        assert strip(fake) == strip(real)


@pytest.mark.cluster
def test_a_measure_does_not_depend_on_what_ran_before_it(am):
    """Python's cycle collector is paused during a measure: whether it last ran long ago or just now,
    and whatever ran before, the bytes are the same."""
    import gc

    first = am.estimate_for_workload(TINY, 4, amp=True)
    am.estimate_for_workload(TINY, 2, checkpointing=True)
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        again = am.estimate_for_workload(TINY, 4, amp=True)
    finally:
        gc.set_threshold(*thresholds)
    assert (first.activation_bytes, first.peak_total_bytes) == (
        again.activation_bytes,
        again.peak_total_bytes,
    )


@pytest.mark.cluster
def test_a_gradient_is_never_counted_as_an_activation(am):
    """MemTracker files a weight's gradient under Temp until its hook runs; counted so, one sample would
    hold the 4 MiB gradient of a layer whose activations are 8 KiB."""
    import torch
    from torch import nn

    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(1024, 1024), nn.Linear(1024, 1024))

    def make_batch(step, batch, device):
        return torch.randn(batch, 1024, device=device), torch.randn(batch, 1024, device=device)

    m = am.measure_activation_bytes(model, make_batch, nn.functional.mse_loss, 1, device_type="cpu")
    assert m.gradient_bytes == m.parameter_bytes == 4 * m.params
    assert m.activation_bytes < 64 * 1024


@pytest.mark.cluster
def test_cuda_storages_are_rounded_to_512_bytes(am):
    cpu = am.estimate_for_workload(TINY, 2, device_type="cpu")
    cuda = am.estimate_for_workload(TINY, 2)
    assert cuda.activation_bytes % 512 == 0 and cuda.parameter_bytes % 512 == 0
    # dropout 0: the same kernels, each storage rounded up, so never less at any op
    assert cuda.parameter_bytes >= cpu.parameter_bytes and cuda.activation_bytes >= cpu.activation_bytes


FACTORIES = """
import torch
from torch import nn


def broken(**kwargs):
    raise RuntimeError("the checkpoint file is missing")


def data_dependent(**kwargs):
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) if float(x.sum()) > 0 else -self.lin(x)  # a value FakeTensors do not have

    def make_batch(step, batch, device):
        return torch.randn(batch, 4, device=device), torch.randn(batch, 4, device=device)

    return Gate(), make_batch, nn.functional.mse_loss


def layers_only(**kwargs):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))

    def make_batch(step, batch, device):
        return torch.randn(batch, 4, device=device), torch.randn(batch, 4, device=device)

    return model, make_batch, nn.functional.mse_loss
"""


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("factory", "checkpointing", "says"),
    [
        ("broken", False, "cannot be built on the meta device: RuntimeError: the checkpoint file is missing"),
        ("data_dependent", False, "cannot run on FakeTensors (shapes only)"),
        ("layers_only", True, "no repeated blocks to checkpoint"),
    ],
)
def test_a_model_that_cannot_be_measured_is_one_line(am, tmp_path, monkeypatch, factory, checkpointing, says):
    (tmp_path / "mymodels_am.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mymodels_am", raising=False)
    name = f"mymodels_am:{factory}"
    with pytest.raises(UserError) as info:
        am.estimate_for_workload(name, 2, checkpointing=checkpointing)
    message = str(info.value)
    assert isinstance(info.value, am.ActivationMemoryError)
    assert message.startswith(name) and says in message and "\n" not in message


@pytest.mark.cluster
def test_the_command_refuses_an_unknown_model_in_one_line(capsys):
    pytest.importorskip("torch")
    from profiler import memcount

    with pytest.raises(SystemExit) as info:
        memcount.main(["--model", "resnet51"])
    assert info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.cluster
@pytest.mark.slow
def test_models_toml_holds_what_the_command_measures(tmp_path):
    """The committed figures are the command's (fp32, the cheapest mode to rerun: three measures)."""
    pytest.importorskip("torch")
    from profiler import memcount

    out = tmp_path / "resnet50.toml"
    assert memcount.main(["--model", "resnet50", "--no-amp", "--out", str(out)]) == 0
    measured = tomllib.loads(out.read_text())["resnet50"]
    text = resources.files("runtime_model.presets.preset_data").joinpath("models.toml").read_text()
    committed = tomllib.loads(text)["resnet50"]
    for key in ("activation_bytes_per_unit", "activation_fixed_bytes"):
        assert committed[key]["full"] == measured[key]["full"]
