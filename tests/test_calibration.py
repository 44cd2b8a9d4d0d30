"""Calibration: fits recover KNOWN parameters from synthetic profiles; bad profiles fail with one clear line."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from calibration import (
    Measurement,
    Profile,
    SyntheticTruth,
    extrapolation_notes,
    load_profile,
    profile_from_document,
    scenario_from_profile,
    synthetic_profile,
)
from calibration.synthetic import SmallMessageRegime, write_synthetic_profile
from rtmodel_cli.commands.calibrate import register
from rtmodel_cli.failing import guard_app
from rtmodel_documents.calibration_document import Calibration, load_calibration, save_calibration
from rtmodel_documents.profile_checks import CalibrationError, ProfileError
from runtime_model.core.distributions import EmpiricalCompute, NormalCompute
from runtime_model.core.errors import UserError
from runtime_model.core.scenario import ClusterShape, GroupShape, Link, Network


def calibrate_doc(doc, **kwargs):
    """The library's calibrate on a parsed document (the tests build documents; calibrate takes a Profile)."""
    from calibration import calibrate as calibrate_profile

    return calibrate_profile(doc if isinstance(doc, Profile) else profile_from_document(doc), **kwargs)


DATA = Path(__file__).parent / "data"
# 2 nodes x 4 ranks: pair-inter groups share a NIC 4 ways (q = 4).
TRUTH = SyntheticTruth(
    nodes=2,
    ranks_per_node=4,
    intra=Link(latency_s=15e-6, bandwidth_Bps=25e9),
    inter=Link(latency_s=80e-6, bandwidth_Bps=2.5e9),
    noise_rel=0.03,
)
PRESET = Network(intra=Link(5e-6, 50e9, "preset"), inter=Link(50e-6, 12.5e9, "preset"), name="roce-100g-test")


@pytest.fixture(scope="module")
def cal():
    return calibrate_doc(synthetic_profile(TRUTH))


def _profile_file(tmp_path: Path, doc: dict, name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# ----------------------------------------------------------------------------- links and shapes


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [2, 4])
def test_links_recovered_within_stated_uncertainty(seed, k):
    truth = SyntheticTruth(**{**TRUTH.__dict__, "ranks_per_node": k, "seed": seed})
    c = calibrate_doc(synthetic_profile(truth))
    for cls in ("intra", "inter"):
        est, true = getattr(c.network, cls), getattr(truth, cls)
        assert est.bandwidth_Bps == pytest.approx(true.bandwidth_Bps, rel=0.02), cls
        assert abs(est.bandwidth_Bps / true.bandwidth_Bps - 1) <= 3 * est.bandwidth_rel_sd, cls
        assert 0 < est.latency_sd_s < 0.05 * true.latency_s
        assert abs(est.latency_s - true.latency_s) <= 3 * est.latency_sd_s, cls
        assert est.source.startswith("measured")


def test_group_costs_keyed_by_measured_shape(cal):
    k = TRUTH.ranks_per_node
    # pair-inter shares each NIC k ways; pair-inter-alone measures the same pair with its flow alone (q = 1)
    expected = {
        GroupShape(2, 1, 1),
        GroupShape(2, 2, k),
        GroupShape(2, 2, 1),
        GroupShape(k, 1, 1),
        GroupShape(2 * k, 2, 1),
    }
    assert set(cal.network.group_costs) == {g.key for g in expected}
    for g in expected:
        cost = cal.network.group_costs[g.key]
        true_per_byte = TRUTH.true_time_s(g, 2 << 20) - TRUTH.true_time_s(g, 1 << 20)
        assert cost.per_byte_s * (1 << 20) == pytest.approx(true_per_byte, rel=0.02), g.key
        assert cost.per_byte_rel_sd > 0 and cost.fixed_sd_s > 0
        assert cal.provenance[f"group_costs.{g.key}"].startswith("measured")


def test_pattern_fit_reports(cal):
    reports = [f for f in cal.fits if f.kind == "pattern"]
    assert len(reports) == 5  # pair-intra, pair-inter, pair-inter-alone, node, two-nodes+all
    for f in reports:
        assert f.r2 > 0.999
        assert f.worst_rel_residual < 0.05
        assert f.n_points == len(TRUTH.sizes_bytes)
        pooled = f.name.split()[0].count("+") + 1  # patterns forming the same shape pool their samples
        assert f.n_samples == pooled * len(TRUTH.sizes_bytes) * TRUTH.samples_per_size
        assert f.size_range_bytes == (min(TRUTH.sizes_bytes), max(TRUTH.sizes_bytes))
        assert f.warnings == []
    assert not [f for f in cal.fits if f.kind == "pattern-small"], "no regime split on single-regime data"


def test_inter_link_disagreement_is_reported(cal):
    note = next(n for n in cal.notes if n.startswith("inter link estimates"))
    assert "pair-inter" in note and "two-nodes" in note and "spread" in note
    # The same alpha-beta truth underlies both patterns: no disagreement warning.
    assert cal.fit("link inter").warnings == []


