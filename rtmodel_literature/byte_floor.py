"""The paper's published rows against the NIC byte bound of the network its source states.

Why: a long-run iteration is never shorter than the bytes its busiest NIC sends per iteration at that
NIC's line rate, however the exchange overlaps compute. The byte counts are the model's
`nic_bytes_per_iteration`, which the kernel's interface counters confirm on the emulated cluster within
1.14 % and NCCL's source confirms per ring and pair (docs/networks.md). A published row below its
floor is impossible on the stated network at fp32: its cluster carries more than the description (more
NICs, a faster link) or exchanges a narrower dtype. No preset true to the description can predict such
a row, and one that fits it would be a constant chosen so that a row fits (issue 47).
"""

from __future__ import annotations

from dataclasses import dataclass

from rtmodel_literature.paper import COLUMNS, paper_advice, published
from runtime_model.advice.family_report import allreduce_shared
from runtime_model.presets import to_model as presets


@dataclass(frozen=True)
class ByteFloor:
    """One published row beside the time its busiest NIC needs at line rate for the row's bytes."""

    cluster: str
    gpus: int
    method: str
    published_ms: float
    nic_bytes: float  # through the busiest NIC per iteration (the model's count, measured on the wire)
    line_rate_Gbps: float  # one NIC, per direction, as the cluster's source states it

    @property
    def floor_ms(self) -> float:
        return self.nic_bytes * 8 / (self.line_rate_Gbps * 1e9) * 1e3

    @property
    def below(self) -> bool:
        """The published time is shorter than the stated network can carry the row's bytes in."""
        return self.published_ms < self.floor_ms

    @property
    def implied_Gbps(self) -> float:
        """What one NIC carried per direction if the row moved these bytes in its published time."""
        return self.nic_bytes * 8 / (self.published_ms * 1e-3) / 1e9


def paper_floors() -> list[ByteFloor]:
    """Every row of the paper's Figure 6 (our cited copy) beside its byte floor on the cited network."""
    library = presets.builtin_library()
    floors = []
    for rec in published().itertuples():
        cluster = library.cluster(rec.cluster)
        line_rate = library.network(cluster.network).bandwidth_Gbps
        adv = paper_advice(rec, [t for t in COLUMNS.values() if t != "allreduce"])
        nic_bytes = {r.topology: r.nic_bytes_per_iteration for r in adv.rows if r.applicable}
        ddp = allreduce_shared(adv.scenario, adv.allreduce.mean_s)  # each DDP bucket by its algorithm
        nic_bytes["allreduce"] = ddp["nic_bytes_per_iteration"]
        for column, method in COLUMNS.items():
            floors.append(
                ByteFloor(rec.cluster, rec.gpus, method, getattr(rec, column), nic_bytes[method], line_rate)
            )
    return floors


def main() -> None:
    """Print the rows and their floors (python -m rtmodel_literature.byte_floor)."""
    print("| cluster | GPUs | method | published ms | NIC MB/it | floor ms | implied Gbit/s per NIC |")
    print("|---|---|---|---|---|---|---|")
    for f in paper_floors():
        mark = " (below)" if f.below else ""
        print(
            f"| {f.cluster} | {f.gpus} | {f.method} | {f.published_ms:.1f} | {f.nic_bytes / 1e6:.1f} | "
            f"{f.floor_ms:.1f}{mark} | {f.implied_Gbps:.1f} |"
        )


if __name__ == "__main__":
    main()
