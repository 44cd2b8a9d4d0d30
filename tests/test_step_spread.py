"""The step's measured spread (Compute.step_spread): each rank draws its step per iteration. All-Reduce's
slowest rank draws step + compute; in gossip the last bucket's share of the step follows the wait, so a
late step delays the peers' next exchange. Without a spread every prediction is as before."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from calibration import synthetic_profile
from calibration.calibrate_profile import calibrate
from calibration.profile_view import profile_from_document
from calibration.synthetic import SyntheticTruth
from rtmodel_documents.calibration_document import Calibration
from runtime_model.core.distributions import EmpiricalCompute, NormalCompute, plus_deviation
from runtime_model.core.scenario import ClusterShape, Compute
from runtime_model.prediction.group_pipeline import last_bucket_share
from runtime_model.prediction.iteration import (
    allreduce_prediction,
    compute_wait_of_all,
    gossip_prediction,
)
from runtime_model.presets import to_model as presets
from runtime_model.topology.registry import build_schedule
from tests.cli_helpers import advise_json, run

MS = 1e-3


def _scenario(gpus: int, step_spread=None, optimizer_ms: float = 10.0):
    """Exchanges bind: 2 ms of deterministic compute against Transformer-base's gradient at 100 Gbit/s."""
    sc = presets.scenario_from_choice(
        presets.resolve(presets.PresetRequest(gpus, gpus_per_node=1, network="ib-100"))
    )
    comp = Compute(1 * MS, 1 * MS, optimizer_ms * MS, step_spread=step_spread)
    return replace(sc, compute=comp, gossip_compute=None)


def test_two_normals_add_their_variances_and_keep_the_mean():
    d = plus_deviation(NormalCompute(0.05, 0.003), NormalCompute(0.01, 0.004))
    assert (d.mean_s, d.sd_s) == pytest.approx((0.05, 0.005))


def test_empirical_sums_are_every_pair_around_the_first_mean():
    c, s = EmpiricalCompute((0.04, 0.06)), EmpiricalCompute((0.005, 0.015, 0.010))
    d = plus_deviation(c, s)
    assert sorted(d.samples_s) == pytest.approx(
        sorted(a + b - 0.01 for a in (0.04, 0.06) for b in s.samples_s)
    )
    assert d.mean_s == pytest.approx(c.mean_s)
    assert plus_deviation(c, None) is c and plus_deviation(c, EmpiricalCompute((0.01, 0.01))) is c


def test_allreduce_waits_for_the_slowest_step_plus_compute():
    spread = EmpiricalCompute((5 * MS, 15 * MS))
    comp = Compute(
        20 * MS, 30 * MS, 10 * MS, distribution=EmpiricalCompute((40 * MS, 60 * MS)), step_spread=spread
    )
    wait, _, _ = compute_wait_of_all(comp, ClusterShape(4, 1))
    sums = EmpiricalCompute(tuple(a + b - 10 * MS for a in (40 * MS, 60 * MS) for b in (5 * MS, 15 * MS)))
    assert wait == pytest.approx(sums.expected_max(4))
    assert wait > compute_wait_of_all(replace(comp, step_spread=None), ClusterShape(4, 1))[0]


def test_a_pair_waits_for_the_later_step_of_the_two():
    """Two ranks exchanging every iteration, the exchange binding: each iteration the pair's next exchange
    starts after the later of the two steps' last-bucket shares, so the rate rises by share x E[max of two
    deviations] (two points 5 ms apart around the mean: max is +2.5 ms w.p. 3/4, -2.5 ms w.p. 1/4)."""
    spread = EmpiricalCompute((5 * MS, 15 * MS))
    calm, spread_sc = _scenario(2), _scenario(2, spread)
    schedule = build_schedule("ring", calm.shape)
    base = gossip_prediction(calm, schedule)
    assert base.p50_s == pytest.approx(base.p99_s)  # deterministic: the exchange binds every iteration
    share = last_bucket_share(calm.buckets)
    pred = gossip_prediction(spread_sc, schedule)
    assert pred.mean_s - base.mean_s == pytest.approx(share * 2.5 * MS, abs=0.4 * MS)


def test_without_a_spread_nothing_moves():
    for sc in (_scenario(8), _scenario(8, EmpiricalCompute((10 * MS, 10 * MS)))):
        a = allreduce_prediction(sc)
        g = gossip_prediction(sc, build_schedule("one-peer-exp", sc.shape))
        assert (a.mean_s, g.mean_s) == (
            allreduce_prediction(_scenario(8)).mean_s,
            gossip_prediction(_scenario(8), build_schedule("one-peer-exp", sc.shape)).mean_s,
        )


def test_a_spread_never_speeds_a_schedule_up():
    spread = EmpiricalCompute(tuple(np.linspace(2, 30, 15) * MS))
    for name in ("ring", "one-peer-exp", "complete"):
        sc = _scenario(8, spread, optimizer_ms=16.0)
        schedule = build_schedule(name, sc.shape)
        assert (
            gossip_prediction(sc, schedule).mean_s
            >= gossip_prediction(_scenario(8, optimizer_ms=16.0), schedule).mean_s
        )


def test_calibration_keeps_both_steps_spreads_through_its_file():
    doc = synthetic_profile(SyntheticTruth(nodes=2, ranks_per_node=1, iterations=5, samples_per_size=3))
    doc["compute"]["gossip_step_s"] = [[0.05, 0.06], [0.055, 0.07]]
    cal = calibrate(
        profile_from_document(doc), fallback_network=presets.network_preset("roce-100g", "nvlink3")
    )
    bare = sorted(t for rank in doc["compute"]["optimizer_s"] for t in rank)
    assert cal.compute.step_spread.samples_s == pytest.approx(bare)
    assert cal.gossip_compute.step_spread.samples_s == pytest.approx([0.05, 0.055, 0.06, 0.07])
    back = Calibration.from_json(json.loads(json.dumps(cal.to_json())))
    assert back.compute.step_spread == cal.compute.step_spread
    assert back.gossip_compute.step_spread == cal.gossip_compute.step_spread


def test_the_variance_panel_owns_all_iid_variation():
    from rtmodel_plots.variance import with_iid_cv

    sc = replace(
        _scenario(8), gossip_compute=Compute(1 * MS, 1 * MS, 10 * MS, step_spread=NormalCompute(0.01, 0.003))
    )
    calm = with_iid_cv(sc, 0.0)
    assert calm.compute.step_spread is None and calm.gossip_compute.step_spread is None


def test_the_table_and_the_json_name_the_measured_spread():
    args = ("--profile", "tests/data/real_profile_2x1.json", "--gpus", "8", "--gpus-per-node", "2")
    line = next(
        x
        for x in run("advise", *args, env={"COLUMNS": "300"}).stdout.splitlines()
        if x.startswith("compute per worker")
    )
    assert "optimizer sd" in line
    assert advise_json(*args)["inputs"]["compute"]["step_spread"].startswith("Empirical(10 samples")
    assert advise_json("--gpus", "8")["inputs"]["compute"]["step_spread"] is None
