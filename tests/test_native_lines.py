"""onnxruntime's and CUDA's own log lines go to the run's native.log, off the terminal, and a real error is never
hidden (issue 34: 3,410 harmless red `[cudnn_frontend] Error` lines on VALID H100 runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import appliance

from harness.core.native_lines import Route, harmless

HARMLESS = (b"\x1b[1;31m2026-11-27 02:16:47.990357456 [E:onnxruntime:Default, cudnn_fe_call.cc:39] "
            b"[cudnn_frontend] Error: No execution plans support the graph.\x1b[m\n")
REAL = (b"\x1b[1;31m2026-11-27 02:16:47.990357456 [E:onnxruntime:Default, cuda_call.cc:148 CudaCall] CUDA failure "
        b"700: an illegal memory access was encountered ; GPU=0\x1b[m\n")
TWICE = (b"\x1b[0;93m2026-11-27 02:16:40.1 [W:onnxruntime:, session_options.cc:12 AddConfigEntry] Config with key "
         b"[session.intra_op.allow_spinning] already exists with value [1]. It will be overwritten\x1b[m\n")


def test_the_kinds():
    assert harmless(HARMLESS) and harmless(TWICE)
    assert not harmless(REAL)
    assert not harmless(b"[cudnn_frontend] Error: No execution plans support the graph\n")  # not in the log format


def test_a_child_writing_native_lines_under_the_route(tmp_path):
    """A real process: native lines on fd 2 from the process (as C++ code writes them), its own lines, a progress
    bar with carriage returns, then an abort: the terminal gets the bar, the own line, the real error and the
    abort's last words; the log gets the three native lines; nothing harmless reaches the terminal."""
    log = tmp_path / "native.log"
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from harness.core.native_lines import Route
        Route(Path({str(log)!r})).start()
        os.write(2, {HARMLESS!r} * 3)
        sys.stderr.write("\\rloading 50%"); sys.stderr.flush(); sys.stderr.write("\\rloading 100%\\n")
        os.write(2, {TWICE!r})
        print("appliance: a line of its own", file=sys.stderr, flush=True)
        os.write(2, {REAL!r})
        os.write(2, b"terminate called after throwing an instance of 'onnxruntime::OnnxRuntimeException'\\n")
        os.abort()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode < 0  # killed by SIGABRT: the filter still drained the pipe
    err = done.stderr
    assert b"No execution plans" not in err and b"already exists" not in err
    assert b"CUDA failure 700" in err and b"terminate called" in err and b"a line of its own" in err
    assert b"\rloading 50%\rloading 100%\n" in err
    kept = log.read_bytes().splitlines()
    assert len(kept) == 5 and all(b"\x1b" not in line for line in kept)


def test_route_counts_and_keeps(tmp_path):
    route = Route(tmp_path / "t.log").start()
    try:
        os.write(2, HARMLESS + REAL)
    finally:
        route.stop()
    assert (route.lines, route.shown) == (2, 1)
    folder = tmp_path / "run"
    folder.mkdir()
    assert route.keep(folder) == {"file": "native.log", "lines": 2, "shown_on_terminal": 1}
    assert (folder / "native.log").is_file() and not (tmp_path / "t.log").exists()
    assert route.keep(folder) is None  # once


def test_a_run_records_its_native_log(data_dir, tmp_path, capfd):
    """A real onnxruntime run goes through the route: the manifest says what native.log holds (None: no line),
    and no harmless native line reaches the terminal."""
    rc = appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--backend", "onnxruntime",
                   "--duration-ms", 200, "--count", 8, "--json", "-q")
    out, err = capfd.readouterr()
    assert rc == 0, err
    run = Path(json.loads(out)[0]["path"])
    kept = json.loads((run / "manifest.json").read_text())["native_log"]
    assert kept is None or (kept["file"] == "native.log" and (run / "native.log").is_file())
    assert not any(harmless(line) for line in err.encode().splitlines())
