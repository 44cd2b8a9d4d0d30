"""Errors of the emulated cluster, under rtmodel's one hierarchy: user mistakes exit 2, run problems 1."""

from __future__ import annotations

from runtime_model.core.errors import RunFailure, UserError


class EmulationError(RunFailure):
    """Something went wrong bringing up, using or tearing down an emulated cluster."""


class EmulationConfigError(UserError):
    """A user-supplied setting is invalid."""


class EmulationUnavailable(EmulationError):
    """This machine cannot emulate a cluster (not root, no netns/TUN/tc); the message says why."""


class LaunchError(EmulationError):
    """A command launched on the emulated nodes failed or timed out; the message has the stderr tail."""