def test_disagreeing_patterns_warn_and_inflate_uncertainty():
    doc = synthetic_profile(TRUTH)
    pat = next(p for p in doc["communication"]["patterns"] if p["pattern"] == "pair-inter")
    for res in pat["results"]:  # this pattern's NIC behaves 30% slower than the ring model says
        res["samples_s"] = [s * (1 + 0.3 * res["bytes"] / (res["bytes"] + 1e5)) for s in res["samples_s"]]
    c = calibrate_doc(doc)
    warnings = c.fit("link inter").warnings
    assert any("bandwidth estimates disagree" in w for w in warnings)
    assert c.network.inter.bandwidth_rel_sd > 0.05


def test_identical_results_listed_under_several_patterns_count_once():
    doc = synthetic_profile(SyntheticTruth(nodes=2, ranks_per_node=1))
    patterns = doc["communication"]["patterns"]
    assert [p["pattern"] for p in patterns] == ["pair-inter", "two-nodes", "all"]
    for p in patterns[1:]:
        p["results"] = copy.deepcopy(patterns[0]["results"])
    c = calibrate_doc(doc, fallback_network=PRESET)
    (fit,) = [f for f in c.fits if f.kind == "pattern"]
    assert fit.name == "pair-inter+two-nodes+all p2-s2-q1"
    assert fit.n_samples == sum(len(r["samples_s"]) for r in patterns[0]["results"])


def test_unresolved_per_byte_cost_is_not_used():
    doc = synthetic_profile(TRUTH)
    pat = next(p for p in doc["communication"]["patterns"] if p["pattern"] == "pair-intra")
    for res in pat["results"]:  # flat in size: no bandwidth information
        res["samples_s"] = [1e-3 * (1 + 0.01 * i) for i in range(len(res["samples_s"]))]
    c = calibrate_doc(doc)
    assert "p2-s1-q1" not in c.network.group_costs
    assert any("p2-s1-q1: per-byte cost not resolved" in n for n in c.notes)
    assert any("consistent with 0" in w for w in c.fit("pair-intra p2-s1-q1").warnings)
    assert c.network.intra.bandwidth_Bps == pytest.approx(TRUTH.intra.bandwidth_Bps, rel=0.02)  # from `node`


def test_small_message_regime_detected_and_large_regime_used():
    small = SmallMessageRegime(below_bytes=64 << 10, fixed_s=5e-6, per_byte_s=1 / 0.8e9)
    truth = SyntheticTruth(**{**TRUTH.__dict__, "small_regime": small})
    c = calibrate_doc(synthetic_profile(truth))
    smalls = [f for f in c.fits if f.kind == "pattern-small"]
    assert len(smalls) == 5
    assert all(f.size_range_bytes[1] < 64 << 10 for f in smalls)
    assert any("two regimes" in n and "large-message regime" in n for n in c.notes)
    for cls in ("intra", "inter"):  # the model's links come from the large-message regime (the truth)
        assert getattr(c.network, cls).bandwidth_Bps == pytest.approx(
            getattr(truth, cls).bandwidth_Bps, rel=0.02
        )
    g = GroupShape(2, 2, truth.ranks_per_node)
    assert c.network.group_costs[g.key].fixed_s == pytest.approx(2 * truth.inter.latency_s, rel=0.05)


# ----------------------------------------------------------------------------- compute


def test_compute_distribution_recovered():
    truth = SyntheticTruth(**{**TRUTH.__dict__, "iterations": 60})
    c = calibrate_doc(synthetic_profile(truth))
    comp = c.compute
    assert comp.forward_s == pytest.approx(truth.forward_s, rel=0.01)
    assert comp.backward_s == pytest.approx(truth.backward_s, rel=0.01)
    assert comp.optimizer_s == pytest.approx(truth.optimizer_s, rel=0.01)
    true_sd = math.hypot(truth.forward_sd_s, truth.backward_sd_s)
    assert isinstance(comp.distribution, EmpiricalCompute)
    assert len(comp.distribution.samples_s) == truth.world_size * truth.iterations
    assert comp.distribution.mean_s == pytest.approx(truth.forward_s + truth.backward_s, rel=0.01)
    assert comp.distribution.sd_s == pytest.approx(true_sd, rel=0.10)
    mean, sd = c.fit("compute").params["C_mean_s"][0], c.fit("compute").params["C_sd_s"][0]
    assert mean == pytest.approx(truth.forward_s + truth.backward_s, rel=0.01)
    assert sd == pytest.approx(true_sd, rel=0.10)
    normal = calibrate_doc(synthetic_profile(truth), distribution="normal").compute.distribution
    assert isinstance(normal, NormalCompute) and normal.sd_s == pytest.approx(true_sd, rel=0.10)
    assert any("empirical distribution" in n for n in c.notes)


