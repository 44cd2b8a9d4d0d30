"""`rtmodel emulate up|run|cleanup|measure`: the emulated cluster's verbs, mounted by register(app).

Why in the shell, not in rtmodel_emulation/: the emulation package builds and measures the namespaces and
knows nothing of the command line. Importing this module pulls in typer (and the shared option types of
rtmodel_cli.run_options) only."""

from __future__ import annotations

import shlex
from typing import Annotated

import typer

from rtmodel_cli.run_options import QuickOpt

NODES = Annotated[int, typer.Option("--nodes", help="number of emulated nodes (network namespaces)")]
RANKS = Annotated[
    int, typer.Option("--ranks-per-node", help="processes per node (torchrun --nproc-per-node)")
]
BW = Annotated[
    float, typer.Option("--bandwidth-mbit", help="each node's NIC rate between nodes, Mbit/s (1 to 100000)")
]
DELAY = Annotated[
    float, typer.Option("--delay-ms", help="one-way inter-node delay, ms (ping RTT = 2x; 0 to 10000)")
]
SHAPING = Annotated[
    str,
    typer.Option(
        "--shaping", help="tbf+forwarder (default), forwarder or tbf; see rtmodel_emulation/MEASUREMENTS.md"
    ),
]
MTU = Annotated[int, typer.Option("--mtu", help="MTU of the inter-node interfaces")]
FLOW = Annotated[
    float | None,
    typer.Option(
        "--flow-mbit",
        help="the most one inter-node TCP/UDP flow may send, Mbit/s (1 to 100000; default: a flow may "
        "fill the NIC); k flows out of a NIC get min(cap, NIC / k) each",
    ),
]


# EmulatedCluster's keyword -> the option of these commands that sets it, so that an error names the flag.
OPTION_OF = {"inter_bandwidth_mbit": "bandwidth_mbit", "inter_delay_ms": "delay_ms"}


def _cluster(nodes, ranks, bw, delay, shaping, mtu, flow_mbit=None):
    """The cluster, not yet up: its settings are checked here, before anything is created (no root needed)."""
    from rtmodel_emulation.cluster import EmulatedCluster
    from rtmodel_emulation.settings import InvalidSetting

    try:
        return EmulatedCluster(nodes, ranks, bw, delay, shaping=shaping, mtu=mtu, flow_mbit=flow_mbit)
    except InvalidSetting as exc:
        raise InvalidSetting(OPTION_OF.get(exc.name, exc.name), exc.requirement, exc.value) from None


def up(
    nodes: NODES = 2,
    ranks_per_node: RANKS = 1,
    bandwidth_mbit: BW = 1000.0,
    delay_ms: DELAY = 0.1,
    shaping: SHAPING = "tbf+forwarder",
    mtu: MTU = 65520,
    flow_mbit: FLOW = None,
    check: Annotated[bool, typer.Option(help="measure ping RTT and TCP rate node0 -> node1 first")] = True,
):
    """Bring an emulated cluster up and keep it until Ctrl-C; prints how to run commands inside."""
    import signal

    from rtmodel_emulation.probe import measure_rtt, measure_throughput

    try:
        with _cluster(nodes, ranks_per_node, bandwidth_mbit, delay_ms, shaping, mtu, flow_mbit) as c:
            typer.echo(c.describe())
            if check and c.nodes >= 2:
                rtts = sorted(measure_rtt(c, 0, 1, count=10))
                rate = measure_throughput(c, 0, 1, nbytes=max(4 << 20, int(bandwidth_mbit * 1e6 / 8 * 0.3)))
                typer.echo(
                    f"check: ping RTT median {rtts[len(rtts) // 2] * 1e3:.2f} ms (expect "
                    f"{2 * delay_ms:g} + ~0.1-0.3), TCP {rate['rate_Bps'] * 8 / 1e6:.1f} Mbit/s"
                )
            typer.echo("\nrun a command on node i:\n  " + shlex.join(c.exec_prefix(0) + ["bash"]))
            typer.echo("torchrun on every node (one per terminal):")
            for cmd in c.torchrun_commands(["-m", "your.module"], 29500):
                typer.echo("  " + shlex.join(cmd))
            typer.echo("\nup; press Ctrl-C to tear down")
            while True:
                signal.pause()
    except KeyboardInterrupt:
        typer.echo("torn down")


