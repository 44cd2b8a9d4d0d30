"""The emulated cluster: link model arithmetic (always), and on root machines a real 2-node x 2-rank run
whose delay, bandwidth, teardown and gloo all_reduce are checked against the configuration."""

import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time

import pytest

from rtmodel_emulation import EmulatedCluster, EmulationConfigError, LaunchError, available, cleanup_stale
from rtmodel_emulation.linkmodel import LinkModel
from rtmodel_emulation.netns import list_namespaces, owner_pid, run_cmd
from tests.helpers import until_within

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- pure parts: no root needed ------------------------------------------------------------------------
def test_link_model_single_flow_pays_serialisation_once_plus_delay():
    m = LinkModel(2, rate_Bps=1e6, delay_s=0.01)
    t = [m.deliver_at(0, 1, 1000, now=0.0) for _ in range(3)]
    assert t == pytest.approx([0.011, 0.012, 0.013])  # back-to-back at the line rate, not store-and-forward


def test_link_model_shares_a_nic_between_flows_and_limits_incast():
    m = LinkModel(3, rate_Bps=1e6, delay_s=0.0)
    assert m.deliver_at(0, 1, 1000, 0.0) == pytest.approx(0.001)
    assert m.deliver_at(0, 2, 1000, 0.0) == pytest.approx(0.002)  # same sender NIC: queued behind
    m = LinkModel(3, rate_Bps=1e6, delay_s=0.0)
    assert m.deliver_at(0, 2, 1000, 0.0) == pytest.approx(0.001)
    assert m.deliver_at(1, 2, 1000, 0.0) == pytest.approx(0.002)  # two senders, one receiver NIC


def test_link_model_without_rate_only_delays():
    m = LinkModel(2, rate_Bps=None, delay_s=0.005)
    assert m.deliver_at(0, 1, 10**6, 1.0) == pytest.approx(1.005)


@pytest.mark.parametrize("kwargs", [dict(nodes=0), dict(inter_bandwidth_mbit=0), dict(inter_delay_ms=-1),
                                    dict(shaping="netem"), dict(mtu=100)])
def test_bad_settings_are_value_errors(kwargs):
    with pytest.raises(EmulationConfigError):
        EmulatedCluster(**kwargs)
    assert issubclass(EmulationConfigError, ValueError)


@pytest.mark.parametrize("kwargs, name", [
    (dict(inter_bandwidth_mbit=float("inf")), "inter_bandwidth_mbit"),
    (dict(inter_bandwidth_mbit=float("nan")), "inter_bandwidth_mbit"),
    (dict(inter_bandwidth_mbit=-1), "inter_bandwidth_mbit"),
    (dict(inter_bandwidth_mbit=1e9), "inter_bandwidth_mbit"),  # past what tc tbf's u32 queue limit holds
    (dict(inter_delay_ms=float("inf")), "inter_delay_ms"),
    (dict(inter_delay_ms=float("nan")), "inter_delay_ms"),
    (dict(nodes=65), "nodes"),
    (dict(nodes=2.5), "nodes"),
    (dict(ranks_per_node=0), "ranks_per_node"),
    (dict(mtu=70000), "mtu"),
])
def test_bad_settings_name_the_setting_and_its_range(kwargs, name):
    with pytest.raises(EmulationConfigError) as err:
        EmulatedCluster(**kwargs)
    assert err.value.name == name and str(err.value).startswith(f"{name} must be ")


@pytest.mark.parametrize("timeout_s", [0, -1, float("inf"), float("nan")])
def test_launch_timeout_must_be_positive_and_finite(timeout_s):
    with pytest.raises(EmulationConfigError, match="timeout_s must be a finite number > 0"):
        EmulatedCluster().launch([["true"]], timeout_s)


@pytest.mark.parametrize("args, flag", [
    (["up", "--bandwidth-mbit", "inf"], "--bandwidth-mbit must be in [1, 100000]"),
    (["up", "--bandwidth-mbit", "nan"], "--bandwidth-mbit must be in [1, 100000]"),
    (["up", "--bandwidth-mbit", "0"], "--bandwidth-mbit"),
    (["up", "--bandwidth-mbit", "400001"], "--bandwidth-mbit"),
    (["up", "--delay-ms", "-1"], "--delay-ms must be in [0, 10000]"),
    (["up", "--delay-ms", "inf"], "--delay-ms"),
    (["up", "--nodes", "0"], "--nodes must be an integer in [1, 64]"),
    (["up", "--ranks-per-node", "0"], "--ranks-per-node must be an integer in [1, 64]"),
    (["up", "--mtu", "100"], "--mtu must be an integer in [1280, 65535]"),
    (["up", "--shaping", "netem"], "--shaping must be one of tbf+forwarder, forwarder, tbf"),
    (["run", "--timeout-s", "0", "--", "-m", "x"], "--timeout-s must be a finite number > 0"),
    (["run", "--timeout-s", "inf", "--", "-m", "x"], "--timeout-s"),
    (["run", "--timeout-s", "nan", "--", "-m", "x"], "--timeout-s"),
    (["run", "--master-port", "0", "--", "-m", "x"], "--master-port must be an integer in [1, 65535]"),
    (["run", "--bandwidth-mbit", "inf", "--", "-m", "x"], "--bandwidth-mbit"),
])
def test_emulate_refuses_bad_options_before_creating_anything(args, flag, monkeypatch):
    """One line naming the flag, exit 2, and no namespace, tc call or forwarder: no root needed."""
    from typer.testing import CliRunner

    from rtmodel_cli.app import app
    from rtmodel_emulation import netns

    def must_not_run(*a, **kw):
        raise AssertionError("a bad option reached the cluster's set-up")

    monkeypatch.setattr(netns, "run_cmd", must_not_run)
    monkeypatch.setattr(netns, "available", must_not_run)
    monkeypatch.setattr(EmulatedCluster, "up", must_not_run)
    res = CliRunner().invoke(app, ["emulate", *args])
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0], res.stderr


