"""The wrappers' own work, measured in wrapped iterations (profiler/wrapped.py): Decent-DP's per-bucket work
after its exchanges (rtmodel_decentdp.timed), which calibration gives the gossip rows as their step part
(never less than the bare step), and DDP's host work with its exchanges skipped (torch's noop comm hook),
which it adds to the All-Reduce rows' phases; profiles made before either predict as they did."""

from __future__ import annotations

import statistics

import pytest

from calibration import synthetic_profile
from calibration.calibrate_profile import calibrate
from calibration.profile_view import profile_from_document
from calibration.profiled import scenario_from_profile
from calibration.synthetic import SyntheticTruth
from rtmodel_documents.profile_checks import ProfileError
from runtime_model.core.scenario import ClusterShape
from runtime_model.prediction.iteration import allreduce_prediction
from runtime_model.presets.to_model import network_preset

TRUTH = SyntheticTruth(nodes=2, ranks_per_node=1, iterations=5, samples_per_size=3)


def _doc(step_s: float | None):
    doc = synthetic_profile(TRUTH)
    if step_s is not None:
        world = doc["shape"]["world_size"]
        doc["compute"]["gossip_step_s"] = [[step_s, step_s * 1.2] for _ in range(world)]
    return doc


def _fallback():
    return network_preset("roce-100g", "nvlink3")


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
    from profiler.options import ProfileOptions
    from profiler.wrapped import WRAPPED_ITERATIONS

    doc = run_profile(ProfileOptions(tmp_path / "p.json", model="synthetic", quick=True, nproc_per_node=2,
                                     progress=False, timeout_s=180))  # fmt: skip
    for key in ("gossip_step_s", "ddp_forward_s", "ddp_backward_s", "ddp_optimizer_s"):
        rows = doc["compute"][key]
        assert len(rows) == 2 and all(len(rank) == WRAPPED_ITERATIONS for rank in rows), key
        assert all(t > 0 for rank in rows for t in rank), key
    cal = calibrate(profile_from_document(doc), fallback_network=_fallback())
    assert cal.gossip_compute is not None and cal.ddp_work is not None


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

    from rtmodel_documents.calibration_document import Calibration

    for step in (0.05, None):
        cal = calibrate(profile_from_document(_doc(step)), fallback_network=_fallback())
        back = Calibration.from_json(json.loads(json.dumps(cal.to_json())))
        assert back == cal
        assert (back.gossip_compute is None) == (step is None)


def _ddp_doc(extra_s: tuple[float, float, float], iterations: int = TRUTH.iterations):
    doc = synthetic_profile(TRUTH, iterations=iterations)
    c = doc["compute"]
    for key, extra in zip(("forward_s", "backward_s", "optimizer_s"), extra_s, strict=True):
        c[f"ddp_{key}"] = [[t + extra for t in rank] for rank in c[key]]
    return doc


def test_ddps_measured_work_goes_to_the_allreduce_rows_only():
    plain = calibrate(profile_from_document(_doc(None)), fallback_network=_fallback())
    cal = calibrate(profile_from_document(_ddp_doc((0.001, 0.004, 0.002))), fallback_network=_fallback())
    w = cal.ddp_work
    assert (w.forward_s, w.backward_s, w.optimizer_s) == pytest.approx((0.001, 0.004, 0.002))
    assert cal.compute == plain.compute  # the bare compute stays what it was
    assert any("DDP's own host work" in n for n in cal.notes)
    sc, base = cal.scenario(ClusterShape(8, 1)), plain.scenario(ClusterShape(8, 1))
    assert sc.compute.backward_s == pytest.approx(base.compute.backward_s + 0.004)
    assert sc.compute.optimizer_s == pytest.approx(base.compute.optimizer_s + 0.002)
    assert sc.compute.distribution.mean_s == pytest.approx(base.compute.distribution.mean_s + 0.005)
    assert sc.decent_dp_compute == base.decent_dp_compute  # Decent-DP runs no DDP hooks
    assert allreduce_prediction(sc).mean_s > allreduce_prediction(base).mean_s


def test_a_spell_of_contention_is_not_ddps_work():
    """Three of ten wrapped iterations slow on every rank at once (as the emulated cluster showed) move
    the mean by tens of ms but not the least-disturbed iterations, which carry DDP's own work."""
    doc = _ddp_doc((0.0, 0.002, 0.0), iterations=30)
    for rank in doc["compute"]["ddp_backward_s"]:
        rank[4:13] = [t + 0.15 for t in rank[4:13]]
    w = calibrate(profile_from_document(doc), fallback_network=_fallback()).ddp_work
    assert w.backward_s == pytest.approx(0.002, abs=1e-3)


def test_ddp_faster_than_bare_adds_nothing():
    cal = calibrate(profile_from_document(_ddp_doc((-0.001, -0.001, -0.001))), fallback_network=_fallback())
    w = cal.ddp_work
    assert (w.forward_s, w.backward_s, w.optimizer_s) == (0.0, 0.0, 0.0)


def test_ddps_rows_come_together_and_whole():
    doc = _ddp_doc((0.001, 0.004, 0.002))
    del doc["compute"]["ddp_optimizer_s"]
    with pytest.raises(ProfileError, match="ddp_forward_s comes without compute.ddp_optimizer_s"):
        profile_from_document(doc)
    doc = _ddp_doc((0.001, 0.004, 0.002))
    doc["compute"]["ddp_backward_s"] = [[0.01]]
    with pytest.raises(ProfileError, match="ddp_backward_s must hold one list per rank"):
        profile_from_document(doc)


def test_the_calibration_file_keeps_ddps_work():
    import json

    from rtmodel_documents.calibration_document import Calibration

    cal = calibrate(profile_from_document(_ddp_doc((0.001, 0.004, 0.002))), fallback_network=_fallback())
    back = Calibration.from_json(json.loads(json.dumps(cal.to_json())))
    assert back == cal
