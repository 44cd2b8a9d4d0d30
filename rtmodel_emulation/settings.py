"""The emulated cluster's settings and their ranges, checked before anything is created.

Why a module of its own: `EmulatedCluster(...)` and `rtmodel emulate up|run` check the same ranges, at
construction and without root, so a bad value is one line (exit 2) instead of a `tc` failure with
namespaces to undo. Each range is an `Interval`, so the check and its message cannot drift.
"""

from __future__ import annotations

from rtmodel_emulation.errors import EmulationConfigError
from runtime_model.core.constraints import Interval
from runtime_model.core.errors import InvalidValue

MAX_NODES = 64
MAX_RANKS_PER_NODE = 64
SHAPINGS = ("tbf+forwarder", "forwarder", "tbf")

NODES_RANGE = Interval(1, MAX_NODES, integer=True)
RANKS_PER_NODE_RANGE = Interval(1, MAX_RANKS_PER_NODE, integer=True)
# The NIC rate, Mbit/s. Upper bound: tbf's queue limit is a u32 byte count that tc computes as
# rate x latency + burst (iproute2 tc/q_tbf.c; we pass latency 200ms), so above ~171,000 Mbit/s it wraps
# (tc 6.1 then shows "lat 234us" for 172 Gbit/s); the rate itself is a u64 (TCA_TBF_RATE64). 100,000
# Mbit/s (100 Gbit/s) stays clear of that and is far beyond what the forwarder process carries anyway.
# Lower bound: tc gets the rate in whole kbit, and below 1 Mbit/s even the rendezvous takes minutes.
BANDWIDTH_MBIT_RANGE = Interval(1.0, 100_000.0)
# The per-flow cap, Mbit/s (rtmodel_emulation.flows): one TCP/UDP stream's most; the same bounds as the NIC's
# (a cap above the NIC's rate is allowed and has no effect: min(cap, B / k)).
FLOW_MBIT_RANGE = BANDWIDTH_MBIT_RANGE
DELAY_MS_RANGE = Interval(0.0, 10_000.0)  # one-way; 10 s is far past any network worth modelling
MTU_RANGE = Interval(1280, 65535, integer=True)  # IPv6's minimum .. the largest a TUN device takes
TIMEOUT_S_RANGE = Interval(0.0, None, closed="neither")  # finite and > 0: 0 would kill every run at once
PORT_RANGE = Interval(1, 65535, integer=True)


class InvalidSetting(EmulationConfigError, InvalidValue):
    """A setting outside its range, raised by `RANGE.check(name, value, InvalidSetting)`; `name` is the
    setting's keyword (the shell shows its flag)."""

