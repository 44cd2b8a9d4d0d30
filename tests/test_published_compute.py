"""The one-GPU compute checks (rtmodel_literature.published_compute): cited rows, read as the sources
state them, each compared with the presets' own compute at the source's batch."""

from __future__ import annotations

import numpy as np
import pytest

from rtmodel_literature.published_compute import Disagreement, compute_checks, rows, source_disagreement
from runtime_model.presets import to_model as presets


def test_every_row_is_cited_and_names_a_preset():
    library = presets.load_library(())
    found = rows()
    assert {r["model"] for r in found} == {"resnet50", "transformer-big", "gpt2-small"}
    for r in found:
        assert r["gpu"] in library.gpus and r["model"] in library.models
        assert "@" in r["source"] and r["quote"] and float(r["per_s"]) > 0
    assert {r["source"].split("/")[0] for r in found} == {"NVIDIA", "lambdal", "karpathy"}


def test_each_check_is_the_presets_compute_at_the_sources_batch():
    df = compute_checks()
    library = presets.load_library(())
    first = df.iloc[0]
    choice = presets.resolve(
        presets.PresetRequest(
            1, gpu=first.gpu, model=first.model, global_batch=first.batch, precision=first.precision
        ),
        library=library,
    )
    c = presets.scenario_from_choice(choice, library).compute
    assert first.predicted_ms == pytest.approx((c.compute_s + c.optimizer_s) * 1e3)
    r = rows()[0]
    assert first.published_ms == pytest.approx(float(r["batch_per_gpu"]) / float(r["per_s"]) * 1e3)
    assert df["compiled"].sum() == 2  # nanoGPT's and llm.c's compiled GPT-2: not eager, said so


def test_two_publishers_of_one_model_gpu_and_precision_are_compared_per_unit():
    found = {(d.gpu, d.precision): d for d in source_disagreement()}
    assert set(found) == {("A100-80GB", "fp16"), ("A100-80GB", "tf32"), ("V100", "fp16"), ("V100", "fp32")}
    amp = found[("A100-80GB", "fp16")]
    assert (amp.slower, amp.faster) == ("lambdal", "NVIDIA")
    assert amp.ratio == pytest.approx(2470 / 1582)
    assert not amp.batch_explains  # Lambda ran 1,280 images a step, NVIDIA 256: the larger batch is slower
    assert found[("A100-80GB", "tf32")].batch_explains


@pytest.mark.parametrize("ratio", [1.01, 1.44, 1.56, 3.0])
def test_no_single_prediction_is_nearer_both_sources_than_the_stated_floors(ratio):
    d = Disagreement("m", "g", "p", "a", "b", ratio, False)
    fast, slow = 1.0, ratio  # per-unit times
    for p in np.geomspace(0.5, 2 * ratio, 2001):
        errors = (abs(p / fast - 1), abs(p / slow - 1))
        assert max(errors) >= d.least_max - 1e-12
        assert sum(errors) / 2 >= d.least_mean - 1e-12
