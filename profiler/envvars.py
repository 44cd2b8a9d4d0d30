"""Environment variables the launcher and the ranks agree on: defined once in rtmodel_util.processes
(validation and the emulator use them too); re-exported here for the profiler's modules."""

from rtmodel_util.processes import (  # noqa: F401
    DEBUG_ENV,
    DEVICE_INDEX_ENV,
    ERROR_DIR_ENV,
    NODE_NAME_ENV,
    RANKS_PER_NODE_ENV,
)