def test_rank_spread_reported_apart_from_iteration_spread():
    truth = SyntheticTruth(**{**TRUTH.__dict__, "rank_offset_rel_sd": 0.06, "iterations": 40})
    c = calibrate_doc(synthetic_profile(truth))
    p = c.fit("compute").params
    within_true = math.hypot(truth.forward_sd_s, truth.backward_sd_s)
    between_true = 0.06 * (truth.forward_s + truth.backward_s)
    assert p["C_within_rank_sd_s"][0] == pytest.approx(within_true, rel=0.10)
    assert 0.5 * between_true < p["C_between_rank_sd_s"][0] < 1.6 * between_true
    assert any("ranks differ persistently" in w for w in c.fit("compute").warnings)
    assert c.compute.forward_s == pytest.approx(truth.forward_s, rel=0.01)  # centred offsets


def test_a_slow_rank_calibrates_to_rank_factors_and_a_within_rank_distribution(tmp_path):
    truth = SyntheticTruth(**{**TRUTH.__dict__, "nodes": 2, "ranks_per_node": 2, "rank_slowdown": (1.5,)})
    c = calibrate_doc(synthetic_profile(truth))
    var, dist = c.compute.variation, c.compute.distribution
    s = np.asarray(var.rank_factors)
    assert s.size == 4 and s.mean() == pytest.approx(1.0)
    assert s[0] == pytest.approx(1.5 / 1.125, rel=0.01) and s[0] / np.median(s[1:]) == pytest.approx(
        1.5, rel=0.01
    )
    assert var.rank_cv == pytest.approx(float(np.std(s, ddof=1)), rel=0.05) and var.node_cv == 0
    # the i.i.d. part is the within-rank spread around the overall mean, not the between-rank spread again
    assert dist.mean_s == pytest.approx(c.compute.compute_s, rel=1e-9)
    within = math.hypot(truth.forward_sd_s, truth.backward_sd_s) / (truth.forward_s + truth.backward_s)
    assert dist.sd_s / dist.mean_s == pytest.approx(within, rel=0.15)
    assert (
        var.source.startswith("measured: rank factors measured (slowest rank 0 1.3")
        and "1.50x the median" in var.source
    )
    line = c.provenance["compute.variation"]
    assert "rank factors measured" in line and "node cv 0 (below noise" in line and "within ranks" in line
    assert any("ranks differ persistently" in n and "modelled as the measured per-rank" in n for n in c.notes)
    assert not any("persistently" in w for w in c.fit("compute").warnings)
    normal = calibrate_doc(synthetic_profile(truth), distribution="normal").compute.distribution
    assert normal.sd_s / normal.mean_s == pytest.approx(within, rel=0.15)
    save_calibration(c, tmp_path / "params.json")
    assert load_calibration(tmp_path / "params.json") == c
    assert any("speed factors used as measured" in n for n in extrapolation_notes(c, c.measured_shape))
    assert any("do not fit 16 ranks" in n for n in extrapolation_notes(c, ClusterShape(16, 2)))


def test_iid_profile_keeps_iid_variation_and_the_pooled_samples():
    doc = synthetic_profile(TRUTH)
    c = calibrate_doc(doc)
    assert c.compute.variation.is_iid
    pooled = [
        f + b
        for fr, br in zip(doc["compute"]["forward_s"], doc["compute"]["backward_s"], strict=True)
        for f, b in zip(fr, br, strict=True)
    ]
    assert c.compute.distribution == EmpiricalCompute(tuple(pooled))
    assert "rank factors 1 (not measured: below noise)" in c.provenance["compute.variation"]
    assert "variation" not in c.to_json()["compute"]


def test_node_correlated_variation_is_measured_apart_from_iid():
    truth = SyntheticTruth(
        **{**TRUTH.__dict__, "nodes": 4, "ranks_per_node": 2, "node_rel_sd": 0.05, "iterations": 200}
    )
    c = calibrate_doc(synthetic_profile(truth))
    var = c.compute.variation
    assert var.node_cv == pytest.approx(0.05, rel=0.25) and var.rank_factors is None
    total = math.hypot(truth.forward_sd_s, truth.backward_sd_s) / (truth.forward_s + truth.backward_s)
    rel = c.compute.distribution.sd_s / c.compute.distribution.mean_s
    assert math.hypot(rel, var.node_cv) == pytest.approx(
        math.hypot(total, 0.05), rel=0.1
    )  # not counted twice
    one_per_node = calibrate_doc(synthetic_profile(truth, ranks_per_node=1, nodes=8), fallback_network=PRESET)
    assert "node cv 0 (not measured: one rank per node)" in one_per_node.provenance["compute.variation"]


def test_bucket_ready_fractions(cal):
    for layout, sizes, fractions in (
        ("ddp", TRUTH.ddp_buckets_bytes, TRUTH.ddp_ready_fractions),
        ("gossip", TRUTH.gossip_buckets_bytes, TRUTH.gossip_ready_fractions),
    ):
        buckets = getattr(cal.buckets, layout)
        assert [b.nbytes for b in buckets] == list(sizes)
        got = np.array([b.ready_fraction for b in buckets])
        assert np.allclose(got, fractions, atol=0.01), layout
        assert np.all(np.diff(got) >= 0) and got[-1] <= 1.0


