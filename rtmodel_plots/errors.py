"""The one error the figures raise: a user's mistake in a plot request, under rtmodel's hierarchy."""

from __future__ import annotations

from runtime_model.core.errors import UserError


class PlotError(UserError):
    """A user-facing mistake in a plot request (bad format, empty input); the CLI prints it on one line."""
