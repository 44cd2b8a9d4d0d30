"""EmulatedCluster: N "nodes" on this machine, each a network namespace, joined by a shaped, delayed network.

Layout (all of it private to the run, nothing in the root namespace is touched):
- node i = namespace `rtmemu-<pid>-<token>-n<i>` with `lo` (the intra-node link: ranks of one node talk
  over loopback) and a TUN device `tun0` holding 10.213.0.<i+1>/24, the node's only non-local route.
  There is no default route, so nothing can route out.
- the inter-node network = one forwarder process (rtmodel_emulation.forwarder) attached to every node's tun0: it
  plays the switch, serialises packets on the sender's and receiver's NIC at the configured rate and adds
  the one-way delay (analytic release times, so its own wake-up lateness does not add up).
- shaping (MEASUREMENTS.md compares the three):
  "tbf+forwarder" (default): also `tc tbf` at the same rate on each tun0's egress. The forwarder alone
      already times packets exactly, but it takes them from the kernel at once, so TCP never sees a queue
      (TCP small queues only count packets still in the qdisc) and piles megabytes into the forwarder;
      ACKs of the reverse flow wait behind them and bidirectional transfers slow down. tbf keeps that
      queue in the kernel, short and visible to TCP, as a real NIC does.
  "forwarder": forwarder only (lossless, unbounded queue): exact for one-way traffic.
  "tbf": tbf only, the forwarder just delays: the token bucket lets a burst through at once, so short
      transfers finish up to ~25% faster than the line rate allows.
No bridge or veth is needed: the forwarder already is the switch, so the design has no L2 and no
forwarding sysctl to get wrong.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rtmodel_emulation import guardian, netns, settings
from rtmodel_emulation.errors import EmulationConfigError, EmulationError, EmulationUnavailable, LaunchError
from rtmodel_emulation.settings import SHAPINGS, InvalidSetting
from rtmodel_util.host_share import omp_threads_env
from rtmodel_util.launch_env import NODE_NAME_ENV
from rtmodel_util.process_control import stop_processes
from rtmodel_util.run_dirs import child_tmpdir, run_directory

# Every emulated node runs loss-based TCP, as Linux clusters do by default (cubic). With the host's BBR
# the same 4 MB gloo all-reduce took 341 ms back to back but 351-359 ms, with stalls of +75..+180 ms,
# once it alternated with idle compute, as training does (BBR paces by a bandwidth it estimates from
# app-limited samples); with reno it took 341 ms both ways (MEASUREMENTS.md "TCP congestion control").
# Reno, not cubic: a child namespace may only pick the host's allowed list (reno is always on it), and at
# these bandwidth-delay products (< 64 KB, one segment) cubic grows its window as reno does.
TCP_CONGESTION = "reno"
IFNAME = "tun0"
SUBNET = "10.213.0"
REPO_ROOT = str(Path(__file__).resolve().parent.parent)


@dataclass
class LaunchResult:
    """Outcome of launch_torchrun/launch: per node return code and captured output."""

    returncodes: list[int]
    stdout: list[str]
    stderr: list[str]
    elapsed_s: float
    commands: list[list[str]] = field(default_factory=list)


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _kill_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """Stop a process we started (own session) and everything it spawned."""
    stop_processes([proc], grace_s, group=True)


class EmulatedCluster:
    """Context manager: `with EmulatedCluster(2, 2, 100, 1.0) as c: c.launch_torchrun([...])`.

    inter_bandwidth_mbit is each node's NIC rate (Mbit/s, both directions), inter_delay_ms the one-way
    latency between nodes (ping RTT = 2x), flow_mbit the most one inter-node flow (one direction of a
    TCP connection) may send, Mbit/s (None: a flow may fill the NIC; rtmodel_emulation.flows). The ranks of a
    node share its loopback: no other intra-node link is offered.
    """

    def __init__(self, nodes: int = 2, ranks_per_node: int = 1, inter_bandwidth_mbit: float = 1000.0,
                 inter_delay_ms: float = 0.1, *, shaping: str = "tbf+forwarder",
                 flow_mbit: float | None = None, mtu: int = 65520, realtime_forwarder: bool = True):
        settings.NODES_RANGE.check("nodes", nodes, InvalidSetting)
        settings.RANKS_PER_NODE_RANGE.check("ranks_per_node", ranks_per_node, InvalidSetting)
        settings.BANDWIDTH_MBIT_RANGE.check("inter_bandwidth_mbit", inter_bandwidth_mbit, InvalidSetting)
        settings.DELAY_MS_RANGE.check("inter_delay_ms", inter_delay_ms, InvalidSetting)
        if flow_mbit is not None:
            settings.FLOW_MBIT_RANGE.check("flow_mbit", flow_mbit, InvalidSetting)
        if shaping not in SHAPINGS:
            raise InvalidSetting("shaping", f"one of {', '.join(SHAPINGS)}", shaping)
        settings.MTU_RANGE.check("mtu", mtu, InvalidSetting)
        self.nodes = int(nodes)
        self.ranks_per_node = int(ranks_per_node)
        self.inter_bandwidth_mbit = float(inter_bandwidth_mbit)
        self.inter_delay_ms = float(inter_delay_ms)
        self.shaping = shaping
        self.flow_mbit = None if flow_mbit is None else float(flow_mbit)
        self.mtu = int(mtu)
        self.realtime_forwarder = realtime_forwarder
        self.python = sys.executable  # the interpreter every node, the forwarder and the guardian run
        self.iface = IFNAME
        self.token = netns.new_run_token()
        self.namespaces = [netns.namespace_name(self.token, i) for i in range(self.nodes)]
        self._created: list[str] = []
        self._forwarder: subprocess.Popen | None = None
        self._guardian: subprocess.Popen | None = None  # ends the nodes if this process is SIGKILLed
        self._muted = threading.Event()  # set while tearing down: dying nodes' tracebacks are not echoed
        self._workdir: str | None = None
        self._procs: list[subprocess.Popen] = []
        self._prev_handlers: dict[int, object] = {}
        self._down_lock = threading.RLock()
        self._is_up = False
        self._tearing_down = False
        self.last_forwarder_stats: dict | None = None

    # ---- lifecycle -------------------------------------------------------------------------------------
    def __enter__(self) -> EmulatedCluster:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> EmulatedCluster:
        """Create namespaces, TUNs, shaping and the forwarder; on any failure tear down what exists."""
        if self._is_up:
            return self
        ok, reason = netns.available()
        if not ok:
            raise EmulationUnavailable(f"cannot emulate a cluster here: {reason}")
        netns.cleanup_stale()
        self._install_signal_handlers()
        atexit.register(self.down)
        self._is_up = True
        self._muted.clear()
        try:
            # the forwarder's config, log and stats; removed however this process ends (a SIGKILL too)
            self._workdir_stack = contextlib.ExitStack()
            # rtmemu-<pid>-<token's random part>-XXXXXXXX; a killed run's is removed by the next (run_dirs)
            tag = self.token.rpartition("-")[2]
            run = self._workdir_stack.enter_context(run_directory(netns.PREFIX, tag=f"{tag}-"))
            self._workdir = str(run.path)
            self._guardian = guardian.start(self.namespaces, self.python, _pythonpath())
            for i, ns in enumerate(self.namespaces):
                self._create_node(i, ns)
            self._start_forwarder()
        except BaseException:
            self.down()
            raise
        return self

    def _create_node(self, i: int, ns: str) -> None:
        self._created.append(ns)  # before `add`: a Ctrl-C right after it must still find it to delete
        netns.run_cmd(["ip", "netns", "add", ns])
        ip = ["ip", "-n", ns]
        netns.run_cmd(ip + ["link", "set", "lo", "up"])
        netns.run_cmd(ip + ["tuntap", "add", "dev", IFNAME, "mode", "tun"])
        netns.run_cmd(ip + ["link", "set", IFNAME, "mtu", str(self.mtu), "txqueuelen", "1000",
                            "addrgenmode", "none"])  # no IPv6 link-local chatter through the forwarder
        netns.run_cmd(ip + ["addr", "add", f"{self.node_ip(i)}/24", "dev", IFNAME])
        netns.run_cmd(ip + ["link", "set", IFNAME, "up"])
        # 64 KB segments: with the stock 128 KB rmem default a fresh connection's receive window is ~1
        # segment (stop-and-wait for the first RTTs); 1 MB gives ~16 segments, like 64 KB at a 4 KB MSS
        netns.run_cmd(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 1048576 33554432"])
        # a namespace inherits the host's congestion control; BBR (this VM's default) mis-paces the
        # stop-and-go traffic of training, see TCP_CONGESTION
        netns.run_cmd(["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv4.tcp_congestion_control={TCP_CONGESTION}"])
        if self.shaping in ("tbf", "tbf+forwarder"):
            netns.run_cmd(["tc", "-n", ns, "qdisc", "replace", "dev", IFNAME, "root", "tbf",
                           "rate", f"{self.inter_bandwidth_mbit * 1000:.0f}kbit", "burst", str(self.mtu + 8192),
                           "latency", "200ms"])

    def _start_forwarder(self) -> None:
        assert self._workdir is not None
        cfg = {"owner_pid": os.getpid(), "namespaces": self.namespaces, "ifname": IFNAME,
               "addresses": [self.node_ip(i) for i in range(self.nodes)],
               "rate_Bps": None if self.shaping == "tbf" else self.inter_bandwidth_mbit * 1e6 / 8,
               "flow_rate_Bps": None if self.flow_mbit is None else self.flow_mbit * 1e6 / 8,
               "delay_s": self.inter_delay_ms / 1e3, "realtime": self.realtime_forwarder,
               "stats_path": os.path.join(self._workdir, "forwarder-stats.json")}
        cfg_path = os.path.join(self._workdir, "forwarder.json")
        with open(cfg_path, "w") as fh:
            json.dump(cfg, fh)
        env = dict(os.environ, PYTHONPATH=_pythonpath())
        log_path = os.path.join(self._workdir, "forwarder.log")
        with open(log_path, "w") as log:  # a file, not a pipe nobody reads, so it can never block on stderr
            self._forwarder = subprocess.Popen([self.python, "-P", "-m", "rtmodel_emulation.forwarder", cfg_path],
                                               stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                                               start_new_session=True)
        line = self._forwarder.stdout.readline()  # "ready", or EOF when it died
        if line.strip() != "ready":
            self._forwarder.wait(timeout=5)
            raise EmulationError(f"forwarder failed to start (exit code {self._forwarder.returncode}): "
                                 f"{_tail(Path(log_path).read_text(), 8)}")

    def down(self) -> None:
        """Tear everything down; idempotent, safe after partial up(), on exceptions and from signal handlers."""
        with self._down_lock:
            if not self._is_up or self._tearing_down:
                return
            self._tearing_down = True
            try:
                self._teardown()
                self._is_up = False  # only on success: atexit retries a teardown that failed midway
                atexit.unregister(self.down)
            finally:
                self._tearing_down = False

    def _teardown(self) -> None:
        self._muted.set()
        for proc in self._procs:
            _kill_group(proc)
        self._procs.clear()
        for ns in self._created:
            netns.kill_namespace_pids(ns)
        if self._forwarder is not None:
            _kill_group(self._forwarder)
            self._forwarder = None
        self.last_forwarder_stats = self.forwarder_stats()
        while self._created:
            netns.delete_namespace(self._created[-1])
            self._created.pop()
        guardian.release(self._guardian)
        self._guardian = None
        if self._workdir:
            self._workdir_stack.close()
            self._workdir = None
        self._restore_signal_handlers()

    def _install_signal_handlers(self) -> None:
        """SIGINT/SIGTERM tear the cluster down first, then behave as before (KeyboardInterrupt/exit)."""
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers; atexit and __exit__ still clean up
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._prev_handlers[sig] = signal.signal(sig, self._on_signal)

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, prev in self._prev_handlers.items():
            if signal.getsignal(sig) == self._on_signal:
                signal.signal(sig, prev)
        self._prev_handlers.clear()

    def _on_signal(self, signum, frame) -> None:
        if self._tearing_down:
            return  # a second Ctrl-C must not interrupt the teardown it asked for
        prev = self._prev_handlers.get(signum)
        self.down()
        if callable(prev):
            prev(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        sys.stderr.write(f"error: stopped by {signal.Signals(signum).name}; the emulated cluster is torn down\n")
        raise SystemExit(128 + signum)

    # ---- addressing and running ------------------------------------------------------------------------
    def node_ip(self, node: int) -> str:
        self._check_node(node)
        return f"{SUBNET}.{node + 1}"

    def namespace(self, node: int) -> str:
        self._check_node(node)
        return self.namespaces[node]

    def _check_node(self, node: int) -> None:
        if not 0 <= node < self.nodes:
            raise EmulationConfigError(f"node must be 0..{self.nodes - 1}, got {node}")

    def node_env(self, node: int) -> dict[str, str]:
        """What every process on a node gets: the gloo interface, its node name, our package importable,
        and its share of this machine's cores as OpenMP threads (every node's ranks run on them)."""
        return {"GLOO_SOCKET_IFNAME": IFNAME, NODE_NAME_ENV: f"node{node}", "PYTHONPATH": _pythonpath(),
                **omp_threads_env(self.nodes * self.ranks_per_node)}

    def exec_prefix(self, node: int, env: dict[str, str] | None = None) -> list[str]:
        """`ip netns exec <ns> env K=V ...`: prepend to any argv to run it on `node` (copy-pasteable)."""
        merged = {**self.node_env(node), **(env or {})}
        return ["ip", "netns", "exec", self.namespace(node), "env", *[f"{k}={v}" for k, v in merged.items()]]

    def run_on_node(self, node: int, argv: list[str], env: dict[str, str] | None = None,
                    **popen_kwargs) -> subprocess.Popen:
        """Start argv inside node's namespace (own process group; killed by down())."""
        if not self._is_up:
            raise EmulationError("cluster is not up; use `with EmulatedCluster(...)` or call up() first")
        popen_kwargs.setdefault("start_new_session", True)
        proc = subprocess.Popen(self.exec_prefix(node, env) + list(argv), **popen_kwargs)
        self._procs.append(proc)
        return proc

    def torchrun_commands(self, module_args: list[str], master_port: int = 29500) -> list[list[str]]:
        """One argv per node: torchrun with a static rendezvous on node0, then module_args (`-m mod ...`
        or `script.py ...`) verbatim."""
        if not module_args:
            raise EmulationConfigError("torchrun needs a script or `-m module` to run")
        settings.PORT_RANGE.check("master_port", master_port, InvalidSetting)
        # torchrun's torchelastic_* logs and its ranks' temp files go with the run directory at teardown
        env = {"TMPDIR": child_tmpdir(self._workdir)} if self._workdir else None
        cmds = []
        for node in range(self.nodes):
            cmds.append(self.exec_prefix(node, env) + [
                self.python, "-m", "torch.distributed.run",
                f"--nnodes={self.nodes}", f"--node_rank={node}", f"--nproc-per-node={self.ranks_per_node}",
                f"--master_addr={self.node_ip(0)}", f"--master_port={int(master_port)}",
                "--max-restarts=0", *module_args])
        return cmds

    def launch_torchrun(self, module_args: list[str], timeout_s: float = 300.0, master_port: int = 29500,
                        echo: bool = False) -> LaunchResult:
        """Run module_args under torchrun on every node; raise LaunchError (failing node's stderr tail) if
        any node fails or the whole run exceeds timeout_s, after killing all nodes."""
        return self.launch(self.torchrun_commands(module_args, master_port), timeout_s, echo=echo)

    def launch(self, commands: list[list[str]], timeout_s: float, echo: bool = False) -> LaunchResult:
        """Start one full argv per node (as torchrun_commands makes), wait for all, fail fast on the first error."""
        settings.TIMEOUT_S_RANGE.check("timeout_s", timeout_s, InvalidSetting)
        if not self._is_up:
            raise EmulationError("cluster is not up; use `with EmulatedCluster(...)` or call up() first")
        start = time.monotonic()
        procs, outs, errs, readers = [], [], [], []
        for node, cmd in enumerate(commands):
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            self._procs.append(proc)
            procs.append(proc)
            outs.append([])
            errs.append([])
            for stream, sink in ((proc.stdout, outs[-1]), (proc.stderr, errs[-1])):
                t = threading.Thread(target=_pump, args=(stream, sink, f"[node{node}] " if echo else None,
                                                         self._muted), daemon=True)
                t.start()
                readers.append(t)
        failed, timed_out = None, False
        while True:
            codes = [p.poll() for p in procs]
            bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                failed = bad[0]
                break
            if all(c == 0 for c in codes):
                break
            if time.monotonic() - start > timeout_s:
                timed_out = True
                break
            time.sleep(0.05)
        if failed is not None or timed_out:
            for p in procs:
                _kill_group(p)
        for t in readers:
            t.join(timeout=5)
        result = LaunchResult([p.poll() if p.poll() is not None else -9 for p in procs],
                              ["".join(o) for o in outs], ["".join(e) for e in errs],
                              time.monotonic() - start, commands)
        if timed_out:
            tails = "\n".join(f"--- node{i} stderr ---\n{_tail(e, 10)}" for i, e in enumerate(result.stderr))
            raise LaunchError(f"launch timed out after {timeout_s:.0f}s; all nodes killed\n{tails}")
        if failed is not None:
            raise LaunchError(f"node{failed} exited with code {result.returncodes[failed]}; all nodes killed\n"
                              f"--- node{failed} stderr (tail) ---\n{_tail(result.stderr[failed])}")
        return result

    # ---- introspection ---------------------------------------------------------------------------------
    def forwarder_cpu_s(self) -> float:
        """CPU seconds (user+system) the forwarder has used so far; 0 when not running."""
        if self._forwarder is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self._forwarder.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def forwarder_stats(self) -> dict | None:
        """Packets/bytes/drops and release lateness as the forwarder last dumped them (about once a second)."""
        if not self._workdir:
            return self.last_forwarder_stats
        try:
            return json.loads(Path(self._workdir, "forwarder-stats.json").read_text())
        except (OSError, ValueError):
            return None

    def describe(self) -> str:
        per_flow = "" if self.flow_mbit is None else f" (at most {self.flow_mbit:g} Mbit/s per flow)"
        lines = [f"{self.nodes} nodes x {self.ranks_per_node} ranks, inter-node {self.inter_bandwidth_mbit:g} Mbit/s "
                 f"per NIC{per_flow}, {self.inter_delay_ms:g} ms one-way (RTT {2 * self.inter_delay_ms:g} ms), "
                 f"shaping={self.shaping}, TCP {TCP_CONGESTION}, intra-node: loopback"]
        for i in range(self.nodes):
            lines.append(f"  node{i}: netns {self.namespaces[i]}  ip {self.node_ip(i)}  iface {IFNAME}")
        return "\n".join(lines)


def _pump(stream, sink: list[str], prefix: str | None, muted: threading.Event) -> None:
    for line in iter(stream.readline, ""):
        sink.append(line)
        if prefix is not None and not muted.is_set():
            sys.stdout.write(prefix + line)
            sys.stdout.flush()
    stream.close()


def _pythonpath() -> str:
    parts = [REPO_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))

