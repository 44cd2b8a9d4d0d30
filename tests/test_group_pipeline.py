"""Decent-DP's rounds on groups of their own (runtime_model/prediction/group_pipeline.py): where the link
carries more than one group's rate, a round's exchange starts at its first launch instead of queueing
behind the last round's, and the channels' rate bounds the long run."""

from dataclasses import replace

import numpy as np
import pytest

from runtime_model.prediction.group_pipeline import distinct_groups, last_bucket_optimizer_s, launch_gaps_s
from runtime_model.prediction.iteration import gossip_prediction
from runtime_model.topology.registry import build_schedule
from tests.helpers import scenario


def _gloo_node(gain: float, **kw):
    """Four ranks on one node whose exchange (4 x 50 MB over 2 GB/s) outlasts their compute."""
    sc = scenario(
        n=4, k=4, intra_bw=2e9, intra_lat=1e-5, nbytes=(50_000_000,) * 4, ready=(0.25, 0.5, 0.75, 1.0), **kw
    )
    return replace(sc, network=replace(sc.network, group_concurrency=gain))


@pytest.mark.parametrize(
    "name, n, k, groups",
    [("ring", 2, 2, 1), ("ring", 4, 4, 2), ("one-peer-exp", 4, 4, 2), ("one-peer-exp", 8, 4, 3),
     ("one-peer-exp", 16, 8, 4), ("complete", 8, 4, 1)],
)  # fmt: skip
def test_distinct_groups_count_the_process_groups_decent_dp_registers(name, n, k, groups):
    from rtmodel_validation.plan import run_shape

    assert distinct_groups(build_schedule(name, run_shape(n, k))) == groups


def test_launch_gaps_count_backward_and_the_later_buckets_steps():
    sc = _gloo_node(1.0, bwd=0.04, opt=0.008)
    share_from, gaps = launch_gaps_s(sc.buckets, sc.decent_dp_compute)
    assert share_from == pytest.approx([1.0, 0.75, 0.5, 0.25])
    # bucket 1 launches 3/4 of backward and three buckets' steps (each a quarter of 8 ms) before the last
    assert gaps == pytest.approx([0.75 * 0.04 + 0.006, 0.5 * 0.04 + 0.004, 0.25 * 0.04 + 0.002, 0.0])


def test_one_group_rate_changes_nothing():
    schedule = build_schedule("one-peer-exp", _gloo_node(1.0).shape)
    base = scenario(
        n=4, k=4, intra_bw=2e9, intra_lat=1e-5, nbytes=(50_000_000,) * 4, ready=(0.25, 0.5, 0.75, 1.0)
    )
    assert gossip_prediction(_gloo_node(1.0), schedule).mean_s == gossip_prediction(base, schedule).mean_s


@pytest.mark.parametrize("name", ["complete", "ring"])
def test_a_schedule_on_one_group_keeps_its_queue(name):
    """Two ranks: ring's two rounds and complete's one are the same pair, one process group."""
    from rtmodel_validation.plan import run_shape

    sc = replace(_gloo_node(2.0), shape=run_shape(2, 2))
    schedule = build_schedule(name, sc.shape)
    one = replace(sc, network=replace(sc.network, group_concurrency=1.0))
    assert gossip_prediction(sc, schedule).mean_s == gossip_prediction(one, schedule).mean_s


@pytest.mark.parametrize("name", ["complete", "one-peer-exp"])
def test_one_channel_works_while_the_last_bucket_steps(name):
    """One channel (a gain of 1): without variance the iteration is the larger of compute + step, the
    exchange D itself (the channel never idles: the last bucket's step runs while it moves the next
    round's first buckets), and the pipelined wait + the last bucket's step; not D + that step."""
    sc = _gloo_node(1.0, opt=0.02)
    schedule = build_schedule(name, sc.shape)
    got = gossip_prediction(sc, schedule)
    comp = sc.decent_dp_compute
    d = got.comm_s
    share_from, gaps = launch_gaps_s(sc.buckets, comp)
    step_last = last_bucket_optimizer_s(comp, sc.buckets)
    expected = max(comp.compute_s + comp.optimizer_s, d, float(np.max(d * share_from - gaps)) + step_last)
    assert expected == d  # the exchange outlasts compute here: the channel is the bound
    assert got.mean_s == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("gain", [1.3, 2.0, 4.0])
def test_rounds_on_their_own_groups_wait_only_for_what_the_channel_has_not_done(gain):
    """Without variance the iteration is exactly the larger of: compute + step, the pipelined wait + the
    last bucket's step, and the exchange over min(gain, groups) channels."""
    sc = _gloo_node(gain)
    schedule = build_schedule("one-peer-exp", sc.shape)
    one = gossip_prediction(replace(sc, network=replace(sc.network, group_concurrency=1.0)), schedule)
    got = gossip_prediction(sc, schedule)
    comp = sc.decent_dp_compute
    d = one.comm_s  # each rank's exchange per round (both rounds alike here)
    share_from, gaps = launch_gaps_s(sc.buckets, comp)
    waited = float(np.max(d * share_from - gaps))
    expected = max(
        comp.compute_s + comp.optimizer_s,
        waited + last_bucket_optimizer_s(comp, sc.buckets),
        d / min(gain, 2),
    )
    assert got.mean_s == pytest.approx(expected, rel=1e-9)
    assert got.mean_s < one.mean_s  # the exchange outlasts compute: a second channel must help
    assert got.mean_s >= d / 2 - 1e-12  # never faster than two channels carry the bytes


