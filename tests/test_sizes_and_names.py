"""Issue 26 (items 1, 2, 3, 7, 8): sizes from outside bounded before anything is allocated, settings LoadGen
would replace refused, names that would become paths out of their folder refused, reports that never
replace a file they did not write. Each bad input is one line, a non-zero exit and nothing left behind.

The cases that could exhaust memory run the CLI in a subprocess under an address-space limit of
ULIMIT_KB (`ulimit -v`): a normal small run needs about 0.6 GB of it (null cards) to 1.5 GB (onnxruntime,
ResNet50, 48 samples; measured on the 2-core CI machine), so 3 GB leaves a 2x margin and is far below
what the unbounded cases took (23 GB, 5 GB, 3 GB before the kernel's kill).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import appliance
from sysfs_fixtures import Machine, write_machine

from harness.core.errors import ApplianceError
from harness.run.loadgen_settings import check_conf_text

ULIMIT_KB = 3_000_000  # the bound every size-from-outside case runs under (docs/faults.md says it too)
CPU = "sys/devices/system/cpu"


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ULIMIT_KB * 1024, ULIMIT_KB * 1024))


def limited(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess under ULIMIT_KB of address space (a crash there cannot take pytest down)."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=_limit, timeout=timeout)


def one_line(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == code, (proc.returncode, err[-2000:])
    assert len(err.splitlines()) == 1 and "internal error" not in err and "Traceback" not in err, err
    return err


def left_behind(tree: Path) -> list[Path]:
    """Run folders, claims and staging folders under a results tree (the empty folders above them aside)."""
    return [p for p in tree.rglob("*") if p.name.startswith((".", "run_", "accuracy")) or p.is_file()]


# item 1 ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("results")
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--backend", "null", "--duration-ms", 300,
                     "-q") == 0
    return results


def test_report_never_writes_into_a_run_folder(one_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = next(one_run.rglob("run_1"))
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    for target in (run / "mlperf_log_detail.txt", run / "report.html", run / "sub" / "report.html"):
        assert appliance("report", one_run, "-o", target) == 2
        err = capsys.readouterr().err
        assert f"the run folder {run}" in err and len(err.strip().splitlines()) == 1, err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # not a byte changed, no PNG added


def test_report_never_replaces_a_file_it_did_not_write(one_run: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "notes.html"
    mine.write_text("my notes")
    assert appliance("report", one_run, "-o", mine) == 2
    assert "was not written by appliance report" in capsys.readouterr().err and mine.read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.html"]

    out = tmp_path / "report.html"
    assert appliance("report", one_run, "-o", out) == 0
    pngs = sorted(tmp_path.glob("report-*.png"))
    assert pngs
    assert appliance("report", one_run, "-o", out) == 0  # its own files: written again
    pngs[0].write_bytes(b"a photo of mine")
    out.unlink()
    assert appliance("report", one_run, "-o", out) == 2
    assert f"{pngs[0]} exists and was not written by appliance report" in capsys.readouterr().err
    assert pngs[0].read_bytes() == b"a photo of mine" and not out.exists()  # nothing written at all


# item 2 and beyond: sizes against memory, under ULIMIT_KB -------------------------------------------------

@pytest.mark.parametrize("args", [
    ("--batch-size", 100000),                                           # onnxruntime: 181 GB of buffers
    ("--batch-size", 100000, "--cards", "simulate:cloud-ai-100:1"),     # uint8 staging: 46 GB
    ("--count", 10**11),                                                # LoadGen's Offline samples: 16 TB
    ("-s", "Server", "--target-qps", 1e30),                             # Server queries
    ("-s", "SingleStream", "--count", 10**12),
])
def test_sizes_beyond_memory_are_refused_before_anything_starts(args: tuple[object, ...], data_dir: Path,
                                                                 tmp_path: Path) -> None:
    results = tmp_path / "results"
    err = one_line(limited("run", "--data-dir", data_dir, "--results", results, "--duration-ms", 500, "-q", *args))
    assert "GB" in err and "is free" in err, err
    assert not results.exists() or not left_behind(results)


def test_a_large_batch_that_fits_runs_in_bounded_memory(data_dir: Path, tmp_path: Path) -> None:
    """Null cards read no samples: batch 100000 needs 0.8 GB of outputs, and runs (the responder once
    kept a list per batch size, batch^2 / 2 entries, and the calibration probe sized itself to a null
    card's 1e10 samples/s)."""
    proc = limited("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--backend", "null",
                   "--batch-size", 100000, "--duration-ms", 300, "-q")
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_tune_refuses_a_batch_beyond_memory_before_timing(data_dir: Path, tmp_path: Path) -> None:
    err = one_line(limited("tune", "--data-dir", data_dir, "--batch-sizes", "1,100000", "--backends", "onnxruntime",
                           "-o", tmp_path / "t.json", "-q"))
    assert "batch size 100000" in err and "--batch-sizes" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("rel", [f"{CPU}/online", f"{CPU}/cpu0/cache/index3/shared_cpu_list",
                                 f"{CPU}/cpu1/topology/core_cpus_list"])
def test_huge_sysfs_cpu_lists_are_refused_by_kernel_max(rel: str, tmp_path: Path) -> None:
    root = write_machine(tmp_path / "host", Machine(sockets=1, cores_per_socket=4, cores_per_l3=4))
    (root / rel).write_text("0-999999999\n")
    err = one_line(limited("topology", "detect", "--sysfs-root", root))
    assert f"CPU 999999999 is beyond kernel_max 8191 in {root / CPU / 'kernel_max'}" in err
    (root / CPU / "kernel_max").unlink()  # no kernel_max: the fixed bound, and the message says so
    err = one_line(limited("topology", "detect", "--sysfs-root", root))
    assert "beyond the fixed bound 8191" in err


def test_a_card_map_naming_a_billion_cpus_is_refused(data_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "map.yaml"
    assert appliance("topology", "detect", "--format", "yaml", "-o", spec) == 0
    big = tmp_path / "big.yaml"
    big.write_text(spec.read_text().replace("cpus: ", "cpus: 0-999999999 #", 1))
    results = tmp_path / "results"
    err = one_line(limited("run", "--data-dir", data_dir, "--results", results, "--cards", big, "--backend", "null",
                           "--duration-ms", 300, "-q"))
    assert "CPU 999999999 is beyond kernel_max" in err
    assert not results.exists()


# items 3 and 7: user.conf values as LoadGen reads them ----------------------------------------------------

@pytest.mark.parametrize(("line", "says"), [
    ("*.Offline.min_query_count = -5", "min_query_count = -5 is out of range"),   # was a segfault (139)
    ("resnet50.Server.target_qps = -10", "target_qps = -10 is out of range"),      # LoadGen used 1, exit 0
    ("resnet50.Server.target_qps = nan", "target_qps = nan: not a finite number"),
    ("resnet50.Offline.target_qps = inf", "target_qps = inf: not a finite number"),
    ("resnet50.Offline.min_duration = 1e5", "LoadGen (strtoull) would read '1e5' as 1"),
    ("resnet50.Offline.min_query_count = 010", "octal"),
    ("resnet50.Server.target_latency = 15.5", "would read '15.5' as 15"),
    ("resnet50.Offline.target_qps = 100 # fast", "no comment after a value"),
    ("resnet50.Offline.target_qps=100", "spaces around '='"),                      # LoadGen ignored it
    ("#resnet50 Offline", "a lone '#'"),
    ("*.*.target_latency_percentile = 0", "target_latency_percentile = 0 is out of range"),
    ("*.*.performance_sample_count_override = 100000", "more than the 48 samples prepared"),
])
def test_bad_user_conf_values_are_refused_before_the_run(line: str, says: str, data_dir: Path,
                                                         tmp_path: Path) -> None:
    conf = tmp_path / "user.conf"
    conf.write_text(f"# mine\n{line}\n")
    results = tmp_path / "results"
    err = one_line(limited("run", "--data-dir", data_dir, "--results", results, "--user-conf", conf,
                           "--duration-ms", 300, "--backend", "null", "-q", "-s", "Server" if "Server" in line
                           else "Offline"))
    assert says in err, err
    assert not results.exists() or not left_behind(results)


def test_huge_target_qps_in_a_user_conf_is_refused_not_estimated(data_dir: Path, tmp_path: Path) -> None:
    """1e30 once printed "LoadGen will run about 1.08e29 s" and started."""
    conf = tmp_path / "user.conf"
    conf.write_text("resnet50.Offline.target_qps = 1e30\n")
    err = one_line(limited("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--user-conf", conf,
                           "--duration-ms", 300, "--backend", "null", "-q"))
    assert "LoadGen would schedule one query of 3.3e+29 samples" in err and "will run about" not in err


@pytest.mark.parametrize(("option", "value"), [("--target-qps", "nan"), ("--target-qps", "inf"),
                                               ("--duration-ms", 10**12)])
def test_bad_option_values_are_one_line(option: str, value: object, data_dir: Path, tmp_path: Path) -> None:
    err = one_line(limited("run", "--data-dir", data_dir, "--results", tmp_path / "r", option, value, "-q",
                           timeout=120))
    assert err.startswith(f"appliance: error: {option}"), err
    assert not (tmp_path / "r").exists()


def test_a_loadgen_error_record_fails_the_run(data_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Settings each valid alone that LoadGen refuses together: it logs error_invalid_test_settings and
    runs anyway; the run is a failure, named, kept as run_1.incomplete."""
    conf = tmp_path / "user.conf"
    conf.write_text("resnet50.Offline.performance_issue_unique = 1\nresnet50.Offline.performance_issue_same = 1\n")
    results = tmp_path / "results"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--user-conf", conf, "--backend", "null",
                     "--duration-ms", 300, "-q") == 2
    err = capsys.readouterr().err.strip()
    assert "error_invalid_test_settings" in err and "run_1.incomplete" in err and len(err.splitlines()) == 1, err
    kept = next(results.rglob("run_1.incomplete"))
    assert "error_invalid_test_settings" in (kept / "INCOMPLETE.txt").read_text()
    assert not list(results.rglob("run_1")) and not list(results.rglob(".*"))


# item 8: names that become paths --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../escaped", "..", ".hidden", "a/b", "nul\0byte", "x" * 300, ""])
def test_system_names_never_leave_the_results_folder(name: str, data_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "inner" / "results"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--system", name, "--backend", "null",
                     "--duration-ms", 300, "-q") == 2
    err = capsys.readouterr().err
    assert "must be a plain folder name" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == []


def test_a_tuned_records_user_conf_name_stays_beside_it(data_dir: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "tuned.json"
    choice = {"precision": "fp32", "backend": "onnxruntime", "batch_size": 8, "requests": 1, "why": "test",
              "cards": "auto"}
    record.write_text(json.dumps({
        "format": 4, "benchmark": "resnet50", "layouts": ["auto"], "created_utc": "", "host": {}, "method": "",
        "user_conf": "../../etc/user.conf", "precisions": {}, "measured": [], "chosen": {"Offline": choice},
        "by_precision": {"fp32": {"Offline": choice}}}))
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--tuned", record, "-q") == 2
    assert "user_conf '../../etc/user.conf' must be a plain folder name" in capsys.readouterr().err
    bad = json.loads(record.read_text())
    bad["user_conf"], bad["chosen"]["Offline"]["batch_size"] = "t.user.conf", -8
    record.write_text(json.dumps(bad))
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r", "--tuned", record, "-q") == 2
    assert "is a malformed tune record: chosen.Offline.batch_size is -8, outside 1..1048576" in capsys.readouterr().err


def test_conf_check_accepts_what_the_appliance_writes() -> None:
    check_conf_text("# derived\n*.Offline.target_qps = 12.5\nresnet50.Server.target_latency = 15\n", "x")
    with pytest.raises(ApplianceError, match="line 2"):
        check_conf_text("# a\nresnet50.Offline.min_query_count = -1\n", "x")
