"""rtmodel's process loads its BLAS with one thread, and leaves the environment it hands on as it was."""

import os
import subprocess
import sys

from runtime_model.core.blas_threads import BLAS_THREADS_ENV, one_blas_thread


def test_one_thread_is_asked_for_inside_and_the_variable_is_gone_after(monkeypatch):
    monkeypatch.delenv(BLAS_THREADS_ENV, raising=False)
    with one_blas_thread():
        assert os.environ[BLAS_THREADS_ENV] == "1"
    assert BLAS_THREADS_ENV not in os.environ


def test_a_users_own_thread_count_wins_and_stays(monkeypatch):
    monkeypatch.setenv(BLAS_THREADS_ENV, "8")
    with one_blas_thread():
        assert os.environ[BLAS_THREADS_ENV] == "8"
    assert os.environ[BLAS_THREADS_ENV] == "8"


def test_the_variable_is_removed_even_when_the_import_fails(monkeypatch):
    monkeypatch.delenv(BLAS_THREADS_ENV, raising=False)
    try:
        with one_blas_thread():
            raise ImportError("no such module")
    except ImportError:
        pass
    assert BLAS_THREADS_ENV not in os.environ


def test_the_rtmodel_process_runs_numpy_on_one_blas_thread_and_hands_on_no_variable():
    """The entry point imports numpy inside the block: after `rtmodel --version` the process's BLAS has
    one thread (the process has no other) and its environment has no variable it did not have."""
    code = (
        "import os, sys, io, contextlib\n"
        "sys.argv = ['rtmodel', '--version']\n"
        "from rtmodel_cli.entry import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        f"print(os.environ.get({BLAS_THREADS_ENV!r}), len(os.listdir('/proc/self/task')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != BLAS_THREADS_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    variable, threads = out.stdout.split()
    assert variable == "None"
    assert int(threads) == 1
