"""An nccl-tests run as the inter-node link model: fitted as calibration fits, inverted as the model costs.

Why: a team that ran `all_reduce_perf` across two of its nodes holds the best description of its
network there is; a preset only guesses it. The run's sizes from 1 MiB up are fitted as a profile's
are (calibration.fitting.fit_regimes: robust affine, a second regime where one line misfits); the
large-message line, inverted through the model's own formula (calibration.inversion, for the algorithm
the model would run there: NCCL's ring, or its tree where that is cheaper, as on 2 nodes), the
inter-node link for every other shape; that exact group shape keeps the run's own times size by size
(runtime_model.core.scenario.TabulatedCost: NCCL's protocol and algorithm switches are not one line), so
the run's own bus bandwidth is reproduced. `sendrecv_perf` is one flow: t = latency + S / bandwidth.
The latency comes from the same line where the fit resolves it; else the preset's stays, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from calibration.fitting import AffineFit, fit_regimes
from calibration.inversion import MeasuredLine, invert_line
from calibration.nccl_tests_notes import rate_notes, shape_notes
from calibration.nccl_tests_output import ALL_REDUCE, NcclTestsError, NcclTestsRow, NcclTestsRun
from calibration.tabulated import tabulated_cost
from runtime_model.core.constraints import LINK_GBPS
from runtime_model.core.scenario import GroupShape, Link, Network, TabulatedCost
from runtime_model.prediction.collectives import (
    allreduce_algorithm,
    allreduce_s,
    busbw_Bps,
    global_allreduce_shape,
    tree_nic_bytes,
)

MIN_BYTES = 1 << 20  # the bandwidth regime the fit and its check cover
MIN_SIZES = 3


@dataclass(frozen=True)
class NcclTestsLink:
    """The network an nccl-tests run gives, and how well it reproduces the run."""

    network: Network
    fit: AffineFit
    group: GroupShape
    algorithm: str
    busbw_worst_rel: float  # max |predicted / measured busbw - 1| over the run's sizes >= 1 MiB
    latency_from_run: bool
    preset_Bps: float  # the preset's achievable per-NIC bandwidth it replaces
    warnings: tuple[str, ...] = ()  # what the user should not miss: shape adapted, a NIC rate beyond belief

    def provenance(self, run: NcclTestsRun) -> str:
        link = self.network.inter
        latency = "its fit" if self.latency_from_run else "the preset's: the fit does not resolve it"
        factor = 2 * (run.ranks - 1) / run.ranks if run.collective == ALL_REDUCE else 1.0
        algbw = 1e-9 / self.fit.per_byte_s
        said = ""
        if run.algorithm:
            said = f", as {run.algorithm_from} says" if run.algorithm == self.algorithm else ""
            said = said or f"; the log: {run.algorithm}, from {run.algorithm_from}"
        return "; ".join(
            part
            for part in (
                f"nccl-tests {run.path}: {run.collective}_perf on {run.ranks} ranks / {run.hosts} hosts"
                f"{_read_as(run)}, {_mib(self.fit.min_bytes)}-{_mib(self.fit.max_bytes)}",
                f"fit t = {self.fit.fixed_s * 1e6:.1f} us + S / {algbw:.2f} GB/s algbw = {algbw * factor:.2f} GB/s "
                f"busbw (R2 {self.fit.r2:.4f}, worst size {self.fit.worst_rel_residual:.1%})",
                f"inter-node {link.bandwidth_Bps * 8e-9:.1f} Gbit/s per NIC ({self.algorithm}{said}"
                f"{self._bounded()}), latency {link.latency_s * 1e6:.1f} us ({latency})",
                f"reproduces the run's bus bandwidth within {self.busbw_worst_rel:.1%} at >= 1 MiB",
                f"replaces the preset's inter-node link ({self.preset_Bps * 8e-9:.1f} Gbit/s)",
                *self.warnings,
            )
        )

    def _bounded(self) -> str:
        """Where the node's own link limits the run's largest sizes, the NICs are only known to be at least
        this fast (any faster NIC gives the same times)."""
        net, g, size = self.network, self.group, self.fit.max_bytes
        if g.ranks_per_node <= 1:
            return ""
        nic_Bps = g.rails * net.inter.bandwidth_Bps
        if self.algorithm == "tree":
            bound = 2 * size / net.intra.bandwidth_Bps >= tree_nic_bytes(g.nodes, size) / nic_Bps
        else:
            bound = net.intra.bandwidth_Bps <= nic_Bps
        return "; at least: the intra-node link bounds the run" if bound else ""


def nccl_tests_link(run: NcclTestsRun, network: Network, gpus_per_node: int | None = None) -> NcclTestsLink:
    """`network` with its inter-node link (and the run's own group cost) from `run`, inverted on the run's
    own shape (its ranks per host; its NICs per host where NCCL listed them, else `network`'s): the
    per-NIC rate is what carries to the question's nodes (`gpus_per_node`), which is said where they
    differ."""
    if run.hosts < 2:
        raise NcclTestsError(
            f"--nccl-tests {run.path}: all {run.ranks} ranks ran on one host: no network measured"
        )
    rows = [r for r in run.rows if r.nbytes >= MIN_BYTES]
    if len({r.nbytes for r in rows}) < MIN_SIZES:
        raise NcclTestsError(
            f"--nccl-tests {run.path}: fewer than {MIN_SIZES} sizes of 1 MiB or more (run with -e 64M or larger)"
        )
    nbytes = np.array([r.nbytes for r in rows], dtype=float)
    fit = fit_regimes(nbytes, np.array([r.time_s for r in rows])).large
    transfer_s = fit.per_byte_s * fit.max_bytes  # the bandwidth part at the largest size
    if fit.per_byte_s <= 0 or "per_byte_s" in fit.unresolved or transfer_s < 0.05 * fit.time_s(fit.max_bytes):
        raise NcclTestsError(f"--nccl-tests {run.path}: its times do not grow with the size: no bandwidth")
    nics = run.nics_per_host or network.nics_per_node
    if run.collective == ALL_REDUCE:
        group = global_allreduce_shape(run.ranks, run.ranks_per_host, nics)
        inter, algorithm, resolved = _allreduce_link(fit, group, network, run.algorithm)
        costs = {**network.group_costs, group.key: _cost(fit, rows)}
    else:
        group = GroupShape(2, 2)
        resolved = "fixed_s" not in fit.unresolved and fit.fixed_s > 0
        latency = fit.fixed_s if resolved else network.inter.latency_s
        inter = Link(latency, 1.0 / fit.per_byte_s, source="nccl-tests sendrecv_perf")
        algorithm, costs = "one flow", dict(network.group_costs)
    if not LINK_GBPS.contains(inter.bandwidth_Bps * 8e-9):
        raise NcclTestsError(
            f"--nccl-tests {run.path}: its times give {inter.bandwidth_Bps * 8e-9:,.4g} Gbit/s per NIC, outside any "
            f"link ({LINK_GBPS.describe()} Gbit/s: NVLink 5 carries 14,400 per GPU, the fastest NIC 800): not a "
            "run to fit"
        )
    net = replace(network, inter=inter, group_costs=costs, name=f"nccl-tests ({network.name})")
    worst = _busbw_worst(run, group, net) if run.collective == ALL_REDUCE else fit.worst_rel_residual
    warnings = (
        *_read_notes(run),
        *shape_notes(run, network.nics_per_node, gpus_per_node, nics),
        *rate_notes(run, inter.bandwidth_Bps, network.inter.bandwidth_Bps, group, algorithm),
    )
    return NcclTestsLink(
        net,
        fit,
        group,
        algorithm,
        worst,
        resolved,
        network.inter.bandwidth_Bps,
        tuple(w for w in warnings if w),
    )


def _allreduce_link(
    fit: AffineFit, group: GroupShape, network: Network, said: str = ""
) -> tuple[Link, str, bool]:
    """The inter-node link the fitted line gives under the algorithm the run ran where its log says so
    (ring or tree), else the one the model then runs at its sizes: each candidate's inversion is kept
    only if the model, with that link, picks that algorithm."""
    line = MeasuredLine(
        group, f"nccl-tests {group.key}", fit.fixed_s, fit.fixed_sd_s, fit.per_byte_s, fit.per_byte_rel_sd
    )
    if said in ("ring", "tree"):
        candidates = [said]
    else:
        candidates = [network.nccl_algo] if network.nccl_algo in ("ring", "tree") else ["ring", "tree"]
    chosen = None
    for algo in candidates:
        est = invert_line(line, algo, network.intra)
        link = Link(max(est.latency_s, 0.0), est.bandwidth_Bps, source="nccl-tests all_reduce_perf")
        trial = replace(network, inter=link)
        if allreduce_algorithm(group, fit.max_bytes, trial) == algo or len(candidates) == 1:
            chosen = (est, algo)
            break
    est, algo = chosen or (invert_line(line, "ring", network.intra), "ring")
    resolved = "fixed_s" not in fit.unresolved and est.latency_s > 0
    latency = est.latency_s if resolved else network.inter.latency_s
    return Link(latency, est.bandwidth_Bps, source="nccl-tests all_reduce_perf"), algo, resolved


def _cost(fit: AffineFit, rows: list[NcclTestsRow]) -> TabulatedCost:
    """The run's own shape from the rows fitted (those from 1 MiB), size by size, the line beyond."""
    return tabulated_cost(
        [r.nbytes for r in rows], [r.time_s for r in rows], fit.fixed_s, fit.per_byte_s, "nccl-tests",
        fit.fixed_sd_s, fit.per_byte_rel_sd,
    )  # fmt: skip


def _busbw_worst(run: NcclTestsRun, group: GroupShape, net: Network) -> float:
    """How far the model's bus bandwidth for the run's own shape is from the run's, at >= 1 MiB."""
    worst = 0.0
    for r in run.rows:
        if r.nbytes >= MIN_BYTES and r.busbw_GBps > 0:
            predicted = busbw_Bps(group.size, r.nbytes, allreduce_s(group, r.nbytes, net)) / 1e9
            worst = max(worst, abs(predicted / r.busbw_GBps - 1.0))
    return worst


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**30:g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:g} MiB"


def _read_as(run: NcclTestsRun) -> str:
    """How the file was read, where it took more than reading: launcher labels stripped."""
    return f" (labels of {run.launcher} stripped)" if run.launcher else ""


def _read_notes(run: NcclTestsRun) -> tuple[str, ...]:
    """Which run of several was used; the sizes nccl-tests' own check failed (not fitted)."""
    wrong = (
        f"{run.wrong_sizes} size(s) nccl-tests marked wrong (#wrong / error) are not fitted"
        if run.wrong_sizes
        else ""
    )
    return (run.runs_note, wrong)
