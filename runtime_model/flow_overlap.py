"""Flows that share a NIC only in part: how much of a flow's time the other flows on its NIC overlap it.

Why: with Decent-DP's one-iteration slack the groups of a round do not start their exchanges together
(each waits only for its own members), so the q flows leaving one NIC overlap in time only in part.
Charging them as sharing the NIC throughout (q x the bytes) is right when they start together and too
slow when they drift apart; charging each its solo time ignores them. Between the two bounds, a flow is
charged its solo time plus the sharing penalty in proportion to how much of its solo window the other
flows' solo windows on its NIC overlap:

    overlap_i = mean over co-flows j of |[S_i, S_i + solo_i) ^ [S_j, S_j + solo_j)| / solo_i
    charged_g = solo_g + (shared_g - solo_g) x max over the group's senders of overlap_i

S = the group's start (its last member's launch, from the recurrence). For two equal flows under
processor sharing this is exact: started delta apart (delta < W = solo, S = shared), both take
delta + (W - delta) x S / W = W + (S - W)(W - delta) / W, so the offset between them is kept (neither
catches up nor runs away); together they share throughout (overlap 1, what lockstep ranks do), apart
by more than W each runs alone (0). For more flows it is the mean of the pairwise overlaps, a
first-order estimate; the NIC byte bound (round_comm.nic_bound_s) holds over every period whatever
the overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class FlowOverlap:
    """One round's co-flows (Round.coflow_pairs) and the sharing penalty they can cost each rank."""

    rank: np.ndarray  # i: a rank whose flow shares its NIC ...
    other: np.ndarray  # j: ... with this rank's flow (another group)
    solo_s: np.ndarray  # per rank: its group's exchange alone on the NICs
    shared_s: np.ndarray  # per rank: its group's exchange with the NIC shared throughout

    @property
    def any(self) -> bool:
        return self.rank.size > 0

    def overlap(self, start_s: np.ndarray) -> np.ndarray:
        """Per rank, the mean fraction of its flow's solo window that its co-flows overlap (0 without
        co-flows); `start_s` is each rank's group's start."""
        n = start_s.shape[0]
        i, j = self.rank, self.other
        lo = np.maximum(start_s[i], start_s[j])
        hi = np.minimum(start_s[i] + self.solo_s[i], start_s[j] + self.solo_s[j])
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(self.solo_s[i] > 0, np.clip(hi - lo, 0.0, None) / self.solo_s[i], 1.0)
        total = np.bincount(i, weights=np.minimum(frac, 1.0), minlength=n)
        count = np.bincount(i, minlength=n)
        return np.divide(total, count, out=np.zeros(n), where=count > 0)

    def relief_s(self, group_overlap: np.ndarray) -> np.ndarray:
        """How much less than full sharing each rank waits, given its group's overlap (0 = none)."""
        return (self.shared_s - self.solo_s).clip(min=0.0) * (1.0 - np.clip(group_overlap, 0.0, 1.0))
