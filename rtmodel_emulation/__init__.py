"""A small multi-node cluster emulated on one machine (network namespaces + a delaying TUN forwarder).

Never imports torch: torch only runs inside the processes launched on the emulated nodes.
"""

from rtmodel_emulation.cluster import EmulatedCluster, LaunchResult
from rtmodel_emulation.errors import EmulationConfigError, EmulationError, EmulationUnavailable, LaunchError
from rtmodel_emulation.netns import available, cleanup_stale

__all__ = ["EmulatedCluster", "LaunchResult", "EmulationConfigError", "EmulationError", "EmulationUnavailable",
           "LaunchError", "available", "cleanup_stale"]
