"""The one-GPU compute checks (rtmodel_literature.published_compute): cited rows, read as the sources
state them, each compared with the presets' own compute at the source's batch."""

from __future__ import annotations

import pytest

from rtmodel_literature.published_compute import compute_checks, rows
from runtime_model.presets import to_model as presets


def test_every_row_is_cited_and_names_a_preset():
    library = presets.load_library(())
    found = rows()
    assert {r["model"] for r in found} == {"resnet50", "transformer-big", "gpt2-small"}
    for r in found:
        assert r["gpu"] in library.gpus and r["model"] in library.models
        assert "@" in r["source"] and r["quote"] and float(r["per_s"]) > 0


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
