"""Small hand-written submission trees in the shapes real published trees have (no one's logs copied).

`make_tree()` writes a tree the round's official checker accepts, in the round's layout: pre-v6.0 trees keep
`measurements/`, `compliance/`, `code/` beside `results/`; v6.0+ trees fold them under `results/`. The real
variants are options: lowercase scenario folders, a retinanet accuracy.txt that starts with pycocotools'
printout, optional system-JSON fields left empty (always, as real trees do).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harness.audit.submission.rounds import ROUNDS, SYSTEM_MEANINGFUL, SYSTEM_REQUIRED, BenchmarkRules

METRIC_VALUE = {"Offline": 1234.5, "Server": 1000.0, "SingleStream": 812345, "MultiStream": 2345678}
SPQ = {"Offline": 24576 * 2, "Server": 1, "SingleStream": 1, "MultiStream": 8}
PYCOCO = """loading annotations into memory...
Done (t=0.52s)
creating index...
index created!
Loading and preparing results...
DONE (t=3.10s)
creating index...
index created!
Running per image evaluation...
Evaluate annotation type *bbox*
DONE (t=60.11s).
Accumulating evaluation results...
DONE (t=12.90s).
 Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.376
 Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 0.527
 Average Precision  (AP) @[ IoU=0.75      | area=   all | maxDets=100 ] = 0.404
 Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 0.023
 Average Precision  (AP) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = 0.125
 Average Precision  (AP) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = 0.414
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.419
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets= 10 ] = 0.599
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.628
 Average Recall     (AR) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 0.083
 Average Recall     (AR) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = 0.343
 Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = 0.676
