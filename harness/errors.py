"""Errors the user can act on: the CLI prints them as one line, without a traceback."""

from __future__ import annotations


class ApplianceError(Exception):
    """A problem the user can fix; the message says what is wrong and what to do."""

    exit_code = 2


class DataError(ApplianceError):
    """Missing, corrupt or mismatching data, model or configuration."""


class Interrupted(ApplianceError):
    """The user pressed Ctrl-C; what was done so far is kept and marked incomplete."""

    exit_code = 130
