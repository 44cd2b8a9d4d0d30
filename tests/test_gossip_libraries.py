"""SGP and BlueFog beside Decent-DP (runtime_model/topology/exchange.py): each library's semantics, what runs
them, and the published runs they are checked against (rtmodel_literature/published_runs.py)."""

from dataclasses import replace

import numpy as np
import pytest

from rtmodel_literature.published_runs import bluefog_efficiency, sgp_rows
from runtime_model.advice.advisor import advise
from runtime_model.advice.columns import runs_on_text
from runtime_model.advice.report import advice_to_dict
from runtime_model.core.scenario import ClusterShape
from runtime_model.prediction.round_comm import static_graph_comm_s
from runtime_model.presets import to_model as presets
from runtime_model.topology.registry import build_schedule

LIBRARY_ROWS = ("static-exp", "bluefog-dynamic-exp", "sgp-exp", "osgp-exp")


def _scenario(gpus=64, k=8, **kw):
    kw.setdefault("network", "tcp-25g")
    kw.setdefault("compute_cv", 0.0)
    return presets.scenario_from_choice(
        presets.resolve(presets.PresetRequest(gpus, gpus_per_node=k, gpu="V100", **kw))
    )


def _rows(adv):
    return {r.topology: r for r in adv.rows}


def test_plain_sgp_hides_nothing_and_overlap_sgp_hides_behind_compute():
    """Plain SGP exchanges between the step and the next forward: without variance its iteration is
    compute + optimizer + its mean exchange; with --overlap it is never slower, and never faster than
    the compute alone."""
    sc = _scenario()
    rows = _rows(advise(sc, topologies=["sgp-exp", "osgp-exp"]))
    comp = sc.decent_dp_compute
    sgp, osgp = rows["sgp-exp"].prediction, rows["osgp-exp"].prediction
    assert sgp.mean_s == pytest.approx(comp.compute_s + comp.optimizer_s + sgp.comm_s, rel=0.02)
    assert comp.compute_s + comp.optimizer_s <= osgp.mean_s * (1 + 1e-9) <= sgp.mean_s * (1 + 1e-9)


def test_whole_message_libraries_send_every_parameter_in_one_message():
    sc = _scenario()
    rows = _rows(advise(sc, topologies=["one-peer-exp", "osgp-exp"]))
    # the same graph and bytes: only the bucket cut and the optimizer step after the wait differ
    assert rows["osgp-exp"].prediction.comm_s <= rows["one-peer-exp"].prediction.comm_s * 1.01
    assert rows["osgp-exp"].prediction.comm_s > 0.5 * rows["one-peer-exp"].prediction.comm_s


def test_a_static_graph_costs_its_busier_links_bytes_served_at_once():
    """BlueFog sends to all peers at once: 16 nodes x 8, offsets 1..64: the NIC carries the message once
    per rank whose peer is on another node (1 + 2 + 4 + 4 x 8 = 39), the NVLink side at most 3 peers."""
    sc = _scenario(128)
    net, nbytes = sc.network, 1e8
    offsets = build_schedule("static-exp", sc.shape).static_graph.peer_offsets
    inter = net.inter.latency_s + 39 * nbytes / net.inter.bandwidth_Bps
    assert static_graph_comm_s(offsets, sc.shape, nbytes, net) == pytest.approx(inter)
    fast_nic = replace(net, inter=replace(net.inter, bandwidth_Bps=1e15))
    intra = net.intra.latency_s + 3 * nbytes / net.intra.bandwidth_Bps
    assert static_graph_comm_s(offsets, sc.shape, nbytes, fast_nic) == pytest.approx(intra)


def test_bluefog_dynamic_graph_sends_one_flow_per_nic_and_pairs_every_rank_at_most_once():
    shape = ClusterShape(128, 8)
    schedule = build_schedule("bluefog-dynamic-exp", shape)
    for r in schedule.rounds:
        shapes = r.group_shapes(shape)
        assert all(g.size <= 2 for g in shapes)
        assert all(g.nic_sharing == 1 for g in shapes if g.nodes > 1)
        crossing = [g for g in shapes if g.nodes > 1]
        assert sum(shapes[g] for g in crossing) == shape.nodes // 2  # one pair of nodes per node pair


def test_other_libraries_rows_say_what_runs_them_and_are_never_picked():
    """Even where BlueFog's graph is fastest, the advisor picks what Decent-DP runs (its code line runs
    Decent-DP); the rows show the library in "runs on"."""
    sc = _scenario(128, network="tcp-10g")
    adv = advise(sc)
    rows = _rows(adv)
    assert adv.recommendation.topology not in LIBRARY_ROWS
    entries = {e["topology"]: e for e in advice_to_dict(adv)["predictions"]}
    assert runs_on_text(entries["static-exp"]) == "BlueFog"
    assert runs_on_text(entries["bluefog-dynamic-exp"]) == "BlueFog"
    assert runs_on_text(entries["sgp-exp"]) == "SGP"
    assert runs_on_text(entries["osgp-exp"]) == "SGP --overlap"
    assert all(not rows[name].runnable for name in LIBRARY_ROWS)


def test_sgp_rows_need_a_power_of_two_and_bluefog_three_ranks_per_node():
    adv = advise(_scenario(24, 8), topologies=["sgp-exp", "bluefog-dynamic-exp"])
    reasons = {r.topology: r.reason for r in adv.rows if not r.applicable}
    assert "power of 2" in reasons["sgp-exp"]
    assert "power-of-2 number of nodes" in reasons["bluefog-dynamic-exp"]
    adv = advise(_scenario(16, 2), topologies=["bluefog-dynamic-exp"])
    assert "at least 3 GPUs per node" in adv.rows[0].reason


def test_bluefog_page_efficiencies_stay_within_ten_points():
    """BlueFog's published 128-V100 Ethernet runs (a check the presets were not built from; guards
    against regressions, not a tuned match): Horovod ~66 %, neighbor_allreduce > 95 %."""
    for check in bluefog_efficiency():
        assert abs(check.error_points) <= 10, check


def test_every_published_sgp_row_is_compared():
    rows = sgp_rows()
    assert len(rows) == 2 * 6
    assert all(np.isfinite(r["predicted_ms"]) for r in rows)