"""


def mllog(values: dict[str, Any], errors: dict[str, Any] | None = None) -> str:
    """A LoadGen detail log with these values (one `:::MLLOG` record per key)."""
    lines = []
    for i, (k, v) in enumerate({**values, **(errors or {})}.items()):
        rec = {"key": k, "value": v, "time_ms": 0.01 * i, "namespace": "mlperf::logging",
               "event_type": "POINT_IN_TIME",
               "metadata": {"is_error": k in (errors or {}), "is_warning": False, "file": "loadgen.cc",
                            "line_no": 100 + i, "pid": 4242, "tid": 4243}}
        lines.append(":::MLLOG " + json.dumps(rec))
    return "\n".join(lines) + "\n"


def _rules(version: str, model: str) -> BenchmarkRules:
    """The round's rules for `model`, or the latest round's that has it (to write a tree the round refuses)."""
    for rnd in (ROUNDS[version], *reversed(ROUNDS.values())):
        if model in rnd.benchmarks:
            return rnd.benchmarks[model]
    raise KeyError(model)


def perf_values(version: str, model: str, scenario: str, test05: bool = False) -> dict[str, Any]:
    rnd = ROUNDS[version]
    rules = _rules(version, model)
    seeds = rnd.test05_seeds if test05 else rnd.seeds
    v: dict[str, Any] = {
        "loadgen_version": "5.1.0 @ 1a2b3c", "test_datetime": "2025-07-01T10:00:00Z", "sut_name": "PySUT",
        "effective_scenario": scenario, "effective_test_mode": "PerformanceOnly",
        **{f"effective_{k}": s for k, s in seeds.items()},
        "effective_min_duration_ms": 600000, "effective_min_query_count": rules.min_queries[scenario],
        "effective_performance_sample_count": rules.performance_sample_count,
        "effective_samples_per_query": SPQ[scenario], "effective_target_latency_ns": rules.server_latency_ns or 0,
        "effective_sample_concatenate_permutation": False,
        "result_validity": "VALID", "result_mean_latency_ns": 1000000, "result_99.00_percentile_latency_ns": 2000000,
        "result_99.00_percentile_per_query_latency_ns": 2000000, "result_mean_query_latency_ns": 1000000,
    }
    key = {"Offline": "result_samples_per_second", "Server": "result_completed_samples_per_sec",
           "SingleStream": "early_stopping_latency_ss", "MultiStream": "early_stopping_latency_ms"}[scenario]
    v[key] = METRIC_VALUE[scenario]
    if scenario != "Offline":
        v["early_stopping_met"] = True
        v["early_stopping_result"] = " * Run successful."
    return v


def accuracy_values(version: str, model: str, scenario: str) -> dict[str, Any]:
    rules = _rules(version, model)
    v = perf_values(version, model, scenario)
    v["effective_test_mode"] = "AccuracyOnly"
    v["qsl_reported_total_count"] = rules.dataset_size or (50000 if model == "resnet" else 24781)
    if version != "v4.1":  # LoadGen 5 logs the count the accuracy run covered as well
        v["effective_accuracy_sample_count"] = v["qsl_reported_total_count"]
    return v


def system_json(division: str, submitter: str, name: str, system_type: str) -> dict[str, Any]:
    """Every required key; the meaningful ones filled, the rest empty (as real trees often leave them)."""
    values = {k: ("" if k not in SYSTEM_MEANINGFUL else "2x Example CPU") for k in SYSTEM_REQUIRED}
    values.update({"division": division, "submitter": submitter, "status": "available", "system_name": name,
                   "system_type": system_type, "number_of_nodes": 1, "host_processors_per_node": 2,
                   "host_processor_core_count": 32, "accelerators_per_node": "0", "host_network_card_count": 1,
                   "accelerator_model_name": "N/A", "accelerator_memory_capacity": "N/A",
                   "accelerator_host_interconnect": "N/A", "accelerator_memory_configuration": "N/A",
                   "accelerator_interconnect": "N/A"})
    return values


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def _accuracy_dir(d: Path, version: str, model: str, scenario: str, test01: bool = False) -> None:
    log = b'[\n{"seq_id" : 0, "qsl_idx" : 17, "data" : "0A000000"}\n]\n'
    digest = hashlib.sha256(log).hexdigest()
    _write(d / "mlperf_log_accuracy.json", log)
    if model == "retinanet":
        text = PYCOCO + f"mAP=37.572%\nhash={digest}\n"
    elif model.startswith("yolo"):
        text = PYCOCO + f"mAP=53.100%\nhash={digest}\n"
    else:
        text = f"accuracy=76.014%, good=38007, total=50000\nhash={digest}\n"
    _write(d / "accuracy.txt", text)
    if not test01:
        _write(d / "mlperf_log_detail.txt", mllog(accuracy_values(version, model, scenario)))
        _write(d / "mlperf_log_summary.txt", "MLPerf Results Summary\n")


def _perf_dir(d: Path, values: dict[str, Any]) -> None:
    _write(d / "mlperf_log_detail.txt", mllog(values))
    _write(d / "mlperf_log_summary.txt", "================================================\n"
                                         "MLPerf Results Summary\nResult is : VALID\n")


def make_tree(root: Path, version: str = "v5.1", submitter: str = "OrgA", system: str = "sys1",
              division: str = "closed", system_type: str = "edge",
              benchmarks: dict[str, tuple[str, ...]] | None = None, lowercase: bool = False) -> Path:
    """A tree the round's checker accepts; returns the submitter folder. Benchmarks by tree folder name."""
    rnd = ROUNDS[version]
    benchmarks = benchmarks or {"resnet50": ("Offline", "SingleStream", "MultiStream")}
    sub = root / division / submitter
    _write(sub / "systems" / f"{system}.json", json.dumps(system_json(division, submitter, system, system_type),
                                                          indent=2))
    folded = rnd.layout == "folded"
    if folded:
        _write(sub / "src" / "README.md", "# code\nSee https://example.org/code\n")
    if rnd.calibration_doc:
        _write(sub / "documentation" / "calibration.md", "No calibration: fp32.\n")
    for folder, scenarios in benchmarks.items():
        model = rnd.model_of(folder)
        if not folded:
            _write(sub / "code" / folder / "README.md", "# how to run\n")
        for scenario in scenarios:
            name = scenario.lower() if lowercase else scenario
            res = sub / "results" / system / folder / name
            meas = res if folded else sub / "measurements" / system / folder / name
            comp = res if folded else sub / "compliance" / system / folder / name
            _perf_dir(res / "performance" / "run_1", perf_values(version, model, scenario))
            _accuracy_dir(res / "accuracy", version, model, scenario)
            for f in rnd.scenario_files:
                if f == "measurements.json":
                    continue
                _write(meas / f, "# conf\n" if f.endswith(".conf") else f"# {folder} {scenario}\n")
            desc = {"input_data_types": "int8", "retraining": "no", "starting_weights_filename": "model.onnx",
                    "weight_data_types": "int8", "weight_transformations": "quantization"}
            _write(meas / ("measurements.json" if folded else f"{system}_default_{name}.json"), json.dumps(desc))
            for test in _rules(version, model).compliance_tests:
                if division == "open":
                    break
                t = comp / test
                _perf_dir(t / "performance" / "run_1", perf_values(version, model, scenario, test05=test == "TEST05"))
                _write(t / "verify_performance.txt", "Performance check pass: True\nTEST PASS\n")
                if test == "TEST01":
                    _write(t / "verify_accuracy.txt", "First 10 samples match\nTEST PASS\n")
                    if not folded:
                        _accuracy_dir(t / "accuracy", version, model, scenario, test01=True)
    return sub