# ----------------------------------------------------------------------------- fallback presets


def test_single_node_profile_needs_and_uses_fallback():
    doc = synthetic_profile(SyntheticTruth(nodes=1, ranks_per_node=4))
    with pytest.raises(CalibrationError, match="single-node.*pass --network NAME .a preset inter-node"):
        calibrate_doc(doc)
    c = calibrate_doc(doc, fallback_network=PRESET)
    assert c.network.inter.bandwidth_Bps == PRESET.inter.bandwidth_Bps
    assert c.network.inter.latency_s == PRESET.inter.latency_s
    assert c.provenance["inter.bandwidth_Bps"] == "preset roce-100g-test"
    assert c.network.intra.source.startswith("measured")
    assert c.network.intra.bandwidth_Bps == pytest.approx(40e9, rel=0.02)
    assert any("inter-node link NOT measured" in n for n in c.notes)
    notes = extrapolation_notes(c, ClusterShape(16, 4))
    assert any(n.startswith("WARNING: the inter-node link is a preset") for n in notes)


def test_one_rank_per_node_takes_intra_from_fallback():
    doc = synthetic_profile(SyntheticTruth(nodes=2, ranks_per_node=1))
    c = calibrate_doc(doc, fallback_network=PRESET)
    assert c.provenance["intra.latency_s"] == "preset roce-100g-test"
    assert c.network.inter.bandwidth_Bps == pytest.approx(3e9, rel=0.02)
    assert set(c.network.group_costs) == {"p2-s2-q1"}  # pair-inter, two-nodes and all pool into one shape


# ----------------------------------------------------------------------------- extrapolation


def test_extrapolation_notes(cal):
    same = extrapolation_notes(cal, cal.measured_shape)
    assert any("global all-reduce p8-s2-q1: group cost measured directly" in n for n in same)
    assert not [n for n in same if n.startswith("WARNING")]

    big = extrapolation_notes(cal, ClusterShape(512, 8))
    assert big[0].startswith("measured 2 node(s) x 4 GPUs (8 ranks); target 64 node(s) x 8 GPUs (512 ranks)")
    assert any("2(p-1)*alpha_inter extrapolated from p<=8 to p=512" in n for n in big)
    assert any(n.startswith("WARNING: global all-reduce has 512 ranks") for n in big)
    assert any("NIC among 8 flows, measured at most 4" in n for n in big)
    assert any("spans 64 nodes" in n for n in big)

    huge = extrapolation_notes(cal, cal.measured_shape, message_bytes=[1 << 30])
    assert any("more than 4x the largest measured size" in n for n in huge)


# ----------------------------------------------------------------------------- serialisation


@pytest.mark.parametrize("distribution", ["empirical", "normal"])
def test_calibration_json_round_trip(distribution, tmp_path):
    c = calibrate_doc(synthetic_profile(TRUTH), distribution=distribution)
    doc = c.to_json()
    text = json.dumps(doc, allow_nan=False)  # standard JSON only
    back = Calibration.from_json(json.loads(text))
    assert back == c
    save_calibration(c, tmp_path / "params.json")
    assert load_calibration(tmp_path / "params.json") == c


def test_the_calibration_document_rejects_foreign_documents(cal):
    with pytest.raises(CalibrationError, match="not an rtmodel calibration"):
        Calibration.from_json({"tool": "rtmodel-profile"})
    doc = cal.to_json()
    assert doc["schema"] == "rtmodel-calibration/1"
    with pytest.raises(
        CalibrationError, match="schema 'rtmodel-calibration/9', newer than this rtmodel reads"
    ):
        Calibration.from_json({**doc, "schema": "rtmodel-calibration/9"})
    legacy = {
        "format": "rtmodel-calibration",
        "version": 1,
        **{k: v for k, v in doc.items() if k != "schema"},
    }
    assert Calibration.from_json(legacy) == cal  # files written before the common header still read
    with pytest.raises(CalibrationError, match="version 9, newer than this rtmodel reads"):
        Calibration.from_json({**legacy, "version": 9})
    broken = copy.deepcopy(doc)
    del broken["network"]["inter"]
    with pytest.raises(CalibrationError, match="broken calibration file"):
        Calibration.from_json(broken)


# ----------------------------------------------------------------------------- bad profiles


def _set(doc, path, value):
    *head, last = path
    for key in head:
        doc = doc[key]
    doc[last] = value


def _old_header(doc, **header):
    """The header profiles had before rtmodel-profile/1 (they still read), with `header` over it."""
    del doc["schema"]
    doc.update({"tool": "rtmodel-profile", "schema_version": 1, **header})