def run(
    command: Annotated[
        list[str],
        typer.Argument(help="after `--`: torchrun's script/`-m module` + args, or with --plain any command"),
    ],
    nodes: NODES = 2,
    ranks_per_node: RANKS = 1,
    bandwidth_mbit: BW = 1000.0,
    delay_ms: DELAY = 0.1,
    shaping: SHAPING = "tbf+forwarder",
    mtu: MTU = 65520,
    flow_mbit: FLOW = None,
    plain: Annotated[
        bool,
        typer.Option(
            help="run the command as is on every node instead of under "
            "torchrun (env NODE_RANK, NNODES, MASTER_ADDR, MASTER_PORT)"
        ),
    ] = False,
    timeout_s: Annotated[float, typer.Option(help="kill everything after this many seconds (> 0)")] = 1800.0,
    master_port: Annotated[int, typer.Option(help="rendezvous port on node0")] = 29500,
):
    """Bring a cluster up, run the command on every node (torchrun by default), tear down."""
    from rtmodel_emulation.settings import PORT_RANGE, TIMEOUT_S_RANGE, InvalidSetting

    TIMEOUT_S_RANGE.check("timeout_s", timeout_s, InvalidSetting)  # before the cluster exists, not after
    PORT_RANGE.check("master_port", master_port, InvalidSetting)
    with _cluster(nodes, ranks_per_node, bandwidth_mbit, delay_ms, shaping, mtu, flow_mbit) as c:
        typer.echo(c.describe())
        if plain:
            cmds = [
                c.exec_prefix(
                    n,
                    {
                        "NODE_RANK": str(n),
                        "NNODES": str(c.nodes),
                        "MASTER_ADDR": c.node_ip(0),
                        "MASTER_PORT": str(master_port),
                    },
                )
                + list(command)
                for n in range(c.nodes)
            ]
            res = c.launch(cmds, timeout_s, echo=True)
        else:
            res = c.launch_torchrun(list(command), timeout_s, master_port, echo=True)
        typer.echo(f"all {c.nodes} nodes finished in {res.elapsed_s:.1f} s")


def cleanup():
    """Remove what killed runs left behind (owner process gone): network namespaces and temp directories
    (rtmemu-*, rtmodel-profile-*, rtmodel-validate-*; this user's only)."""
    from rtmodel_emulation.netns import cleanup_stale
    from rtmodel_util.run_dirs import FAMILIES, describe_removed, sweep_stale

    dirs = sweep_stale(FAMILIES)  # first: needs neither root nor iproute2
    if dirs:
        typer.echo(describe_removed(dirs))
    names = cleanup_stale()
    if names:
        typer.echo(
            f"removed {len(names)} network namespace{'s' * (len(names) != 1)} left by killed runs: "
            + ", ".join(names)
        )
    if not dirs and not names:
        typer.echo("nothing to clean up")


def measure(quick: QuickOpt = False):
    """Gloo all_reduce on 2 emulated nodes vs the ring model (the table in rtmodel_emulation/MEASUREMENTS.md);
    --quick: only the default shaping, not all three."""
    from rtmodel_emulation.cluster import SHAPINGS
    from rtmodel_emulation.measure import DEFAULT_SETTINGS, markdown, measure_floor, measure_setting

    floor = measure_floor(2)
    rows = [
        measure_setting(bw, d, sh)
        for bw, d in DEFAULT_SETTINGS
        for sh in (SHAPINGS[:1] if quick else SHAPINGS)
    ]
    typer.echo(markdown(rows, floor))


def build_app() -> typer.Typer:
    app = typer.Typer(
        help="Emulate a multi-node cluster on this machine (network namespaces; needs root).",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )
    app.command()(up)
    app.command(context_settings={"allow_interspersed_args": False})(run)
    app.command()(cleanup)
    app.command()(measure)
    return app


def register(app: typer.Typer) -> None:
    """Mount the verbs as `<app> emulate up|run|cleanup|measure`."""
    app.add_typer(build_app(), name="emulate")
