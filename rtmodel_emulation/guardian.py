"""The emulated cluster's guardian: its nodes' commands and namespaces go when its owner dies, however.

Why: a SIGKILL gives the owner no chance to tear down, and the node commands (torchrun, its ranks) would
run on in their namespaces until someone ran `emulate cleanup`. The guardian is a process in its own
session that waits on a pipe only the owner holds open; the kernel closes that pipe however the owner
ends. End of input without b"done" means the owner died: the guardian kills everything inside each
namespace and deletes it (netns.delete_namespace), as the owner's own teardown would have.

    python -P -m rtmodel_emulation.guardian NS [NS ...]   # started by EmulatedCluster.up(), not by hand
"""

from __future__ import annotations

import os
import subprocess
import sys

DONE = b"done"


def start(namespaces: list[str], python: str, pythonpath: str) -> subprocess.Popen:
    """The guardian of `namespaces` (they need not exist yet: missing ones are skipped)."""
    return subprocess.Popen(
        [python, "-P", "-m", "rtmodel_emulation.guardian", *namespaces],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=pythonpath),
        start_new_session=True,  # a Ctrl-C to the terminal's process group does not stop it first
    )


def release(guardian: subprocess.Popen | None) -> None:
    """The owner tore down itself: the guardian ends without touching anything."""
    if guardian is None:
        return
    try:
        guardian.stdin.write(DONE)
        guardian.stdin.close()
    except OSError:
        pass
    guardian.wait()


def main(namespaces: list[str]) -> None:
    if sys.stdin.buffer.read() == DONE:
        return
    from rtmodel_emulation import netns

    for name in namespaces:
        try:
            netns.delete_namespace(name)  # its processes first (SIGTERM, then SIGKILL), then the namespace
        except Exception:  # noqa: BLE001 - nobody is left to tell; go on with the next namespace
            continue


if __name__ == "__main__":
    main(sys.argv[1:])