BAD = {
    "newer schema": (
        lambda d: d.update(schema="rtmodel-profile/2"),
        "schema 'rtmodel-profile/2', newer than this rtmodel reads (rtmodel-profile/1); update rtmodel",
    ),
    "newer schema_version": (
        lambda d: _old_header(d, schema_version=2),
        "schema_version 2, newer than this rtmodel reads (rtmodel-profile/1)",
    ),
    "another schema": (
        lambda d: d.update(schema="nccl-tests/1"),
        "not an rtmodel profile (schema='nccl-tests/1'",
    ),
    "another tool": (
        lambda d: _old_header(d, tool="nccl-tests"),
        "not an rtmodel profile (tool='nccl-tests'",
    ),
    "renamed key": (
        lambda d: d["workload"].update(batch_per_gpu=d["workload"].pop("batch_per_rank")),
        "workload.batch_per_gpu is not a field of a profile's workload",
    ),
    "missing section": (lambda d: d.pop("compute"), "section 'compute' is missing"),
    "NaN sample": (
        lambda d: _set(d, ["communication", "patterns", 1, "results", 3, "samples_s", 2], float("nan")),
        "communication.patterns[1].results[3].samples_s[2] is NaN",
    ),
    "negative compute time": (
        lambda d: _set(d, ["compute", "forward_s", 0, 4], -0.01),
        "compute.forward_s[0][4] is negative",
    ),
    "non-numeric time": (
        lambda d: _set(d, ["compute", "backward_s", 1, 0], "fast"),
        "compute.backward_s[1][0] is not a number",
    ),
    "model_args not an object": (
        lambda d: d["workload"].update(model_args=[1, 2]),
        "workload.model_args must be an object of model arguments",
    ),
    "group samples not a list": (
        lambda d: _set(d, ["communication", "patterns", 1, "results", 0, "group_samples_s"], 3.0),
        "communication.patterns[1].results[0].group_samples_s must be a non-empty list",
    ),
    "negative group sample": (
        lambda d: _set(d, ["communication", "patterns", 1, "results", 0, "group_samples_s"], [[0.1, -1.0]]),
        "communication.patterns[1].results[0].group_samples_s[0][1] is negative",
    ),
    "incomplete": (
        lambda d: d.update(complete=False, sections_done=["shape", "compute"]),
        "incomplete profile (sections missing: communication; done: shape, compute); finish it with "
        "`rtmodel profile --resume",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_profiles_give_one_line_profile_errors(case, tmp_path):
    mutate, message = BAD[case]
    doc = synthetic_profile(SyntheticTruth(iterations=5, samples_per_size=3))
    mutate(doc)
    path = _profile_file(tmp_path, doc)
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ProfileError):  # calibrate_doc() validates a dict the same way
        calibrate_doc(doc)


def test_missing_and_truncated_files(tmp_path):
    with pytest.raises(ProfileError, match="profile not found"):
        load_profile(tmp_path / "nope.json")
    text = json.dumps(synthetic_profile(SyntheticTruth(iterations=5, samples_per_size=3)))
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ProfileError, match="is not valid JSON .*truncated") as err:
        load_profile(path)
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- typed profile


def test_load_profile_gives_a_typed_profile():
    path = DATA / "synthetic_profile_2x2.json"
    prof = load_profile(path)
    doc = json.loads(path.read_text())
    assert isinstance(prof, Profile) and prof.origin == str(path)
    assert prof.shape == ClusterShape(4, 2) and prof.backend == "synthetic" and prof.node_names[0] == "h0"
    wl = prof.workload
    assert (wl.model, wl.batch_per_rank, wl.bucket_cap_mb) == ("synthetic", 8, 25.0)
    assert wl.ddp_buckets_bytes == tuple(doc["workload"]["ddp_buckets_bytes"])
    assert len(prof.compute.forward_s) == 4
    for phase in ("forward", "backward", "optimizer"):
        for rank, m in enumerate(prof.phase(phase)):
            assert m.samples_s == tuple(doc["compute"][f"{phase}_s"][rank])
    results = [(p["pattern"], r) for p in doc["communication"]["patterns"] for r in p["results"]]
    assert [(p.pattern, r.bytes, r.samples_s) for p in prof.communication.patterns for r in p.results] == [
        (name, r["bytes"], tuple(r["samples_s"])) for name, r in results
    ]
    assert prof.communication.patterns[0].group == GroupShape(2, 1, 1)
    assert prof.patterns == tuple(p["pattern"] for p in doc["communication"]["patterns"])
    assert prof.noise_warnings() == []  # 3% noise
    written = prof.document.to_json()  # every section as written (the header: this file's older form)
    assert all(written[s] == doc[s] for s in ("shape", "workload", "compute", "communication"))
    assert profile_from_document(doc, origin=str(path)) == prof
    assert calibrate_doc(prof) == calibrate_doc(doc, origin=str(path))  # a Profile and its document fit alike


