"""The per-iteration model on hand-computed cases, plus invariants (hypothesis)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_model.core.scenario import Bucket, ClusterShape, Compute
from runtime_model.prediction.iteration import allreduce_prediction, ddp_exposed_tail_s, gossip_prediction
from runtime_model.topology.schedule import Round, Schedule
from tests.helpers import scenario


def pair_schedule(n, stride):
    groups = [[j, j ^ stride] for j in range(n) if j < (j ^ stride)]
    return Schedule("pairs", (Round.from_groups(n, groups),))


def test_ddp_tail_recurrence_hand_computed():
    c = Compute(0.0, 1.0, 0.0)
    ddp = (Bucket(1, 0.5), Bucket(1, 1.0))
    # e1 = 0.5 + 0.3 = 0.8; e2 = max(0.8, 1.0) + 0.4 = 1.4 -> tail 0.4
    assert ddp_exposed_tail_s(c, ddp, [0.3, 0.4]) == pytest.approx(0.4)
    # e1 = 1.3 -> e2 = 1.4: a slow early bucket delays the last one
    assert ddp_exposed_tail_s(c, ddp, [0.8, 0.1]) == pytest.approx(0.4)
    assert ddp_exposed_tail_s(c, ddp, [0.1, 0.0]) == 0.0


def test_allreduce_deterministic_hand_computed():
    sc = scenario(n=4, k=2, fwd=0.01, bwd=0.02, opt=0.002, nbytes=(1_000_000, 1_000_000), inter_bw=1e9, inter_lat=1e-4)
    # AR over 4 ranks on 2 nodes: 6 * 1e-4 + 1.5 * 1e6 / 1e9 = 2.1 ms per bucket
    # bucket 1 ready at 10 ms -> ends 12.1; bucket 2 ready at 20 ms -> ends 22.1; tail = 2.1 ms
    p = allreduce_prediction(sc)
    assert p.exposed_comm_s == pytest.approx(2.1e-3)
    assert p.mean_s == pytest.approx(0.03 + 2.1e-3 + 0.002)
    assert p.p50_s == pytest.approx(p.mean_s) and p.p99_s == pytest.approx(p.mean_s)


def test_gossip_deterministic_is_mean_of_round_maxima():
    sc = scenario(n=4, k=2, fwd=0.001, bwd=0.002, opt=0.0, nbytes=(1_000_000,), ready=(1.0,), inter_bw=1e8, inter_lat=0)
    intra = Schedule("x", (Round.from_groups(4, [[0, 1], [2, 3]]), Round.from_groups(4, [[0, 2], [1, 3]])))
    p = gossip_prediction(sc, intra)
    # round 0 intra (fast): 3 ms compute; round 1 crosses with 2 flows per NIC: 10 ms alone, 20 ms in
    # lockstep; offsets drift over the 3 ms window (flow_drift): d = 20 - x, x ~ U[0, 3] ms, so
    # E[d] = 18.5 > W and the charge is W + E[(d - W)+] = 3 + 15.5 ms
    comm1 = 0.003 + (0.020 - 0.0015 - 0.003)
    assert p.per_round_comm_s[1] == pytest.approx(comm1, rel=1e-4)
    assert p.mean_s == pytest.approx((0.003 + comm1) / 2, rel=1e-4)


def test_factors_sum_to_the_gap():
    sc = scenario(n=8, k=2, sd=0.003)
    p = gossip_prediction(sc, pair_schedule(8, 4))
    ar = allreduce_prediction(sc)
    assert p.factors.total_s == pytest.approx(ar.mean_s - p.mean_s, abs=1e-12)


def test_variance_factor_positive_with_jitter_and_zero_without():
    jitter = scenario(n=8, k=2, sd=0.004, inter_bw=1e11, intra_bw=1e11)
    assert gossip_prediction(jitter, pair_schedule(8, 1)).factors.variance_s > 0
    calm = scenario(n=8, k=2, sd=0.0)
    assert gossip_prediction(calm, pair_schedule(8, 1)).factors.variance_s == pytest.approx(0.0)


def test_gossip_slack_bounded_by_group_max():
    """The one-iteration slack makes gossip no slower than E[max over its group] (reference model)."""
    sc = scenario(n=16, k=2, sd=0.004, inter_bw=1e12, intra_bw=1e12, inter_lat=0, intra_lat=0)
    p = gossip_prediction(sc, pair_schedule(16, 1))
    comp = sc.compute
    assert p.mean_s <= comp.distribution.expected_max(2) + comp.optimizer_s + 1e-4
    assert p.mean_s >= comp.compute_s + comp.optimizer_s - 1e-4


settings_fast = settings(max_examples=25, deadline=None)


@settings_fast
@given(
    bw=st.floats(1e7, 1e11), factor=st.floats(1.0, 100.0), sd=st.floats(0.0, 0.005),
    stride=st.sampled_from([1, 2, 4]),
)
def test_more_bandwidth_never_slower(bw, factor, sd, stride):
    slow = scenario(n=8, k=2, inter_bw=bw, intra_bw=bw * 10, sd=sd)
    fast = scenario(n=8, k=2, inter_bw=bw * factor, intra_bw=bw * 10 * factor, sd=sd)
    assert allreduce_prediction(fast).mean_s <= allreduce_prediction(slow).mean_s + 1e-12
    sch = pair_schedule(8, stride)
    assert gossip_prediction(fast, sch).mean_s <= gossip_prediction(slow, sch).mean_s + 1e-12


@settings_fast
@given(lat=st.floats(0, 1e-3), shrink=st.floats(0.0, 1.0), sd=st.floats(0.0, 0.005))
def test_less_latency_never_slower(lat, shrink, sd):
    hi = scenario(n=8, k=2, inter_lat=lat, intra_lat=lat / 10, sd=sd)
    lo = scenario(n=8, k=2, inter_lat=lat * shrink, intra_lat=lat * shrink / 10, sd=sd)
    assert allreduce_prediction(lo).mean_s <= allreduce_prediction(hi).mean_s + 1e-12
    sch = pair_schedule(8, 4)
    assert gossip_prediction(lo, sch).mean_s <= gossip_prediction(hi, sch).mean_s + 1e-12


@settings_fast
@given(sd=st.floats(0.0, 0.005), more=st.floats(0.0, 0.005), n=st.sampled_from([2, 8, 64, 1024]))
def test_more_variance_never_helps_allreduce(sd, more, n):
    a = scenario(n=n, k=2, sd=sd)
    b = scenario(n=n, k=2, sd=sd + more)
    assert allreduce_prediction(b).mean_s >= allreduce_prediction(a).mean_s - 1e-12


@settings_fast
@given(sd=st.floats(0.0, 0.005), bw=st.floats(1e7, 1e11), stride=st.sampled_from([1, 2, 4]))
def test_breakdown_always_sums(sd, bw, stride):
    sc = scenario(n=8, k=2, sd=sd, inter_bw=bw)
    p = gossip_prediction(sc, pair_schedule(8, stride))
    assert p.factors.total_s == pytest.approx(allreduce_prediction(sc).mean_s - p.mean_s, abs=1e-9)


def test_predictions_are_deterministic():
    sc = scenario(n=8, k=2, sd=0.003)
    a = gossip_prediction(sc, pair_schedule(8, 2)).mean_s
    b = gossip_prediction(sc, pair_schedule(8, 2)).mean_s
    assert a == b


def test_shape_mismatch_rejected():
    sc = scenario(n=8, k=2)
    with pytest.raises(ValueError):
        gossip_prediction(sc, pair_schedule(4, 1))


def test_quantiles_ordered():
    sc = scenario(n=64, k=8, sd=0.003)
    ar = allreduce_prediction(sc)
    assert ar.p50_s <= ar.p99_s
    g = gossip_prediction(sc, pair_schedule(64, 8))
    assert g.p50_s <= g.p99_s
    assert np.isfinite(g.mean_s)


def test_cluster_shape_errors():
    from runtime_model.core.errors import UserError

    with pytest.raises(UserError, match="gpus_per_node 4 does not divide gpus 10"):
        ClusterShape(10, 4)
    with pytest.raises(UserError, match="gpus must be an integer >= 1, got 0"):
        ClusterShape(0, 1)


def test_last_bucket_optimizer_step_runs_after_the_gossip_wait():
    """One bucket: the exchange hides behind forward + backward only; the optimizer step follows the wait."""
    sc = scenario(n=2, k=1, fwd=0.01, bwd=0.02, opt=0.005, nbytes=(1_000_000,), ready=(1.0,),
                  inter_bw=1e7, inter_lat=0)
    sch = Schedule("x", (Round.from_groups(2, [[0, 1]]),))
    p = gossip_prediction(sc, sch)
    comm = 1e6 / 1e7  # one flow per NIC
    assert p.mean_s == pytest.approx(comm + 0.005)


def test_flows_that_drift_apart_are_held_to_the_nics_byte_bound():
    """Two flows per NIC every iteration, 100 ms each alone, over a 30 ms window: drifting offsets
    charge each exchange 185 ms, but the NIC must carry 2 x 100 ms of bytes per iteration."""
    sc = scenario(n=4, k=2, fwd=0.01, bwd=0.02, opt=0.005, nbytes=(1_000_000,), ready=(1.0,),
                  inter_bw=1e7, inter_lat=0)
    sch = Schedule("x", (Round.from_groups(4, [[0, 2], [1, 3]]),))
    p = gossip_prediction(sc, sch)
    assert p.per_round_comm_s[0] == pytest.approx(0.185, rel=1e-4)  # 30 + E[(200 - x - 30)+], x ~ U[0, 30]
    assert p.mean_s == pytest.approx(2 * 1e6 / 1e7)
