"""The charge for flows that share a NIC at drifting offsets (runtime_model.prediction.flow_drift), on hand-computed
cases and as properties: between the solo and the lockstep time, monotone in the window."""

import numpy as np
import pytest

from runtime_model.prediction.flow_drift import drift_charge_s
from runtime_model.prediction.round_comm import round_comm
from runtime_model.topology.schedule import Round, Schedule
from tests.helpers import scenario


def charge(solo, shared, window):
    return drift_charge_s(solo, shared, window)


def test_lockstep_window_charges_full_sharing():
    assert charge(0.034, 0.068, 0.0) == 0.068


def test_two_equal_flows_hand_computed():
    # s = 34 ms each, W = 45 ms, |delta| ~ U[0, 45]: d = 68 - |delta| below 34, else 34.
    # exposed beyond W: (23 - |delta|)+ -> 23^2 / (2 x 45) = 5.878 ms; charge = 45 + 5.878
    assert charge(0.034, 0.068, 0.045) == pytest.approx(0.045 + 0.023**2 / (2 * 0.045), rel=1e-4)


def test_nothing_exposed_charges_the_expected_exchange():
    # s = 10 ms, W = 45: d = 20 - |delta| below 10, never above W; E[d] = 10 + (10 - 10^2/20) / 45 x 10
    assert charge(0.010, 0.020, 0.045) == pytest.approx(0.010 + 0.010 * (0.010 - 0.005) / 0.045, rel=1e-4)


def test_no_sharing_is_the_solo_time():
    assert charge(0.034, 0.034, 0.045) == 0.034
    assert charge(0.034, 0.020, 0.045) == 0.034  # a fitted shared time below solo: never less than alone


@pytest.mark.parametrize("solo,shared", [(0.034, 0.068), (0.3, 0.6), (0.01, 0.04), (0.2, 0.25)])
def test_between_solo_and_lockstep_and_falls_as_the_window_grows(solo, shared):
    windows = [0.0, 0.001, 0.01, 0.045, 0.1, 1.0, 10.0, 100.0]
    got = [charge(solo, shared, w) for w in windows]
    assert all(solo - 1e-12 <= g <= shared + 1e-12 for g in got)
    assert all(a >= b - 1e-12 for a, b in zip(got, got[1:], strict=False))
    assert got[-1] == pytest.approx(solo, rel=0.01)  # a window far past the exchange: no overlap left


def test_each_rank_is_charged_its_own_groups_exchange():
    # 2 nodes x 2 ranks; round 1 crosses with 2 flows per NIC, round 0 stays inside the nodes (one flow)
    sc = scenario(
        n=4, k=2, fwd=0.001, bwd=0.002, opt=0.0, nbytes=(1_000_000,), ready=(1.0,), inter_bw=1e8, inter_lat=0
    )
    sch = Schedule("x", (Round.from_groups(4, [[0, 1], [2, 3]]), Round.from_groups(4, [[0, 2], [1, 3]])))
    window = sc.decent_dp_compute.compute_s
    for t in range(2):
        r = round_comm(sch, t, sc.shape, sc.buckets, sc.network, window)
        want = [charge(s, h, window) for s, h in zip(r.solo_s, r.shared_s, strict=True)]
        assert r.charged_s == pytest.approx(want)
    assert r.charged_s == pytest.approx(np.full(4, charge(0.01, 0.02, 0.003)))