def test_measurement_statistics_match_numpy():
    samples = (0.010, 0.011, 0.012, 0.010, 0.030, 0.0105)
    m = Measurement(samples, "forward rank 0")
    arr = np.asarray(samples)
    assert m.n == 6 and m.min_s == 0.010 and m.max_s == 0.030
    assert m.median_s == pytest.approx(np.median(arr))
    assert m.mean_s == pytest.approx(arr.mean())
    assert m.sd_s == pytest.approx(arr.std(ddof=1))
    assert m.iqr_s == pytest.approx(np.percentile(arr, 75) - np.percentile(arr, 25))
    assert m.cv == pytest.approx(arr.std(ddof=1) / arr.mean())
    assert m.noise_warning() is not None and m.noise_warning().startswith(
        "forward rank 0: interquartile range"
    )
    quiet = Measurement((1.0, 1.01, 0.99, 1.0))
    assert quiet.noise_warning() is None
    single = Measurement((2.0,))
    assert single.iqr_s == 0 and single.sd_s == 0 and single.noise_warning() is None
    with pytest.raises(ValueError):
        Measurement(())


def test_scenario_from_profile_is_calibrate_plus_target_shape(tmp_path):
    path = DATA / "synthetic_profile_2x2.json"
    ps = scenario_from_profile(path, 16, 4, fallback_network=PRESET)
    cal = calibrate_doc(load_profile(path), fallback_network=PRESET)
    assert ps.measured_shape == ClusterShape(4, 2) == cal.measured_shape
    assert ps.scenario.shape == ClusterShape(16, 4) and ps.scenario.description == f"profile {path}"
    assert ps.scenario.network == cal.network and ps.scenario.compute == cal.compute
    assert ps.provenance == cal.provenance
    assert ps.notes == tuple(extrapolation_notes(cal, ClusterShape(16, 4))) + tuple(cal.notes)
    same = scenario_from_profile(load_profile(path), 16)  # a loaded Profile; k defaults to the measured k
    assert same.scenario.shape == ClusterShape(16, 2)
    normal = scenario_from_profile(path, 8, distribution="normal").scenario.compute.distribution
    assert isinstance(normal, NormalCompute)
    one = write_synthetic_profile(tmp_path / "one.json", nodes=1, ranks_per_node=2, iterations=5)
    with pytest.raises(CalibrationError, match="single-node"):
        scenario_from_profile(one, 8, 2)


# ----------------------------------------------------------------------------- CLI


