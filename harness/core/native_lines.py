"""Native libraries' log lines off the terminal and into a file, without hiding a real error.

onnxruntime and cuDNN write straight to file descriptor 2: on the first H100 run, 3,410 red lines
`[E:onnxruntime:… cudnn_fe_call.cc:39] [cudnn_frontend] Error: No execution plans support the graph.` came
during runs that were VALID (onnxruntime tries cuDNN's fused kernels first and falls back), with warnings
about a session config key set twice. While a run goes, `Route` points fd 2 at a pipe read by a small
filter *process* (python -c, this module's `filter_stream`): a line in a native library's log format goes to
the log file; one of the known-harmless kinds (`HARMLESS`) stays off the terminal, every other line is
shown as well (a CUDA failure, an illegal address, `terminate called`). Everything else written to fd 2 (the
appliance's own lines, progress bars with their carriage returns) passes through at once, byte for byte. A
process, not a thread: if the appliance dies (abort), the filter still drains the pipe, so the last words
reach the terminal.

What the libraries let us stop at the source is stopped before they load (`quiet_at_source`): cuDNN 9's own
logging (CUDNN_LOGLEVEL_DBG, which replaces cuDNN 8's CUDNN_LOGINFO_DBG / LOGWARN / LOGERR) and the cuDNN
frontend's (CUDNN_FRONTEND_LOG_INFO) off unless the user set them, onnxruntime's default logger at ERROR (its
warnings, e.g. the plugin-EP lookup, are not written at all). The frontend's "No execution plans support the
graph" comes through onnxruntime's ERROR severity (cudnn_fe_call.cc), which must stay on for real errors: it is
filtered. Every command that starts a session routes fd 2 (`routed`): run, tune, prepare, tools/gpu_baseline.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.core import environment, inbound
from harness.core.outbound import move_into_place

__all__ = ["HARMLESS", "ORT_ERROR", "QUIET_ENV", "Route", "filter_stream", "harmless", "native", "quiet_at_source",
           "routed"]

# a native log line starts with a colour escape or onnxruntime's timestamp
_NATIVE_START = re.compile(rb"^(?:\x1b\[[0-9;]*m)?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[[VIWEF]:")
# the kinds known to be harmless on a run that completes (each seen on the H100 run; issue 34)
HARMLESS = (
    rb"\[cudnn_frontend\] Error: No execution plans support the graph",  # fused-kernel attempt, then fallback
    rb"already exists .* will be overwritten",  # a session config key set twice
    rb"No registered plugin EP device found",  # the plugin-EP lookup before the classic CUDA provider
    rb"Some nodes were not assigned to the preferred execution providers",
    rb"Memcpy nodes are added to the graph",
)
_HARMLESS = re.compile(b"|".join(HARMLESS))
_ESCAPES = re.compile(rb"\x1b\[[0-9;]*m")


QUIET_ENV = {"CUDNN_LOGLEVEL_DBG": "0", "CUDNN_FRONTEND_LOG_INFO": "0"}  # cuDNN 9, cuDNN frontend: no own log
ORT_ERROR = 3  # onnxruntime's severity ERROR: warnings and below never written


def quiet_at_source() -> None:
    """The libraries' own logging off where they allow it (see the module's docstring); a value the user set
    stays. Before the first session, and before cuDNN loads (it reads its variables once)."""
    for key, value in QUIET_ENV.items():
        if not environment.present(key):
            environment.assign(key, value)
    import onnxruntime

    onnxruntime.set_default_logger_severity(ORT_ERROR)


@contextlib.contextmanager
def routed(folder: Path | None, name: str, echo: Callable[[str], None]) -> Iterator[Route]:
    """fd 2 through the filter while a command's sessions run (`quiet_at_source` first); the native lines end in
    `folder`/`name` (None, or no line: dropped), and one terminal line says where and how many."""
    quiet_at_source()
    route = Route(Path(tempfile.gettempdir()) / f"appliance-{os.getpid()}-{name}", file=name).start()
    try:
        yield route
    finally:
        kept = route.keep(folder if folder is not None and folder.is_dir() else None)
        if kept and folder is not None:
            echo(route.summary(str(folder / name)))


def harmless(line: bytes) -> bool:
    """A native log line of a kind known to be harmless (kept in the log file, off the terminal)."""
    return bool(_NATIVE_START.match(line)) and bool(_HARMLESS.search(line))


def native(line: bytes) -> bool:
    """A line in a native library's log format (onnxruntime's timestamp and severity, maybe coloured)."""
    return bool(_NATIVE_START.match(line))


def filter_stream(src: int, terminal: int, log_path: str) -> None:
    """Copy `src` to `terminal` until EOF, native log lines (whole lines) to `log_path` too, harmless ones
    to the log only. A line that starts as a native one may (a colour escape or a digit) is held until its end;
    any other byte passes at once (a progress bar's carriage returns too)."""
    with open(log_path, "ab") as log:
        held = b""  # the start of a line that may be native, until its end comes
        line_start = True
        while chunk := os.read(src, 65536):
            data, held = held + chunk, b""
            while data:
                end = data.find(b"\n") + 1 or len(data)
                part, data = data[:end], data[end:]
                whole = part.endswith(b"\n")
                if line_start and (part[:1] == b"\x1b" or part[:1].isdigit()):  # may be native: to its end
                    if not whole:
                        held = part  # the rest of `data` is empty: `part` ran to its end
                        break
                    if native(part):
                        log.write(_ESCAPES.sub(b"", part))
                        log.flush()
                        if harmless(part):
                            continue
                os.write(terminal, part)
                line_start = whole
        if held:  # a last line without its end
            os.write(terminal, held)


class Route:
    """fd 2 through the filter process from `start` to `stop`; then `keep` moves the log into a run folder.
    Not `enabled`: nothing is changed and nothing is kept. Both ends are idempotent."""

    FILE = "native.log"

    def __init__(self, log_path: Path, enabled: bool = True, file: str = FILE) -> None:
        self.path, self.enabled, self.file = log_path, enabled, file
        self.lines = self.shown = 0
        self._saved: int | None = None
        self._child: subprocess.Popen[bytes] | None = None

    def start(self) -> Route:
        if not self.enabled or self._child is not None:
            return self
        sys.stderr.flush()
        saved = os.dup(2)
        read, write = os.pipe()
        code = "import sys; from harness.core.native_lines import filter_stream; filter_stream(0, 1, sys.argv[1])"
        # its own session: a Ctrl-C is the appliance's to handle; the filter ends when the pipe closes
        self._child = subprocess.Popen([sys.executable, "-c", code, str(self.path)], stdin=read, stdout=saved,
                                       close_fds=True, start_new_session=True)
        os.close(read)
        os.dup2(write, 2)
        os.close(write)
        self._saved = saved
        return self

    def stop(self) -> None:
        """fd 2 back to the terminal; wait for the filter to drain the pipe, then count the log's lines."""
        if self._saved is None or self._child is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._child.wait(timeout=30)  # ends once every process that inherited fd 2 has closed it
        try:
            data = inbound.read_bytes(self.path, inbound.ARRAY)
        except (OSError, inbound.Refused):
            return
        lines = data.splitlines()
        self.lines = len(lines)
        self.shown = sum(not harmless(line) for line in lines)

    def keep(self, folder: Path | None) -> dict[str, object] | None:
        """Stop; move the log into `folder` as native.log if it holds a line (None: drop it); what the
        manifest records of it."""
        self.stop()
        if not self.enabled:
            return None
        self.enabled = False  # kept or dropped once
        if folder is None or not self.lines:
            self.path.unlink(missing_ok=True)
            return None
        move_into_place(self.path, folder / self.file)
        return {"file": self.file, "lines": self.lines, "shown_on_terminal": self.shown}

    def summary(self, where: str) -> str:
        """The one terminal line: how many native lines, where they are, how many were also shown."""
        shown = f"; {self.shown} of them shown above" if self.shown else ", each of a kind known to be harmless"
        return f"{self.lines} onnxruntime / CUDA log line(s) kept in {where}{shown}"
