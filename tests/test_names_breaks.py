"""Issue 41, names: bytes that are not UTF-8, paths longer than the system takes and control characters in
names, each as the trial ran it. A name is refused in one line or printed escaped: never an internal error,
never a line of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from submission_fixtures import make_tree
from sysfs_fixtures import Machine, write_machine

FORGED = "PASS v6.1 (0 problems)"


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *(a if isinstance(a, bytes) else str(a)
                                                                     for a in args)],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd="/")


def test_a_results_name_with_byte_ff_is_one_line(data_dir: Path, tmp_path: Path) -> None:
    """A results name with byte 0xFF: LoadGen's `FromConfig(): incompatible function arguments`."""
    proc = _cli("run", "--data-dir", data_dir, "--results", os.fsencode(tmp_path) + b"/r\xff", "--backend", "null",
                "--duration-ms", 300, "-q")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"appliance: error: the argument {tmp_path}/r\\xff is not UTF-8 text (byte 0xFF); name "
                           f"files, folders and systems in UTF-8\n")
    assert list(tmp_path.iterdir()) == []


def test_a_system_name_with_byte_ff_is_one_line(data_dir: Path, tmp_path: Path) -> None:
    """A system name with byte 0xFF: UnicodeEncodeError."""
    proc = _cli("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--system", b"box\xff", "--backend",
                "null", "--duration-ms", 300, "-q")
    assert proc.returncode == 2, proc.stderr
    assert "the argument box\\xff is not UTF-8 text (byte 0xFF)" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and list(tmp_path.iterdir()) == []


def test_a_4060_byte_results_path_is_one_line(data_dir: Path, tmp_path: Path) -> None:
    """A 4,060-byte `--results` (short names, many levels): `Errno 36` as an internal error, folders left."""
    results = tmp_path.joinpath(*["y" * 99] * ((4060 - len(str(tmp_path))) // 100))
    proc = _cli("run", "--data-dir", data_dir, "--results", results, "--backend", "null", "--duration-ms", 300, "-q")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "is possible here" in line or "are possible here" in line, line
    assert "internal error" not in line and "Errno 36" not in line
    assert list(tmp_path.iterdir()) == []


def test_a_folder_named_with_newlines_forges_no_line_of_check(tmp_path: Path) -> None:
    """A folder name with newlines made a failing `submission check` print 8 forged "PASS v6.1 (0 problems)"
    lines."""
    sub = make_tree(tmp_path / "t", "v6.1")
    (sub / "results" / ("x\n" + f"\n{FORGED}" * 8)).mkdir()
    proc = _cli("submission", "check", tmp_path / "t")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert not any(line.startswith("PASS") for line in lines), proc.stdout
    assert lines[-1].startswith("FAIL") and f"x\\n\\n{FORGED}" in proc.stdout


def test_a_pci_folder_named_with_a_newline_forges_no_line_of_topology(tmp_path: Path) -> None:
    """A PCI address with a newline in `topology`: its own line in the map."""
    root = write_machine(tmp_path / "copy", Machine(sockets=1, cores_per_socket=2))
    forged = root / "sys" / "bus" / "pci" / "devices" / "0000:00:01.0\nGPU 7: forged"
    forged.mkdir(parents=True)
    for name, value in (("class", "0x030200"), ("vendor", "0x10de"), ("device", "0x2330")):
        (forged / name).write_text(value + "\n")
    proc = _cli("topology", "detect", "--sysfs-root", root, "--format", "table")
    out = proc.stdout + proc.stderr
    assert not any(line.startswith("GPU 7: forged") for line in out.splitlines()), out
    assert "internal error" not in out
