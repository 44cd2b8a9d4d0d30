"""The emulated network's per-flow cap: flow parsing and pacing arithmetic (always), the setting's
one-line refusals (always), and on root machines TCP flows that get min(NIC / k, cap) each."""

import socket
import struct

import pytest

from rtmodel_emulation import EmulatedCluster, EmulationConfigError, available
from rtmodel_emulation.flows import FlowPacer, flow_key, is_pure_ack
from rtmodel_emulation.linkmodel import LinkModel
from tests.helpers import until_within


def _ipv4(src: str, dst: str, proto: int, transport: bytes, payload: int = 0, frag: int = 0) -> bytes:
    total = 20 + len(transport) + payload
    head = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, total, 0, frag, 64, proto, 0, socket.inet_aton(src), socket.inet_aton(dst)
    )
    return head + transport + b"\0" * payload


def _tcp(
    sport: int, dport: int, payload: int = 0, flags: int = 0x10, src="10.0.0.1", dst="10.0.0.2"
) -> bytes:
    header = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 5 << 4, flags, 65535, 0, 0)
    return _ipv4(src, dst, 6, header, payload)


def test_a_flow_is_one_direction_of_one_connection():
    a = flow_key(_tcp(40000, 5201, 100))
    assert a == flow_key(_tcp(40000, 5201, 9000))  # same 5-tuple, any size
    assert a != flow_key(_tcp(40001, 5201, 100))  # another connection between the same nodes
    assert a != flow_key(_tcp(5201, 40000, 100, src="10.0.0.2", dst="10.0.0.1"))  # the reverse direction
    udp = _ipv4("10.0.0.1", "10.0.0.2", 17, struct.pack("!HHHH", 40000, 5201, 8, 0))
    assert flow_key(udp) != a and flow_key(udp)[1] == 17
    later_fragment = _ipv4("10.0.0.1", "10.0.0.2", 17, b"\x01\x02\x03\x04", frag=100)
    assert flow_key(later_fragment)[2] == 0  # no transport header there: ports unknown, not garbage
    assert flow_key(b"\x60" + b"\0" * 39) is None  # IPv6 is not parsed


def test_only_payload_free_acks_count_as_pure_acks():
    assert is_pure_ack(_tcp(1, 2, 0, flags=0x10))
    assert not is_pure_ack(_tcp(1, 2, 1, flags=0x10))  # carries data
    assert not is_pure_ack(_tcp(1, 2, 0, flags=0x11))  # FIN occupies sequence space
    assert not is_pure_ack(_tcp(1, 2, 0, flags=0x02))  # SYN
    assert not is_pure_ack(_ipv4("10.0.0.1", "10.0.0.2", 17, struct.pack("!HHHH", 1, 2, 8, 0)))


def test_a_flow_produces_its_packets_at_its_cap_and_flows_apart():
    pacer = FlowPacer(rate_Bps=1e6)  # no NIC after it: a packet goes when its flow has produced it
    pkt = _tcp(40000, 5201, 960)  # 1000 bytes on the wire
    assert [pacer.eligible_at(pkt, 0.0) for _ in range(3)] == pytest.approx([0.001, 0.002, 0.003])
    other = _tcp(40001, 5201, 960)
    assert pacer.eligible_at(other, 0.0) == pytest.approx(0.001)  # its own serialiser, not behind the first
    assert pacer.eligible_at(_tcp(5201, 40000, 0, src="10.0.0.2", dst="10.0.0.1"), 0.0) == 0.0
    assert pacer.eligible_at(_tcp(40000, 5201, 0), 0.0) == 0.0  # a pure ACK does not wait behind data
    assert pacer.eligible_at(pkt, 0.0) == pytest.approx(0.004)
    assert pacer.eligible_at(pkt, 1.0) == pytest.approx(1.001)  # an idle flow banks no credit: no burst


def test_a_lone_packet_pays_the_cap_once_not_the_cap_plus_the_nic():
    """Cut-through: the NIC (4x faster) finishes the packet just as its flow has produced it."""
    pacer, link = FlowPacer(1e6, nic_Bps=4e6), LinkModel(2, 4e6, 0.0)
    pkt = _tcp(40000, 5201, 960)
    assert link.deliver_at(0, 1, len(pkt), pacer.eligible_at(pkt, 0.0)) == pytest.approx(len(pkt) / 1e6)


