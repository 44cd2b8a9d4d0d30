"""The suite collects where torch is not installed (the model and the shell install without the cluster
extra): every test module that needs torch skips itself (pytest.importorskip) instead of stopping the
collection of all the others."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a second pytest collects the whole suite: about 10 s

ROOT = Path(__file__).parent.parent
BLOCKED = ("torch", "torchvision", "decent_dp")  # None in sys.modules: `import torch` raises ImportError
COLLECT = (
    "import sys\n"
    f"for name in {BLOCKED!r}:\n"
    "    sys.modules[name] = None\n"
    "import pytest\n"
    "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', 'tests/']))\n"
)


def test_pytest_collects_every_module_without_torch():
    done = subprocess.run(
        [sys.executable, "-c", COLLECT], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "error" not in done.stdout.splitlines()[-1].lower()
