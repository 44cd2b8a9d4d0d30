"""Calibration per backend: an NCCL profile is inverted with NCCL's own ring/tree cost (the model's), a
gloo profile with the flat ring; the true links come back from synthetic profiles timed by either."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from calibration import (
    SyntheticTruth,
    calibrate,
    profile_from_document,
    synthetic_profile,
)
from calibration.inversion import MeasuredLine, invert_line, latency_steps, line_algorithm
from calibration.synthetic import write_synthetic_profile
from rtmodel_cli.app import app
from rtmodel_documents.calibration_document import Calibration
from rtmodel_documents.profile_checks import ProfileError
from rtmodel_documents.profile_schema import nccl_algo_from_env
from runtime_model.core.scenario import GroupShape, Link, Network
from runtime_model.prediction.collectives import allreduce_parts_s, allreduce_s, global_allreduce_shape

INTRA = Link(latency_s=15e-6, bandwidth_Bps=25e9)
INTER = Link(latency_s=80e-6, bandwidth_Bps=2.5e9)


def nccl_truth(
    nodes: int = 2, ranks_per_node: int = 4, algo_env: str | None = "Ring", **kw
) -> SyntheticTruth:
    return SyntheticTruth(
        nodes=nodes,
        ranks_per_node=ranks_per_node,
        intra=INTRA,
        inter=INTER,
        backend="nccl",
        nccl_algo_env=algo_env,
        **kw,
    )


def calibrated(truth: SyntheticTruth):
    return calibrate(profile_from_document(synthetic_profile(truth)))


def assert_links_recovered(net: Network, rel: float) -> None:
    for cls, true in (("intra", INTRA), ("inter", INTER)):
        got = getattr(net, cls)
        assert got.latency_s == pytest.approx(true.latency_s, rel=rel), cls
        assert got.bandwidth_Bps == pytest.approx(true.bandwidth_Bps, rel=rel), cls
        assert got.source.startswith("measured"), cls


# ----------------------------------------------------------------------------- the inversion's own terms


@pytest.mark.parametrize(
    "group, algo, steps",
    [
        (GroupShape(4, 1), None, (6, 0)),  # inside a node: the flat ring on the intra-node link
        (GroupShape(4, 1), "ring", (6, 0)),  # NCCL inside one node is costed the same way
        (GroupShape(8, 2), None, (0, 14)),  # gloo: every step pays the slowest (inter-node) hop
        (GroupShape(8, 2), "ring", (12, 2)),  # NCCL ring: 2(p-m) intra, 2(m-1) inter steps
        (GroupShape(16, 4), "ring", (24, 6)),
        (GroupShape(16, 4), "tree", (6, 4)),  # NCCL tree: 2(ppn-1) intra, 2 ceil(log2 m) inter
        (GroupShape(2, 2, 2), "ring", (0, 2)),
    ],
)
def test_latency_steps_are_the_models_own(group, algo, steps):
    assert latency_steps(group, algo) == pytest.approx(steps)


def test_a_mixed_nccl_group_is_solved_for_the_inter_latency_given_the_intra_one():
    group = GroupShape(8, 2)
    net = Network(INTRA, INTER, nccl_algo="ring")
    fixed_s, bw_s = allreduce_parts_s(group, 1.0, net)
    line = MeasuredLine(group, "two-nodes", fixed_s, 1e-6, bw_s, 0.01)
    est = invert_line(line, "ring", Link(INTRA.latency_s, INTRA.bandwidth_Bps, latency_sd_s=1e-6))
    assert est.latency_s == pytest.approx(INTER.latency_s, rel=1e-9)
    assert est.bandwidth_Bps == pytest.approx(INTER.bandwidth_Bps, rel=1e-9)
    assert est.latency_sd_s > 1e-6 / 2  # the intra latency's uncertainty is carried in
    with pytest.raises(ValueError, match="intra-node steps"):
        invert_line(line, "ring")
    assert (
        line_algorithm("auto") == "ring" and line_algorithm("tree") == "tree" and line_algorithm(None) is None
    )


# ----------------------------------------------------------------------------- synthetic profiles, known truth


@pytest.mark.parametrize("algo_env, algo", [("Ring", "ring"), ("Tree", "tree"), (None, "auto")])
@pytest.mark.parametrize("nodes, k", [(2, 2), (2, 4), (4, 2), (4, 4)])
@pytest.mark.parametrize("noise", [0.0, 0.02])
def test_nccl_profile_recovers_both_links(algo_env, algo, nodes, k, noise):
    c = calibrated(nccl_truth(nodes, k, algo_env, noise_rel=noise))
    assert c.network.nccl_algo == algo  # unmeasured shapes are costed as the profile ran
    assert_links_recovered(c.network, rel=0.03)
    assert any(f"NCCL's {line_algorithm(algo)}" in n for n in c.notes)


def test_nccl_own_choice_uses_only_the_sizes_where_nccl_ran_its_ring():
    """With NCCL choosing, a 4-node group runs the tree for messages up to MBs: those sizes are left out."""
    c = calibrated(nccl_truth(4, 4, None, noise_rel=0.02))
    assert any("all p16-s4-q1" in n and "where it ran its ring" in n for n in c.notes)
    assert "NCCL's own choice" in c.provenance["nccl_algo"]


def test_gloo_profile_is_still_inverted_as_the_flat_ring():
    truth = SyntheticTruth(
        nodes=2, ranks_per_node=4, intra=INTRA, inter=INTER, backend="gloo", noise_rel=0.02
    )
    c = calibrated(truth)
    assert c.network.nccl_algo is None
    assert_links_recovered(c.network, rel=0.03)
    assert not any("NCCL" in n for n in c.notes) and "nccl_algo" not in c.provenance


def test_the_same_timings_read_as_gloo_give_other_links():
    """The backend decides the formula: NCCL timings inverted as gloo's flat ring miss the latency."""
    doc = synthetic_profile(nccl_truth(2, 4, "Ring", noise_rel=0.0))
    doc["shape"]["backend"] = "gloo"
    inter = calibrate(profile_from_document(doc)).network.inter
    assert abs(inter.latency_s / INTER.latency_s - 1) > 0.10