@pytest.fixture()
def app():
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app (a callback keeps `calibrate` a subcommand)."""

    register(app)
    return guard_app(app)


def test_cli_prints_table_and_writes_params(app, tmp_path):
    prof = write_synthetic_profile(tmp_path / "prof.json", TRUTH)
    params = tmp_path / "params.json"
    result = CliRunner().invoke(
        app, ["calibrate", str(prof), "--out", str(params), "--gpus", "64", "--gpus-per-node", "8"]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    for text in ("fitted parameters", "link inter", "bandwidth_Bps", "GB/s", "R²", "provenance", "WARNING"):
        assert text in out, text
    assert load_calibration(params).network.inter.bandwidth_Bps == pytest.approx(2.5e9, rel=0.02)


def test_cli_json_format(app, tmp_path):
    prof = write_synthetic_profile(tmp_path / "prof.json", TRUTH)
    result = CliRunner().invoke(app, ["calibrate", str(prof), "--format", "json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["schema"] == "rtmodel-calibration/1"
    assert Calibration.from_json(doc).network.intra.bandwidth_Bps == pytest.approx(25e9, rel=0.02)


@pytest.mark.parametrize("content", ['{"tool": "rtmodel-profile", "schema', None])
def test_cli_bad_file_exits_2_with_one_line(app, tmp_path, content):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    result = CliRunner().invoke(app, ["calibrate", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert ("not valid JSON" if content else "profile not found") in lines[0]


def _resolver(inter, intra):
    if inter not in (None, PRESET.name):
        raise UserError(f"unknown network '{inter}'")
    return PRESET


def test_cli_single_node_falls_back_to_the_resolvers_default(tmp_path):
    """No --network: the resolver's default network (None asked), said in the notes with the flag to use."""
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app, resolve_network=_resolver)
    guard_app(app)
    prof = write_synthetic_profile(tmp_path / "one.json", nodes=1, ranks_per_node=2, iterations=5)
    result = CliRunner().invoke(app, ["calibrate", str(prof), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["provenance"]["inter.bandwidth_Bps"] == (
        "preset roce-100g-test (not measured; default preset; --network NAME chooses)"
    )
    assert any(n.startswith("inter-node link: preset roce-100g-test is the default") for n in doc["notes"])
    result = CliRunner().invoke(app, ["calibrate", str(prof), "--network", PRESET.name])
    assert result.exit_code == 0, result.output
    assert f"preset {PRESET.name}" in result.output
    result = CliRunner().invoke(app, ["calibrate", str(prof), "--network", "no-such-net"])
    assert result.exit_code == 2 and result.stderr.strip() == "error: unknown network 'no-such-net'"


def test_cli_default_resolver_uses_rtmodel_presets(app, tmp_path):
    prof = write_synthetic_profile(tmp_path / "one.json", nodes=1, ranks_per_node=2, iterations=5)
    result = CliRunner().invoke(app, ["calibrate", str(prof), "--network", "tcp-25g"])
    assert result.exit_code == 0, result.output
    assert "preset tcp-25g" in result.output
    result = CliRunner().invoke(app, ["calibrate", str(prof), "--network", "no-such-net"])
    assert result.exit_code == 2 and "no-such-net" in result.stderr


# ----------------------------------------------------------------------------- checked-in fixtures


def test_checked_in_synthetic_fixture():
    """tests/data/synthetic_profile_2x2.json = synthetic_profile(SyntheticTruth(sizes 1 KiB..16 MiB x4,
    4 samples, 10 iterations, seed 7)): a small file other tests and demos can point the CLI at."""
    c = calibrate_doc(load_profile(DATA / "synthetic_profile_2x2.json"))
    truth = SyntheticTruth()
    assert c.measured_shape == ClusterShape(4, 2)
    for cls in ("intra", "inter"):
        assert getattr(c.network, cls).bandwidth_Bps == pytest.approx(
            getattr(truth, cls).bandwidth_Bps, rel=0.03
        )
        assert getattr(c.network, cls).latency_s == pytest.approx(getattr(truth, cls).latency_s, rel=0.05)


# ----------------------------------------------------------------------------- a real profile


REAL = DATA / "real_profile_2x1.json"


@pytest.mark.skipif(not REAL.exists(), reason="no real profile checked in (tests/data/real_profile_2x1.json)")
def test_real_cpu_profile_calibrates():
    prof = load_profile(REAL)
    c = calibrate_doc(prof, fallback_network=PRESET)
    assert c.measured_shape == prof.shape
    assert c.network.group_costs, "at least one measured group shape"
    for f in c.fits:
        if f.kind == "pattern":
            assert f.params["per_byte_s"][0] > 0
            assert f.worst_rel_residual is not None and f.worst_rel_residual < 1.0
    if prof.shape.gpus_per_node == 1:
        assert c.provenance["intra.bandwidth_Bps"] == "preset roce-100g-test"
    for f in c.fits:  # the profiler lists one measured shape under several pattern names: counted once
        if f.kind == "pattern":
            assert f.n_samples <= max(
                sum(len(r.samples_s) for q in prof.communication.patterns if q.pattern == p for r in q.results)
                for p in prof.patterns
            )
    comp = c.compute
    assert comp.forward_s > 0 and comp.backward_s > 0
    assert all(0 <= b.ready_fraction <= 1 for b in c.buckets.ddp + c.buckets.gossip)
    assert Calibration.from_json(json.loads(json.dumps(c.to_json()))) == c


@pytest.mark.parametrize("backend, algo", [("nccl", "auto"), ("gloo", None), ("synthetic", None)])
def test_unmeasured_shapes_are_costed_as_the_profiled_backend_runs_them(backend, algo):
    """A profile taken on NCCL costs the shapes it did not measure with NCCL's ring/tree; gloo keeps the
    flat ring it runs (and its two collectives in flight)."""
    doc = synthetic_profile(TRUTH)
    doc["shape"]["backend"] = backend
    net = calibrate_doc(doc).network
    assert net.nccl_algo == algo
    assert net.concurrent_collectives == (2 if backend == "gloo" else 1)


# ----------------------------------------------------------------------------- per-flow cap vs NIC capacity


def test_a_lone_flow_slower_than_the_nic_gives_a_flow_cap_and_both_are_reported():
    # 2 nodes x 2: two pair flows share each NIC (q = 2). True NIC 3 GB/s, one flow at most 2 GB/s:
    # sharing, each gets min(3/2, 2) = 1.5 GB/s; alone, min(3, 2) = 2 GB/s.
    truth = SyntheticTruth(
        nodes=2, ranks_per_node=2, inter=Link(60e-6, 3e9, flow_cap_Bps=2e9), noise_rel=0.01
    )
    c = calibrate_doc(synthetic_profile(truth))
    inter = c.network.inter
    assert inter.bandwidth_Bps == pytest.approx(3e9, rel=0.03)
    assert inter.flow_cap_Bps == pytest.approx(2e9, rel=0.03)
    assert c.provenance["inter.flow_cap_Bps"].startswith("measured one flow alone (pair-inter-alone")
    assert c.provenance["inter.bandwidth_Bps"].startswith("measured NIC capacity (pair-inter")
    assert any("per-flow cap" in n for n in c.notes)
    link_fit = next(f for f in c.fits if f.name == "link inter")
    assert set(link_fit.params) == {"latency_s", "bandwidth_Bps", "flow_cap_Bps"}
    back = Calibration.from_json(json.loads(json.dumps(c.to_json(), allow_nan=False)))
    assert back.network.inter.flow_cap_Bps == inter.flow_cap_Bps


def test_flows_sharing_a_nic_at_the_cap_show_its_capacity_only_as_a_lower_bound():
    # True NIC 5 GB/s, cap 2 GB/s, q = 2: sharing, each flow still gets min(5/2, 2) = 2 GB/s, so the
    # profile sees 4 GB/s "capacity": at least that, not measured; the 3 GB/s NIC above binds and is said so
    truth = SyntheticTruth(
        nodes=2, ranks_per_node=2, inter=Link(60e-6, 5e9, flow_cap_Bps=2e9), noise_rel=0.01
    )
    c = calibrate_doc(synthetic_profile(truth))
    assert c.network.inter.bandwidth_Bps == pytest.approx(4e9, rel=0.03)
    assert "a lower bound" in c.provenance["inter.bandwidth_Bps"]
    assert any("NIC's capacity is at least" in n for n in c.notes)
    binding = calibrate_doc(
        synthetic_profile(
            SyntheticTruth(nodes=2, ranks_per_node=2, inter=Link(60e-6, 3e9, flow_cap_Bps=2e9), noise_rel=0.01)
        )
    )
    assert "a lower bound" not in binding.provenance["inter.bandwidth_Bps"]


def test_no_flow_cap_is_claimed_when_a_lone_flow_fills_the_nic(cal):
    assert math.isinf(cal.network.inter.flow_cap_Bps)
    assert "inter.flow_cap_Bps" not in cal.provenance
    text = json.dumps(cal.to_json(), allow_nan=False)
    assert math.isinf(Calibration.from_json(json.loads(text)).network.inter.flow_cap_Bps)


def test_group_costs_use_each_groups_own_time_when_the_profile_has_it():
    # The max over every group of a pattern is what the slowest group took; a rank waits for its own.
    doc = synthetic_profile(SyntheticTruth(nodes=2, ranks_per_node=2, noise_rel=0.0, samples_per_size=3))
    pattern = next(p for p in doc["communication"]["patterns"] if p["pattern"] == "pair-inter")
    for res in pattern["results"]:
        own = res["samples_s"]
        res["group_samples_s"] = [own, own]  # each group alone took `own` ...
        res["samples_s"] = [1.5 * t for t in own]  # ... but they finished apart: the max over both is slower
    key = GroupShape(2, 2, 2).key
    fitted = calibrate_doc(doc).network.group_costs[key].time_s(1 << 24)
    plain = (
        calibrate_doc(
            synthetic_profile(SyntheticTruth(nodes=2, ranks_per_node=2, noise_rel=0.0, samples_per_size=3))
        )
        .network.group_costs[key]
        .time_s(1 << 24)
    )
    assert fitted == pytest.approx(plain, rel=1e-6)  # what a group took, not the max over the groups


@pytest.mark.parametrize(
    "profile, gpus", [("synthetic_profile_2x2.json", 256), ("real_profile_2x1.json", 64)]
)
def test_advise_reads_the_calibration_file_as_it_reads_the_profile(profile, gpus, tmp_path):
    """profile -> calibrate -> advise: `advise --calibration P` (P from `rtmodel calibrate PROFILE --out P`)
    gives the numbers `advise --profile PROFILE` gives, and the same provenance and notes where the
    profile measured every link (calibrate's file adds its own line for a link it took from a preset)."""
    from rtmodel_cli.app import app as rtmodel

    runner = CliRunner()
    params = tmp_path / "params.json"
    assert runner.invoke(rtmodel, ["calibrate", str(DATA / profile), "--out", str(params)]).exit_code == 0
    common = ["advise", "--gpus", str(gpus), "--format", "json"]
    from_profile = runner.invoke(rtmodel, [*common, "--profile", str(DATA / profile)])
    from_file = runner.invoke(rtmodel, [*common, "--calibration", str(params)])
    assert from_profile.exit_code == 0 and from_file.exit_code == 0, from_file.output
    a, b = json.loads(from_profile.stdout), json.loads(from_file.stdout)
    assert b["inputs"].pop("calibration") == str(params)
    assert b["inputs"] == a["inputs"]  # the profile it came from, the measured shape, the margins
    for key in ("predictions", "recommendation", "margin", "crossover"):
        assert b[key] == a[key], key
    # the header's line names each answer's own source, the rest of the provenance is the same
    assert a["provenance"].pop("measured") == f"profile ({profile})"
    assert b["provenance"].pop("measured") == "calibration (params.json)"
    if profile.startswith("synthetic"):  # every link measured
        assert b["provenance"] == a["provenance"] and b["notes"] == a["notes"]
    else:
        assert b["provenance"].keys() == a["provenance"].keys() and set(a["notes"]) <= set(b["notes"])
    (tmp_path / "team.toml").write_text(f'calibration = "params.json"\ngpus = {gpus}\n')  # relative to it
    from_scenario = runner.invoke(
        rtmodel, ["advise", "--scenario", str(tmp_path / "team.toml"), "--format", "json"]
    )
    assert json.loads(from_scenario.stdout)["predictions"] == a["predictions"]