def test_torchrun_commands_use_a_static_rendezvous_on_node0():
    c = EmulatedCluster(nodes=3, ranks_per_node=2, inter_bandwidth_mbit=100, inter_delay_ms=1)
    cmds = c.torchrun_commands(["-m", "pkg.mod", "--x", "1"], master_port=29555)
    assert len(cmds) == 3
    for node, cmd in enumerate(cmds):
        assert cmd[:4] == ["ip", "netns", "exec", c.namespaces[node]]
        assert f"--node_rank={node}" in cmd and "--nnodes=3" in cmd and "--nproc-per-node=2" in cmd
        assert f"--master_addr={c.node_ip(0)}" in cmd and "--master_port=29555" in cmd
        assert "GLOO_SOCKET_IFNAME=tun0" in cmd and f"RTMODEL_NODE_NAME=node{node}" in cmd
        assert cmd[-4:] == ["-m", "pkg.mod", "--x", "1"]
    assert len({c.node_ip(i) for i in range(3)}) == 3
    assert owner_pid(c.namespaces[0]) == os.getpid() and owner_pid("some-other-ns") is None


def test_importing_emulation_does_not_import_torch():
    code = "import sys, rtmodel_emulation, rtmodel_emulation.measure, rtmodel_cli.commands.emulate; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ---- real namespaces ----------------------------------------------------------------------------------
emulated = pytest.mark.emulated


@pytest.fixture
def needs_root():
    """Skip (with the reason) where this machine cannot emulate; checked lazily, not at collection."""
    ok, reason = available()
    if not ok:
        pytest.skip(reason)


@emulated
def test_namespaces_exist_and_have_the_node_addresses(emulated_cluster):
    c = emulated_cluster
    assert set(c.namespaces) <= set(list_namespaces())
    for i, ns in enumerate(c.namespaces):
        addrs = run_cmd(["ip", "-n", ns, "-4", "-o", "addr", "show", "dev", c.iface]).stdout
        assert f"{c.node_ip(i)}/24" in addrs
        assert "default" not in run_cmd(["ip", "-n", ns, "route"]).stdout  # nothing routes out


@emulated
def test_nodes_run_loss_based_tcp_not_the_hosts_default(emulated_cluster):
    from rtmodel_emulation.cluster import TCP_CONGESTION

    for ns in emulated_cluster.namespaces:
        cc = run_cmd(["ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.tcp_congestion_control"]).stdout
        assert cc.strip() == TCP_CONGESTION == "reno"




@emulated
def test_ping_rtt_is_twice_the_one_way_delay(emulated_cluster):
    from rtmodel_emulation.probe import measure_rtt

    c = emulated_cluster
    expected = 2 * c.inter_delay_ms / 1e3
    rtts = until_within(lambda: statistics.median(measure_rtt(c, 0, 1, count=10)),
                         lambda rtt: expected * 0.98 <= rtt <= expected + 1.0e-3)
    assert expected * 0.98 <= rtts[-1] <= expected + 1.0e-3, f"RTTs {[round(r * 1e3, 2) for r in rtts]} ms vs {expected * 1e3:.2f} ms"


@emulated
def test_tcp_throughput_matches_the_configured_rate(emulated_cluster):
    from rtmodel_emulation.probe import measure_throughput

    c = emulated_cluster
    res = measure_throughput(c, 0, 1, nbytes=5 << 20)
    configured = c.inter_bandwidth_mbit * 1e6 / 8
    assert 0.85 * configured <= res["rate_Bps"] <= 1.15 * configured, f"{res['rate_Bps'] * 8 / 1e6:.1f} Mbit/s"


@emulated
def test_two_flows_out_of_one_node_share_its_nic(emulated_cluster):
    from rtmodel_emulation.probe import measure_concurrent

    c = emulated_cluster
    configured = c.inter_bandwidth_mbit * 1e6 / 8

    def shared(rates):
        return all(0.8 * configured / 2 <= r <= 1.2 * configured / 2 for r in rates)

    tries = until_within(lambda: measure_concurrent(c, [(0, 1), (0, 1)], nbytes=2 << 20), shared)
    assert shared(tries[-1]), [[round(r * 8e-6, 1) for r in rates] for rates in tries]


