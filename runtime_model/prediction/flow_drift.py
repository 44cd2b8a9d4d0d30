"""What a rank waits for when the flows sharing its NIC start at offsets that drift.

Why: with Decent-DP's one-iteration slack, the offset between two ranks of a node is neutrally stable
wherever it leaves no one waiting. Take two flows of solo time s on one NIC whose ranks start them
|delta| apart, each then computing for a window W before it waits. Under processor sharing both
exchanges take d = s + max(0, s - |delta|). That is the same for both ranks, so nothing pulls the offset
back to 0 or pushes it further. Measured on the emulated cluster: identical 2x2 configurations came out
between the full-sharing time and the solo time, lower the longer they ran from their synchronised start.
A node's ranks are held together only once one of them would wait for the other's intra-node exchange,
at |delta| = W. So the model takes the offset's stationary law, uniform on [0, W].

The charge is min(E[d], W) + E[(d - W)+]. Where the expected exchange outlasts the window, its
exposure beyond the window is the expected exposure (not the exposure of the expected exchange, which
is smaller). Where no offset exposes anything, it is the expected exchange time. In between it is
continuous. It runs from the full-sharing time (W = 0: lockstep) down to the solo time (W >> s), so the
solo bound and the NIC's byte bound (round_comm.nic_bound_s) still hold. With q > 2 flows the q - 1
others are taken at one common offset, and the sharing penalty (shared - solo) shrinks by the same
overlap fraction; for two flows this is exact.
"""

from __future__ import annotations

import numpy as np

# midpoints of |delta| / W: the expectation over the uniform offset as a 512-point midpoint rule
# (deterministic, error < 0.01 % on the hand-computed cases)
_OFFSET_FRACTIONS = (np.arange(512) + 0.5) / 512


def drift_charge_s(solo_s: float, shared_s: float, window_s: float) -> float:
    """What the recurrence charges for an exchange whose solo time is solo_s and whose time with its
    NIC's flows in lockstep is shared_s, when the co-flows' offset is uniform on [0, window_s]; never
    less than solo_s (a measured fit of the shared shape may undercut the modelled solo time)."""
    penalty = shared_s - solo_s
    if penalty <= 0 or solo_s <= 0:
        return max(shared_s, solo_s)
    if window_s <= 0:
        return shared_s
    offset = _OFFSET_FRACTIONS * window_s
    exchange = solo_s + penalty * np.maximum(0.0, 1.0 - offset / solo_s)
    exposed = np.maximum(0.0, exchange - window_s).mean()
    return float(min(exchange.mean(), window_s) + exposed)
