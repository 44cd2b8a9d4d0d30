"""nccl-tests outputs written as each version lays them out, from times a test chooses.

Why written, not copied: the real outputs in public issues are others' logs; the layouts below follow
nccl-tests' own source (src/common.cu / util.cu: the header, `#  Rank` lines, rows, footer), in its
pre-2.13 form (no `root`, `error`), its current form (`redop root ... #wrong`) and under `srun --label`.
Launcher labels as the launchers document them: OpenMPI `--tag-output` `[jobid,rank]<stdout>:` (mpirun(1)
man page; `<stderr>:` for a rank's stderr), `srun --label` ` 0: ` and MPICH / Intel MPI `-prepend-rank`
`[0] `. NCCL's own INFO lines (`info`) as NVIDIA/nccl prints them: `host:pid:tid [dev] NCCL INFO ...`.
"""

from __future__ import annotations

NEW_HEADER = (
    "#                                                              out-of-place                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
)
OLD_HEADER = (
    "#                                                     out-of-place                       in-place          \n"
    "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
    "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
)


def nccl_tests_output(
    times_us: dict[int, float],
    ranks: int = 16,
    hosts: int = 2,
    collective: str = "all_reduce",
    layout: str = "new",
    footer: bool = True,
    info: tuple[str, ...] = (),
    wrong: dict[int, str] | None = None,
    label: str = "",
) -> str:
    """The text `all_reduce_perf` (or `sendrecv_perf`) prints for these out-of-place times per size.

    info: NCCL INFO messages (`NCCL_ALGO set by environment to Ring`, `NET/IB : Using [0]mlx5_0:1/IB`),
    printed as rank 0's; wrong: the #wrong (or old error) cell per size; label: "tag-output" or
    "prepend-rank" puts that launcher's label on every line (layout "slurm" puts srun's)."""
    wrong = wrong or {}
    per_host = ranks // hosts
    lines = [
        f"# nThread 1 nGpus 1 minBytes {min(times_us)} maxBytes {max(times_us)} step: 2(factor) warmup iters: 5 iters: 20 validation: 1",
        "#",
        "# Using devices",
    ]
    for r in range(ranks):
        group = "" if layout == "old" else " Group  0"
        lines.append(
            f"#  Rank {r:2d}{group} Pid {1000 + r:6d} on {f'node{r // per_host:02d}':>10} device {r % per_host:2d} [0x{r:02x}] NVIDIA H100 80GB HBM3"
        )
    lines.append("NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>")  # launchers interleave such lines
    lines += [f"node00:{1000}:{1010} [0] NCCL INFO {message}" for message in info]
    lines.append(OLD_HEADER if layout == "old" else NEW_HEADER)
    factor = 2 * (ranks - 1) / ranks if collective == "all_reduce" else 1.0
    redop = "sum" if collective == "all_reduce" else "none"
    for nbytes, t in sorted(times_us.items()):
        algbw = nbytes / 1e9 / (t * 1e-6)
        cells = f"{t:8.1f} {algbw:7.2f} {algbw * factor:7.2f}"
        lead = f"{nbytes:12d} {nbytes // 4:13d}     float {redop:>7}"
        if layout == "old":
            check = wrong.get(nbytes, "0e+00")
            lines.append(f"{lead} {cells}  {check} {cells}  {check}")
        else:
            check = wrong.get(nbytes, "0")
            lines.append(f"{lead} {-1:7d} {cells} {check:>6} {cells} {check:>6}")
    if footer:
        lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 12.345 ", "#"]
        if layout != "old":
            lines.append(f"# Collective test concluded: {collective}_perf")
    text = "\n".join(lines) + "\n"
    if layout == "slurm":
        text = "".join(f" 0: {line}\n" for line in text.splitlines())
    if label == "tag-output":  # an ssh warning on another rank's stderr among rank 0's stdout
        tagged = [f"[1,0]<stdout>:{line}" for line in text.splitlines()]
        tagged.insert(
            2, "[1,5]<stderr>:Warning: Permanently added 'node01' (ED25519) to the list of known hosts."
        )
        text = "\n".join(tagged) + "\n"
    elif label == "prepend-rank":
        text = "".join(f"[0] {line}\n" for line in text.splitlines())
    return text


MIB = 1 << 20
SIZES = [MIB << i for i in range(11)]  # 1 MiB .. 1 GiB, as all_reduce_perf -b 1M -e 1G -f 2 runs


def small_network(algo="ring", inter_Bps=12e9, nics=1, intra_Bps=1e12):
    """A two-class network for the readers' tests (NCCL's `algo`; 12 GB/s NICs, fast links inside)."""
    from runtime_model.core.scenario import Link, Network

    return Network(
        Link(2e-6, intra_Bps), Link(5e-6, inter_Bps), nics_per_node=nics, nccl_algo=algo, name="test"
    )


def model_times(net, ranks=16, hosts=2) -> dict[int, float]:
    """The model's own all-reduce times (us) over SIZES for a run of `ranks` on `hosts` on `net`."""
    from runtime_model.prediction.collectives import allreduce_s, global_allreduce_shape

    group = global_allreduce_shape(ranks, ranks // hosts, net.nics_per_node)
    return {s: allreduce_s(group, s, net) * 1e6 for s in SIZES}
