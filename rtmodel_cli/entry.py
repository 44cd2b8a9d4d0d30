"""The `rtmodel` executable's entry point: the app is imported inside it, so a Ctrl-C while the imports
run (a second or more on a loaded machine) ends as one line, as it does anywhere later, not a traceback.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.stdout is None:  # started with stdout closed (`rtmodel advise >&-`): nothing could be printed
        sys.stderr.write("error: standard output is closed; redirect it (e.g. > out.txt or > /dev/null)\n")
        sys.exit(2)
    try:
        from runtime_model.core.blas_threads import one_blas_thread

        with one_blas_thread():
            import numpy  # noqa: F401  (its BLAS reads the thread count as it loads: blas_threads)
        from rtmodel_cli.app import main as run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("\nerror: interrupted\n")
        sys.exit(130)
