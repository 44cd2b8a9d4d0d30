"""The one error hierarchy of rtmodel; every package's errors derive from these two.

Why two kinds: a user's mistake (bad flag, missing or corrupt file, a shape that cannot work) is
answered with one line and exit 2; a failure at run time (a rank died, `tc` refused) is one line and
exit 1. Anything else is a bug and keeps its traceback. The shell (`rtmodel_cli`) catches only these
and `OSError`; `RTMODEL_DEBUG=1` adds the traceback to every one of them.

`UserError` is also a `ValueError` so that library callers who catch `ValueError` keep working.
"""

from __future__ import annotations

DEBUG_ENV = "RTMODEL_DEBUG"  # "1": print the traceback of every error, user errors included
# OSErrors about a path the user gave are user mistakes (exit 2); others (a full disk, ...) are run failures.
USER_OS_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


class RtmodelError(Exception):
    """Base of every error rtmodel raises on purpose; `exit_code` is what the command line exits with."""

    exit_code = 1

    def message_for(self, show_name) -> str:
        """The message with each named input shown as `show_name(name)` (the shell passes flags)."""
        return str(self)


class UserError(RtmodelError, ValueError):
    """The input cannot work: the message names the problem and what is valid (exit 2)."""

    exit_code = 2


class RunFailure(RtmodelError):
    """A job failed while running (a rank, a subprocess, the operating system); exit 1."""

    exit_code = 1


class InvalidValue(UserError):
    """A named input outside its allowed values. `name` is the input's name in the model
    (`gpus_per_node`); the shell shows it as the flag that set it (`--gpus-per-node`)."""

    def __init__(self, name: str, requirement: str, value):
        self.name, self.requirement, self.value = name, requirement, value
        super().__init__(f"{name} must be {requirement}, got {value!r}")

    def message_for(self, show_name) -> str:
        return f"{show_name(self.name)} must be {self.requirement}, got {self.value!r}"


class InvalidCombination(UserError):
    """Inputs that are valid alone but not together. `template` names each input as {name}; the
    message shows it as "name value" (the shell: "--flag value")."""

    def __init__(self, template: str, **values):
        self.template, self.values = template, values
        super().__init__(self.message_for(lambda name: name))

    def message_for(self, show_name) -> str:
        return self.template.format(**{k: f"{show_name(k)} {v}" for k, v in self.values.items()})


class RankFailure(RunFailure):
    """One rank of a distributed job (profile or validation) failed; the message names the rank and
    the phase it was in, so a user knows which machine to look at."""

    def __init__(self, rank: int | None, phase: str, detail: str):
        self.rank, self.phase, self.detail = rank, phase, detail
        who = f"rank {rank}" if rank is not None else "the job"
        super().__init__(f"{who} failed during {phase}: {detail}")