def test_calibration_file_keeps_the_algorithm():
    c = calibrated(nccl_truth(2, 2, "Tree", noise_rel=0.0))
    back = Calibration.from_json(json.loads(json.dumps(c.to_json())))
    assert back.network.nccl_algo == "tree" and back == c


# ----------------------------------------------------------------------------- what the profile records


@pytest.mark.parametrize(
    "env, algo",
    [
        (None, "auto"),
        ("", "auto"),
        ("Ring", "ring"),
        ("TREE", "tree"),
        ("ring,tree", "auto"),
        ("^ring", "tree"),
        ("allreduce:tree;allgather:ring", "tree"),
        ("allgather:ring", "auto"),
    ],
)
def test_nccl_algo_env_is_read_as_nccl_does(env, algo):
    assert nccl_algo_from_env(env) == algo


def test_profiles_without_the_field_mean_nccls_own_choice_and_bad_values_are_refused():
    doc = synthetic_profile(nccl_truth(2, 2, None, iterations=5, samples_per_size=3))
    doc["shape"].pop("nccl_algo_env", None)
    assert profile_from_document(doc).nccl_algo == "auto"
    doc["shape"]["backend"] = "gloo"
    assert profile_from_document(doc).nccl_algo is None
    doc["shape"]["nccl_algo_env"] = 3
    with pytest.raises(ProfileError, match="nccl_algo_env"):
        profile_from_document(doc)


# ----------------------------------------------------------------------------- extrapolation


@pytest.mark.parametrize("algo_env", ["Ring", None])
def test_advise_at_256_gpus_matches_the_model_with_the_true_links(algo_env, tmp_path):
    truth = nccl_truth(2, 4, algo_env, noise_rel=0.02)
    path = write_synthetic_profile(tmp_path / "nccl.json", truth)
    res = CliRunner().invoke(app, ["advise", "--profile", str(path), "--gpus", "256", "--format", "json"])
    assert res.exit_code == 0, res.output
    allreduce = next(p for p in json.loads(res.stdout)["predictions"] if p["topology"] == "allreduce")
    group = global_allreduce_shape(256, truth.ranks_per_node)
    expected = sum(allreduce_s(group, b, truth.network) for b in truth.ddp_buckets_bytes)
    assert allreduce["comm_s"] == pytest.approx(expected, rel=0.03)


def test_a_resume_does_not_mix_measurements_taken_under_another_nccl_algo(tmp_path):
    from dataclasses import replace

    from calibration.synthetic import synthetic_document
    from profiler.document import resume_plan
    from rtmodel_util.files import write_json_atomic

    doc = synthetic_document(nccl_truth(2, 2, "Ring", iterations=5, samples_per_size=3))
    path = tmp_path / "p.json"
    write_json_atomic(path, replace(doc, complete=False).to_json())
    sizes = list(doc.communication.sizes_bytes)
    kept, _ = resume_plan(path, doc.shape, doc.workload, sizes)
    assert kept is not None and kept.communication.patterns
    other = replace(doc.shape, nccl_algo_env=None)
    kept, msg = resume_plan(path, other, doc.workload, sizes)
    assert kept is None and "nccl_algo_env 'Ring' there, None now" in msg
