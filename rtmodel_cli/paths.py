"""Output-path checks now live in rtmodel_util.files (one rule for every stage); this name stays for
the shell's own callers."""

from rtmodel_util.files import OutputPathError, check_output_path

__all__ = ["OutputPathError", "check_output_path"]
