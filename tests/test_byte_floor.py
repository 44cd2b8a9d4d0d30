"""The paper's rows against their cited network's NIC byte bound (rtmodel_literature/byte_floor.py): the
row the cited network cannot carry is named, and the bound is the bytes at line rate."""

import pytest

from rtmodel_literature.byte_floor import ByteFloor, paper_floors
from rtmodel_literature.paper import published


def test_the_floor_is_the_busiest_nics_bytes_at_line_rate():
    row = ByteFloor("c", 16, "one-peer-exp", published_ms=80.0, nic_bytes=1.25e9, line_rate_Gbps=100.0)
    assert row.floor_ms == pytest.approx(100.0)
    assert row.below
    assert row.implied_Gbps == pytest.approx(125.0)


def test_every_published_row_gets_a_floor_on_its_clusters_cited_network():
    floors = paper_floors()
    assert len(floors) == 3 * len(published())
    assert all(f.line_rate_Gbps == 100.0 for f in floors)  # both clusters: one 100 Gbit/s InfiniBand NIC
    assert all(f.nic_bytes > 0 and f.floor_ms > 0 for f in floors)


def test_one_peer_exp_at_32_a100s_moves_more_than_one_100_gbit_nic_can():
    """docs/paper.md: 3 of its 5 rounds leave every rank of a node through the NIC, 606 MB per iteration
    on average, >= 48.5 ms at 100 Gbit/s against the published 44.7 ms."""
    below = [f for f in paper_floors() if f.below]
    assert [(f.cluster, f.gpus, f.method) for f in below] == [("a100-ib100", 32, "one-peer-exp")]
    row = below[0]
    assert row.nic_bytes == pytest.approx(0.6 * 4 * 252_584_064, rel=1e-9)  # 3 of 5 rounds x 4 ranks x S
    assert row.implied_Gbps > row.line_rate_Gbps