def test_capped_flows_through_the_nic_get_the_lower_of_cap_and_nic_share():
    """Each flow serialised at r, then one NIC at B: n packets of each of k flows take n*s/min(r, B/k)."""
    size, n = 1000, 200
    for flows, cap, nic in ((1, 1e6, 4e6), (2, 1e6, 4e6), (4, 2e6, 4e6), (1, 8e6, 4e6)):
        pacer, link = FlowPacer(cap, nic), LinkModel(2, nic, 0.0)
        pkts = [_tcp(40000 + f, 5201, size - 40) for f in range(flows)]
        eligible = sorted((pacer.eligible_at(p, 0.0), f) for _ in range(n) for f, p in enumerate(pkts))
        last = max(link.deliver_at(0, 1, size, t) for t, _ in eligible)  # in eligible order, as the forwarder
        assert last == pytest.approx(n * size / min(cap, nic / flows), rel=0.02)


def test_forgetting_idle_flows_keeps_busy_ones():
    pacer = FlowPacer(1e6)
    pacer.eligible_at(_tcp(1, 2, 960), 0.0)
    pacer.eligible_at(_tcp(3, 4, 960), 5.0)
    pacer.forget_idle(1.0)
    assert list(pacer.done_s) == [flow_key(_tcp(3, 4, 960))]


@pytest.mark.parametrize("flow_mbit", [0, -5, float("nan"), float("inf"), 1e9])
def test_bad_flow_cap_is_one_setting_error(flow_mbit):
    with pytest.raises(EmulationConfigError) as err:
        EmulatedCluster(flow_mbit=flow_mbit)
    assert err.value.name == "flow_mbit" and str(err.value).startswith("flow_mbit must be in [1, 100000]")


def test_no_flow_cap_is_the_default_and_the_forwarder_is_told_none():
    assert EmulatedCluster().flow_mbit is None
    c = EmulatedCluster(inter_bandwidth_mbit=1000, flow_mbit=300)
    assert c.flow_mbit == 300.0 and "at most 300 Mbit/s per flow" in c.describe()


@pytest.mark.parametrize(
    "args",
    [
        ["up", "--flow-mbit", "0"],
        ["up", "--flow-mbit", "nan"],
        ["run", "--flow-mbit", "inf", "--", "-m", "x"],
    ],
)
def test_emulate_refuses_a_bad_flow_cap_in_one_line(args, monkeypatch):
    from typer.testing import CliRunner

    from rtmodel_cli.app import app
    from rtmodel_emulation import netns

    def must_not_run(*a, **kw):
        raise AssertionError("a bad option reached the cluster's set-up")

    monkeypatch.setattr(netns, "run_cmd", must_not_run)
    monkeypatch.setattr(EmulatedCluster, "up", must_not_run)
    res = CliRunner().invoke(app, ["emulate", *args])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --flow-mbit must be in [1, 100000]"), res.stderr


# ---- real namespaces ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def capped_cluster():
    """2 nodes x 1 rank, NIC 400 Mbit/s, each flow at most 150: one flow gets 150, three share the NIC."""
    ok, reason = available()
    if not ok:
        pytest.skip(reason)
    with EmulatedCluster(2, 1, 400.0, 0.5, flow_mbit=150.0) as cluster:
        yield cluster




@pytest.mark.emulated
def test_one_flow_alone_gets_the_cap_not_the_nic(capped_cluster):
    from rtmodel_emulation.probe import measure_throughput

    cap = 150e6 / 8
    tries = until_within(
        lambda: [measure_throughput(capped_cluster, 0, 1, nbytes=3 << 20)["rate_Bps"]],
        lambda r: 0.85 * cap <= r[0] <= 1.1 * cap,
    )
    assert 0.85 * cap <= tries[-1][0] <= 1.1 * cap, [round(r[0] * 8e-6) for r in tries]


@pytest.mark.emulated
@pytest.mark.slow
def test_concurrent_flows_get_the_lower_of_cap_and_nic_share(capped_cluster):
    from rtmodel_emulation.probe import measure_concurrent

    for k, each_Bps in ((2, 150e6 / 8), (4, 100e6 / 8)):  # min(150, 400/2) = 150; min(150, 400/4) = 100

        def within(rates, each_Bps=each_Bps):
            return 0.85 * each_Bps <= sum(rates) / len(rates) <= 1.15 * each_Bps

        tries = until_within(
            lambda k=k, each_Bps=each_Bps: measure_concurrent(
                capped_cluster, [(0, 1)] * k, int(each_Bps * 0.5)
            ),
            within,
        )
        assert within(tries[-1]), (k, [[round(r * 8e-6) for r in rates] for rates in tries])