@pytest.mark.slow
@emulated
def test_gloo_all_reduce_over_four_ranks_completes_and_feels_the_delay(emulated_cluster):
    pytest.importorskip("torch")
    c = emulated_cluster
    res = c.launch_torchrun(["-m", "rtmodel_emulation.allreduce_bench", "--sizes", "4096,262144", "--repeats", "2",
                             "--target-repeat-s", "0.1", "--timeout-s", "60"], timeout_s=120)
    assert res.returncodes == [0, 0]
    line = next(ln for ln in res.stdout[0].splitlines() if ln.startswith("RESULT "))
    doc = json.loads(line[len("RESULT "):])
    assert doc["world_size"] == 4 and all(r["correct"] for r in doc["results"])
    small = doc["results"][0]["median_s"]
    ring_latency = 2 * (4 - 1) * 2 * c.inter_delay_ms / 1e3  # every ring step waits one inter-node RTT
    assert 0.9 * ring_latency <= small <= 3 * ring_latency + 0.02


@emulated
def test_launch_failure_kills_all_nodes_and_reports_stderr(emulated_cluster):
    c = emulated_cluster
    cmds = [c.exec_prefix(0) + ["sleep", "30"],
            c.exec_prefix(1) + ["sh", "-c", "echo boom-from-node1 >&2; exit 3"]]
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match="node1 exited with code 3") as info:
        c.launch(cmds, timeout_s=20)
    assert "boom-from-node1" in str(info.value)
    assert time.monotonic() - t0 < 10  # node0's sleep was killed, not waited for


@emulated
def test_teardown_on_exception_and_on_normal_exit(needs_root):
    with pytest.raises(RuntimeError, match="inside"):
        with EmulatedCluster(2, 1, 100, 0.5) as c:
            names, fwd = list(c.namespaces), c._forwarder.pid
            assert set(names) <= set(list_namespaces())
            raise RuntimeError("inside the with-block")
    assert not set(names) & set(list_namespaces())
    assert not os.path.exists(f"/proc/{fwd}") or "zombie" in open(f"/proc/{fwd}/status").read().lower()
    with EmulatedCluster(1, 1, 100, 0.5) as c:
        names = list(c.namespaces)
    assert not set(names) & set(list_namespaces())


@emulated
def test_sigterm_tears_down_and_cleanup_stale_removes_leftovers_of_dead_runs(needs_root):
    script = textwrap.dedent("""
        import time
        from rtmodel_emulation import EmulatedCluster
        with EmulatedCluster(2, 1, 100, 0.5) as c:
            print(" ".join(c.namespaces), flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    names = proc.stdout.readline().split()
    assert len(names) == 2 and set(names) <= set(list_namespaces())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) != 0
    assert not set(names) & set(list_namespaces())

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale, alive = f"rtmemu-{dead}-test-n0", f"rtmemu-{os.getpid()}-test-n0"
    try:
        run_cmd(["ip", "netns", "add", stale])
        run_cmd(["ip", "netns", "add", alive])
        removed = cleanup_stale()
        assert stale in removed and alive not in removed
        assert alive in list_namespaces() and stale not in list_namespaces()
    finally:
        for ns in (stale, alive):
            run_cmd(["ip", "netns", "del", ns], check=False)


@emulated
def test_sigkill_of_the_owner_ends_its_node_commands_and_namespaces(needs_root):
    """No teardown runs after a SIGKILL: the guardian (rtmodel_emulation/guardian.py) does it instead."""
    script = textwrap.dedent("""
        import subprocess, time
        from rtmodel_emulation import EmulatedCluster
        with EmulatedCluster(2, 1, 100, 0.5) as c:
            procs = [c.run_on_node(n, ["sleep", "300"]) for n in range(2)]
            print(" ".join(c.namespaces), *[p.pid for p in procs], flush=True)
            time.sleep(300)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    first = proc.stdout.readline().split()
    names, pids = first[:2], [int(p) for p in first[2:]]
    assert len(pids) == 2 and set(names) <= set(list_namespaces())
    proc.kill()
    proc.wait(timeout=20)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (set(names) & set(list_namespaces()) or any(_alive(p) for p in pids)):
        time.sleep(0.2)
    assert not set(names) & set(list_namespaces())
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    """A process that still runs (a zombie waiting for its reaper has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@emulated
@pytest.mark.slow
def test_sigterm_to_emulate_run_is_one_line_without_the_nodes_tracebacks(needs_root, tmp_path):
    """torchrun prints a traceback when its agent is terminated; the teardown does not echo it."""
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(300)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtmodel_cli", "emulate", "run", "--nodes", "2", "--", str(sleeper)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _a_process_runs(str(sleeper)):
        time.sleep(0.5)
    time.sleep(2)  # the agents are up and monitoring
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in out + err, (out + err)[-2000:]
    assert err.strip().splitlines()[-1] == "error: stopped by SIGTERM; the emulated cluster is torn down"


def _a_process_runs(text: str) -> bool:
    """Some process's command line holds `text` (each node's rank runs the sleeper)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if text.encode() in fh.read():
                    return True
        except OSError:
            continue
    return False