def _profile_with_two_groups(one_group_s, two_groups_s, unmeasured=None):
    from calibration.profile_view import profile_from_document
    from calibration.synthetic import SyntheticTruth, synthetic_document
    from rtmodel_documents.profile_document import InFlightResult

    doc = synthetic_document(SyntheticTruth(iterations=3, samples_per_size=3, sizes_bytes=(4096, 1 << 20)))
    flight = InFlightResult(
        pattern=doc.communication.patterns[0].pattern,
        buckets_bytes=(4096, 8192),
        one_at_a_time_s=one_group_s,
        in_flight_s=one_group_s,
        two_groups_s=two_groups_s,
    )
    doc = replace(doc, communication=replace(doc.communication, in_flight=(flight,)))
    if unmeasured:
        doc = replace(doc, shape=replace(doc.shape, unmeasured_links=unmeasured))
    return profile_from_document(doc.to_json())


@pytest.mark.parametrize(
    "two_groups_s, gain", [((0.1, 0.125, 0.15), 1.6), ((0.3, 0.4, 0.5), 1.0), (None, 1.0)]
)
def test_calibration_takes_the_measured_gain_of_two_groups_and_keeps_it_in_the_file(two_groups_s, gain):
    """The median one-group time over the median two-group time; a second group that measured slower is
    charged as one (1), and a profile from before it was measured charges one group's rate."""
    from calibration.calibrate_profile import calibrate
    from rtmodel_documents.calibration_document import Calibration

    cal = calibrate(_profile_with_two_groups((0.2, 0.2, 0.2), two_groups_s))
    assert cal.network.group_concurrency == pytest.approx(gain)
    assert ("group_concurrency" in cal.provenance) == (two_groups_s is not None)
    back = Calibration.from_json(cal.to_json())
    assert back.network.group_concurrency == cal.network.group_concurrency


@pytest.mark.slow
def test_the_pipeline_benchmark_times_every_way_on_the_cpu(tmp_path):
    """benchmarks.gloo_gossip_pipeline, as a lent GPU runs it, on two CPU ranks and small buckets: every
    way timed, each sample positive, the document written (no timing compared: the box is shared)."""
    import json

    from benchmarks.gloo_gossip_pipeline import main

    out = tmp_path / "ggp.json"
    argv = ["--ranks", "2", "--device", "cpu", "--buckets", "40000", "80000", "--reps", "2"]
    assert main([*argv, "--iterations", "3", "--warmup", "1", "--host-ms", "2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    ways = doc["worlds"]["2"]
    assert set(ways) == {
        "serial",
        "inflight",
        "inflight2",
        "pipeline",
        "pipeline2",
        "pipeline-h",
        "pipeline2-h",
    }
    assert all(len(w["samples_s"]) >= 2 and min(w["samples_s"]) > 0 for w in ways.values())


@pytest.mark.parametrize("gain, name", [(1.0, "complete"), (1.0, "one-peer-exp"), (2.0, "one-peer-exp")])
def test_the_factor_breakdown_charges_exchanges_as_the_recurrence_does(gain, name):
    """Without variance the recurrence is exact, so the factor breakdown's all-switches-on world (its
    formula for the iteration) must equal it: no slack left to hand to a factor that did not cause it."""
    from runtime_model.prediction.factors import SWITCHES, _iteration_s
    from runtime_model.prediction.group_pipeline import channels
    from runtime_model.prediction.iteration import _worlds, allreduce_prediction

    sc = _gloo_node(gain, opt=0.02)
    schedule = build_schedule(name, sc.shape)
    got = gossip_prediction(sc, schedule)
    per_rank = [np.full(sc.shape.gpus, got.comm_s)]  # every rank alike in every round here
    wait = got.compute_wait_s
    worlds = _worlds(sc, allreduce_prediction(sc), got.mean_s, wait, per_rank, channels(schedule, gain))
    assert _iteration_s(worlds, frozenset(SWITCHES)) == pytest.approx(got.mean_s, rel=1e-9)


@pytest.mark.parametrize("as_measured, gain", [(False, 1.0), (True, 1.6)])
def test_the_gain_stays_with_the_link_it_was_timed_over(as_measured, gain):
    """Ranks sharing a GPU time their pairs through the host: advising a cluster puts a preset in that
    link's place, and the host's gain does not carry over to it; validating on that host keeps both."""
    from calibration.calibrate_profile import calibrate
    from runtime_model.presets import to_model as presets

    profile = _profile_with_two_groups((0.2, 0.2, 0.2), (0.1, 0.125, 0.15), {"intra": "ranks share a GPU"})
    fallback = presets.scenario_from_choice(
        presets.resolve(presets.PresetRequest(4, gpus_per_node=2))
    ).network
    cal = calibrate(profile, fallback_network=fallback, as_measured=as_measured)
    assert cal.network.group_concurrency == pytest.approx(gain)
    assert cal.provenance["group_concurrency"].startswith("1 (not used" if gain == 1.0 else "1.60: measured")
