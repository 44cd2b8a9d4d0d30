"""Decent-DP's per-bucket work after its exchanges: the profile measures it in wrapped iterations
(profiler/wrapped.py, rtmodel_decentdp.timed), and calibration gives the gossip rows that step part
(never less than the bare step); DDP's compute and profiles made before it stay as they were."""

from __future__ import annotations

import statistics

import pytest

from calibration import synthetic_profile
from calibration.calibrate_profile import calibrate
from calibration.profile_io import ProfileError, profile_from_document
from calibration.profiled import scenario_from_profile
from calibration.synthetic import SyntheticTruth
from runtime_model.presets import network_preset

TRUTH = SyntheticTruth(nodes=2, ranks_per_node=1, iterations=5, samples_per_size=3)


def _doc(step_s: float | None):
    doc = synthetic_profile(TRUTH)
    if step_s is not None:
        world = doc["shape"]["world_size"]
        doc["compute"]["gossip_step_s"] = [[step_s, step_s * 1.2] for _ in range(world)]
    return doc


def _fallback():
    return network_preset("eth-100g", "nvlink3")


def test_the_measured_step_work_becomes_the_gossip_rows_step_part():
    doc = _doc(0.05)
    bare = statistics.fmean(t for rank in doc["compute"]["optimizer_s"] for t in rank)
    assert bare < 0.055  # the synthetic truth's step is shorter than the measured work here
    cal = calibrate(profile_from_document(doc), fallback_network=_fallback())
    assert cal.gossip_compute.optimizer_s == pytest.approx(0.055)
    g, c = cal.gossip_compute, cal.compute
    assert (g.forward_s, g.backward_s, g.distribution) == (c.forward_s, c.backward_s, c.distribution)
    assert any("per-bucket work after its exchanges" in n for n in cal.notes)
    sc = scenario_from_profile(profile_from_document(doc), gpus=8, fallback_network=_fallback()).scenario
    assert sc.decent_dp_compute.optimizer_s == pytest.approx(0.055)
    assert sc.compute.optimizer_s == pytest.approx(bare)  # DDP keeps its bare step


def test_never_less_than_the_bare_step():
    cal = calibrate(profile_from_document(_doc(1e-6)), fallback_network=_fallback())
    assert cal.gossip_compute.optimizer_s == pytest.approx(cal.compute.optimizer_s)


def test_a_profile_without_it_predicts_as_before():
    cal = calibrate(profile_from_document(_doc(None)), fallback_network=_fallback())
    assert cal.gossip_compute is None
    sc = scenario_from_profile(
        profile_from_document(_doc(None)), gpus=8, fallback_network=_fallback()
    ).scenario
    assert sc.decent_dp_compute is sc.compute


def test_a_malformed_entry_is_one_line():
    doc = _doc(0.05)
    doc["compute"]["gossip_step_s"] = [[0.05]]  # one rank of two
    with pytest.raises(ProfileError, match="gossip_step_s must hold one list per rank"):
        profile_from_document(doc)
    doc["compute"]["gossip_step_s"] = [[0.05], [-1.0]]
    with pytest.raises(ProfileError, match=r"gossip_step_s\[1\]"):
        profile_from_document(doc)


@pytest.mark.slow
@pytest.mark.cluster
def test_a_real_two_rank_profile_measures_it(tmp_path):
    pytest.importorskip("decent_dp")
    from profiler.launch import run_profile
    from profiler.wrapped import WRAPPED_ITERATIONS

    doc = run_profile(tmp_path / "p.json", model="synthetic", quick=True, nproc_per_node=2, progress=False,
                      timeout_s=180)  # fmt: skip
    step = doc["compute"]["gossip_step_s"]
    assert len(step) == 2 and all(len(rank) == WRAPPED_ITERATIONS for rank in step)
    assert all(t > 0 for rank in step for t in rank)
    assert calibrate(profile_from_document(doc), fallback_network=_fallback()).gossip_compute is not None


def test_decent_dps_groups_take_the_profiles_timeout_while_it_builds_them():
    """Decent-DP's per-edge groups would otherwise wait torch's 30 minutes for a lost peer."""
    from datetime import timedelta

    import torch.distributed.distributed_c10d as c10d

    from profiler.wrapped import _new_groups_time_out

    before = c10d.default_pg_timeout, c10d.default_pg_nccl_timeout
    with _new_groups_time_out(30.0):
        assert c10d.default_pg_timeout == timedelta(seconds=30)
        assert c10d._get_default_timeout("gloo") == timedelta(seconds=30)
    assert (c10d.default_pg_timeout, c10d.default_pg_nccl_timeout) == before


def test_the_wrapped_topology_runs_on_every_world_size():
    """Decent-DP's ring refuses an odd world size; complete takes any."""
    from profiler.wrapped import wrapped_topology

    assert [wrapped_topology(n) for n in (2, 3, 4, 5)] == ["ring", "complete", "ring", "complete"]


def test_the_calibration_file_keeps_decent_dps_step():
    """`rtmodel calibrate --out` writes what a profile measured, the wrapped step included."""
    import json

    from calibration import calibration_from_json, calibration_to_json

    for step in (0.05, None):
        cal = calibrate(profile_from_document(_doc(step)), fallback_network=_fallback())
        back = calibration_from_json(json.loads(json.dumps(calibration_to_json(cal))))
        assert back == cal
        assert (back.gossip_compute is None) == (step is None)
