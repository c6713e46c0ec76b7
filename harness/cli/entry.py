"""The `appliance` command's first instructions: the stop signals are handled before anything heavy is imported.

Importing the CLI takes numpy, click, yaml, onnx and more (0.3-0.5 s): Ctrl-C in that time printed Python's
30-line KeyboardInterrupt traceback, and SIGTERM / SIGHUP killed the process silently. Nothing has been made
yet then, so a stop in that time is one line and the shell's exit code at once; `main` (harness.cli.main)
installs the command's own policy (errors.interrupts_raised) as it starts. This module imports nothing of
the package before that.
"""

from __future__ import annotations

import os
import signal
import sys


def _before_start(signum: int, _frame: object) -> None:
    how = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
    os.write(2, f"appliance: {how} before it started; nothing was done\n".encode())
    os._exit(128 + signum)


def early_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP end the process in one line until the command's own handlers replace these
    (under `nohup`, SIGHUP stays ignored)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if not (sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN):
            signal.signal(sig, _before_start)


def main() -> int:
    early_signals()
    from harness.cli.main import main as command  # the heavy imports, under the handlers above

    code = command()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # done: the exit is not "before it started"
        signal.signal(sig, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(main())
