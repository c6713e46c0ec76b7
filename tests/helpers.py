"""Ways to call the appliance as a user would, shared by the tests."""

from __future__ import annotations

import subprocess
import sys

from harness.cli import main

SAMPLES = 48  # size of the session's prepared synthetic dataset


def appliance(*args: object) -> int:
    """Run the CLI in-process; returns the exit code."""
    return main([str(a) for a in args])


def appliance_subprocess(*args: object, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, **kw)
