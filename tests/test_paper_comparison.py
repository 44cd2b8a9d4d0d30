"""The presets next to the paper's published measurements: the error is computed and bounded, not hidden."""

import numpy as np

from rtmodel_literature.paper import compare, local_tokens, paper_choice, published


def test_every_published_number_is_compared():
    df = compare()
    assert len(df) == 3 * len(published())
    assert np.isfinite(df["predicted_ms"]).all()
    assert np.allclose(df["error"], (df["predicted_ms"] - df["published_ms"]) / df["published_ms"])


def test_presets_error_is_bounded():
    """Presets are physical data with public sources, nothing fitted per row; docs/paper.md quotes the error
    and what the A100 rows lack. These bounds guard against regressions, not a tuned match: the T4 panel
    at the issue's bound (mean 15 %, max 25 %), the A100 one where it stands (docs/paper.md)."""
    df = compare()
    by_cluster = df.groupby("cluster")["error"]
    t4 = by_cluster.get_group("t4-ib100").abs()
    assert t4.mean() <= 0.15 and t4.max() <= 0.25
    assert by_cluster.get_group("a100-ib100").abs().mean() < 0.25


def test_each_row_is_priced_as_the_authors_code_ran_it():
    """WangZesen/accum-adam-nips2024: use_amp = false (fp32 on the T4, which has no TF32; TF32 matmuls on
    the A100), DDP with the bucket view, and each GPU's max_tokens_per_batch // world_size tokens."""
    assert local_tokens(16) == 1562 and local_tokens(64) == 390
    for rec in published().itertuples():
        choice = paper_choice(rec)
        assert choice.precision == {"t4-ib100": "fp32", "a100-ib100": "tf32"}[rec.cluster]
        assert choice.ddp_bucket_view and choice.global_batch == local_tokens(rec.gpus) * rec.gpus


def test_decentralized_faster_than_allreduce_where_published_so():
    df = compare()
    for (cluster, gpus), g in df.groupby(["cluster", "gpus"]):
        pred = dict(zip(g["method"], g["predicted_ms"], strict=True))
        assert pred["alternating-exp-ring"] < pred["allreduce"], (cluster, gpus)


def test_the_presets_measured_error_kept_as_data_is_the_comparisons():
    """The presets' iteration-time error kept as data (preset_data/accuracy.toml) is this comparison's,
    recomputed here so the two can never drift apart (the speedup errors, per source class, are
    tests/test_speedup_evidence.py's)."""
    from runtime_model.advice.confidence import PRESETS, measured_errors

    df = compare()
    kept = measured_errors()[PRESETS]
    assert kept.predictions == len(df)
    assert abs(kept.mean_abs_error - df["error"].abs().mean()) < 5e-4
    assert abs(kept.max_abs_error - df["error"].abs().max()) < 5e-4


def test_the_profiles_measured_error_kept_as_data_is_the_benchmarks():
    import json
    from pathlib import Path

    from runtime_model.advice.confidence import PROFILE, measured_errors

    summary = json.loads((Path(__file__).parents[1] / "benchmarks/results/accuracy-full.json").read_text())
    kept = measured_errors()[PROFILE]
    assert kept.predictions == summary["predictions"]
    assert abs(kept.mean_abs_error - summary["mean_abs_error"]) < 5e-4
    assert abs(kept.max_abs_error - summary["max_abs_error"]) < 5e-4
    assert kept.speedups == summary["speedups"]
    assert abs(kept.speedup_mean_abs_error - summary["speedup_mean_abs_error"]) < 5e-4
    assert abs(kept.speedup_max_abs_error - summary["speedup_max_abs_error"]) < 5e-4
    # the interval held out over the emulated clusters (held_out.py), from the benchmark's rows
    import csv

    from runtime_model.advice.held_out import leave_one_source_out

    rows = list(csv.DictReader((Path(__file__).parents[1] / "benchmarks/results/accuracy-full.csv").open()))
    held = leave_one_source_out(
        [(r["cluster"], float(r["speedup_pred"]) / float(r["speedup_meas"]) - 1) for r in rows]
    )
    assert abs(kept.speedup_interval - held.interval) < 5e-4 and kept.speedup_sources == held.sources
    assert abs(kept.speedup_held_out_coverage - held.coverage) < 5e-4


def test_padding_left_at_one_is_the_checked_recipe_and_padding_slows_the_device_bound_rows():
    """compare(padding=...) is docs/paper.md's what-if: efficiency 1 everywhere changes nothing, and a
    padded batch moves the device-bound rows (T4, and the A100 at 8 GPUs) and not the host-bound ones."""
    budgets = {local_tokens(n) for n in published()["gpus"]}
    base = compare()
    same = compare(padding=dict.fromkeys(budgets, 1.0))
    assert np.allclose(same["predicted_ms"], base["predicted_ms"], rtol=1e-12)
    padded = compare(padding=dict.fromkeys(budgets, 0.8))
    moved = (padded["predicted_ms"] / base["predicted_ms"]).to_numpy()
    t4 = (base["cluster"] == "t4-ib100").to_numpy()
    assert (moved[t4] > 1.05).all()
    a100_8 = ((base["cluster"] == "a100-ib100") & (base["gpus"] == 8)).to_numpy()
    assert (moved[a100_8] > 1.05).all()
    assert (moved >= 1 - 1e-12).all()
