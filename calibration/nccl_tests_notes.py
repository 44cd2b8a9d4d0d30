"""What an nccl-tests link says beside its figure: where the run's shape is not the question's, and where
its per-NIC rate is beyond what the NIC could carry, with what likely explains it.

Why adapt, not refuse, a shape that differs: the inversion already runs on the run's own shape (its
ranks per host, and its NICs per host where NCCL listed them), and what carries to another shape is the
per-NIC rate, as a profile's links carry from its 2 x 2 to the question's nodes (calibration/extrapolate).
What it cannot know is a NIC count the log does not print: then the question's --nics-per-node stands in,
and a rate beyond any NIC says that this, or an algorithm the model does not run, is the likely cause.
"""

from __future__ import annotations

from calibration.nccl_tests_output import NcclTestsRun
from runtime_model.core.scenario import GroupShape

BEYOND_PRESET = 1.1  # a measured NIC this much faster than the preset's achievable rate is said so
FASTEST_NIC_Gbps = 800.0  # ConnectX-8 / 800G Ethernet: no NIC made carries more
UNMODELLED = {"nvls": "NVLink SHARP", "nvls_tree": "NVLS tree", "collnet_direct": "SHARP/CollNet",
              "collnet_chain": "SHARP/CollNet", "pat": "PAT"}  # fmt: skip


def shape_notes(
    run: NcclTestsRun, question_nics: int, gpus_per_node: int | None, nics: int
) -> tuple[str, ...]:
    """One line where the run's node is not the question's: which shape the rate was derived on."""
    differs = []
    if gpus_per_node is not None and gpus_per_node != run.ranks_per_host:
        differs.append(f"the question's {gpus_per_node} GPUs per node")
    if run.nics_per_host and run.nics_per_host != question_nics:
        differs.append(f"the question's {question_nics} NIC(s) per node (--nics-per-node)")
    if not differs:
        return ()
    whose = (
        f"its NET/{run.nic_transport} line"
        if run.nics_per_host
        else "--nics-per-node: the log does not list them"
    )
    return (
        f"the run's nodes ({run.hosts} x {run.ranks_per_host} ranks, {nics} NIC(s) per host from {whose}) are "
        f"not {' nor '.join(differs)}: the per-NIC rate is derived on the run's own shape and carried to the "
        "question's nodes",
    )


def rate_notes(
    run: NcclTestsRun, nic_Bps: float, preset_Bps: float, group: GroupShape, algorithm: str
) -> tuple[str, ...]:
    """One line where the per-NIC rate is above the preset's NIC or beyond any NIC, naming the likely
    cause: an algorithm the model does not run (NVLS, SHARP/CollNet), or more NICs than assumed."""
    gbps = nic_Bps * 8e-9
    if gbps > FASTEST_NIC_Gbps:
        lead = f"{gbps:,.0f} Gbit/s per NIC is beyond any NIC made ({FASTEST_NIC_Gbps:.0f} Gbit/s)"
    elif nic_Bps > BEYOND_PRESET * preset_Bps:
        lead = f"above the preset's rate ({preset_Bps * 8e-9:.1f} Gbit/s)"
    else:
        return ()
    causes = []
    if algorithm == "one flow":  # sendrecv_perf: no collective algorithm, no rails to share
        causes.append("faster NICs than the preset")
    elif run.algorithm in UNMODELLED:
        causes.append(
            f"NCCL ran {UNMODELLED[run.algorithm]} ({run.algorithm_from}), which the model does not: the rate "
            f"is the one {algorithm} would need"
        )
    elif not run.algorithm:
        causes.append(
            "NCCL ran NVLS or SHARP/CollNet, which the model does not (NCCL_DEBUG=INFO "
            "NCCL_DEBUG_SUBSYS=TUNING prints what it ran)"
        )
    if algorithm != "one flow" and not run.nics_per_host and group.rails < run.ranks_per_host:
        per = gbps * group.rails / run.ranks_per_host
        causes.append(
            f"its hosts have more than {group.rails} NIC(s) (--nics-per-node; with {run.ranks_per_host}, "
            f"{per:,.1f} Gbit/s each)"
        )
    elif not causes:
        causes.append("more or faster NICs than the preset")
    return (f"{lead}: likely {', or '.join(causes)}; shapes other than the run's may differ more",)
