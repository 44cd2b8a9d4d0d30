"""Bytes on the wire: the model's busiest-NIC bytes per iteration (runtime_model.prediction.link_bytes) held to what
the emulated nodes' kernels counted for DDP and every Decent-DP topology (benchmarks.wire_bytes).

The committed measurements are re-scored against the model as it is now (no root, no torch), so a change
to the byte model that departs from the wire fails here; on a root machine one cluster is measured live."""

from __future__ import annotations

import json

import pytest

from benchmarks import wire_bytes
from rtmodel_emulation.wire_counters import (
    CounterError,
    WireCounters,
    parse_net_dev,
    parse_retransmitted_segments,
)

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  123456     100    0    0    0     0          0         0   123456     100    0    0    0     0       0          0
  tun0: 9000000    1500    0    0    0     0          0         0  7000000    1200    0    0    0     0       0          0
"""

SNMP = """Ip: Forwarding DefaultTTL
Ip: 2 64
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 10 10 0 0 8 5000 6000 7 0 1 0
"""


def test_net_dev_gives_the_named_interfaces_tx_and_rx_not_loopbacks():
    assert parse_net_dev(NET_DEV, "tun0") == (7_000_000, 9_000_000, 1200, 1500)


def test_a_missing_interface_or_counter_is_one_error():
    with pytest.raises(CounterError, match="eth9"):
        parse_net_dev(NET_DEV, "eth9")
    with pytest.raises(CounterError, match="RetransSegs"):
        parse_retransmitted_segments("Ip: Forwarding\nIp: 2\n")


def test_retransmitted_segments_are_read_by_column_name():
    assert parse_retransmitted_segments(SNMP) == 7


def test_counters_between_two_readings_are_differences():
    early, late = WireCounters(10, 20, 1, 2, 0), WireCounters(110, 220, 11, 22, 3)
    assert late.since(early) == WireCounters(100, 200, 10, 20, 3)


def test_the_committed_measurements_cover_ddp_and_every_decent_dp_topology_on_each_cluster():
    document = json.loads(wire_bytes.RESULTS_JSON.read_text())
    assert {"date", "host", "torch", "decent_dp"} <= set(document["meta"])
    for cluster in document["clusters"]:
        measured = {run["run"] for run in cluster["runs"]}
        expected = {"allreduce", *wire_bytes.decent_dp_runs(cluster["world_size"], cluster["gpus_per_node"])}
        assert measured == expected, cluster["nodes"]


def test_the_models_nic_bytes_match_the_wire_within_two_percent():
    rows = wire_bytes.scored_rows(json.loads(wire_bytes.RESULTS_JSON.read_text()))
    assert len(rows) >= 20
    off = {
        (r["cluster"], r["run"]): round(r["model_over_measured"], 4)
        for r in rows
        if abs(r["model_over_measured"] - 1) > wire_bytes.TOLERANCE
    }
    assert not off


@pytest.mark.parametrize("text", ["2", "2x", "axb", "1x4", "2x0"])
def test_a_bad_cluster_name_is_one_line(text):
    with pytest.raises(SystemExit, match="error: cluster"):
        wire_bytes.parse_cluster(text)


@pytest.mark.cluster
@pytest.mark.emulated
@pytest.mark.slow
def test_live_bytes_of_ddp_and_two_topologies_match_the_model():
    from rtmodel_emulation import available

    ok, reason = available()
    if not ok:
        pytest.skip(reason)
    pytest.importorskip("decent_dp")
    doc = {
        "meta": wire_bytes.host_meta(),
        "clusters": [wire_bytes.measure_cluster(2, 2, ["allreduce", "one-peer-exp", "alternating-exp-ring"])],
    }
    for row in wire_bytes.scored_rows(doc):
        assert row["model_over_measured"] == pytest.approx(1.0, abs=wire_bytes.TOLERANCE), row["run"]
