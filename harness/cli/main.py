"""The `appliance` command line: click commands only, the work is done elsewhere."""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from harness import __version__
from harness.audit.compliance import TESTS
from harness.cli import stdout
from harness.core import environment, inbound, progress
from harness.core.errors import ApplianceError, Interrupted, interrupt_exit_code, interrupts_raised, stopped_by
from harness.core.fsutil import shown
from harness.core.native_lines import routed
from harness.core.outbound import ensure_writable_dir, forget_made, remove_made_if_empty
from harness.core.scenarios import MODES, SCENARIOS, Mode, Scenario
from harness.data import benchmarks
from harness.records.benchmark_record import CARD_OUTPUTS, NMS_PARAM_SETS
from harness.records.layout import PRECISIONS, Layout
from harness.run.cards import backends
from harness.run.cards.provider_options import canonical
from harness.run.loadgen_settings import Requested

__all__ = ["DATA_DIR_HELP", "DEFAULT_RUN_MS", "MAX_WAIT_US", "cli", "main", "prepare", "report", "reproduce", "run",
           "tune"]

DEFAULT_RUN_MS = 10_000  # `appliance run` with no options: a short Offline run on this machine
MAX_WAIT_US = 60_000_000  # a minute: no latency bound of any scenario is near it

_DEBUG = False


class _AsciiInt(click.IntRange):
    """A whole-number option in ASCII digits only: int() also reads '٣' (an Arabic-Indic three) as 3."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip().lstrip("+-").isascii():
            self.fail(f"{value!r} is not a number in ASCII digits", param, ctx)
        return super().convert(value, param, ctx)


class _AsciiFloat(click.FloatRange):
    """A number option in ASCII only (float() reads '٣'); its range LoadGen's is checked with the user.conf's
    (loadgen_settings.check_value), in one line."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{value!r} is not a number in ASCII digits", param, ctx)
        return super().convert(value, param, ctx)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="appliance")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
def cli(debug: bool) -> None:
    """MLPerf Inference benchmark appliance.

    \b
    Examples:
      appliance prepare --benchmark resnet50
      appliance run --benchmark resnet50 --scenario Offline
      appliance tune && appliance run --backend auto
      appliance topology detect --format table
    """
    global _DEBUG
    _DEBUG = debug
    environment.check_all()  # a wrong APPLIANCE_* value is one line before any work


DATA_DIR_HELP = "Where models and preprocessed data live [env APPLIANCE_DATA_DIR; default ./data]."
_benchmark_opt = click.option("--benchmark", "-b", type=click.Choice(benchmarks.NAMES), default=benchmarks.RESNET50,
                              show_default=True, help="Benchmark to prepare or run.")


def _a_folder(_ctx: click.Context, _param: click.Parameter, value: Path) -> Path:
    """--data-dir, refused at once when something other than a folder is there (click checks regular files
    only): /dev/null was "damaged ... rerun prepare --data-dir /dev/null"."""
    kind = inbound.what_is(value)
    if kind not in (None, "a folder"):
        raise click.BadParameter(f"{value} is {kind}, not a folder; name the folder `appliance prepare` makes")
    return value


_data_dir_opt = click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False),
                             envvar="APPLIANCE_DATA_DIR", default=Path("data"), help=DATA_DIR_HELP,
                             callback=_a_folder)


@cli.command()
@_benchmark_opt
@_data_dir_opt
@click.option("--samples", type=_AsciiInt(1), default=None,
              help="Number of images: size of the synthetic dataset, or the first N of --source "
                   "[default: the benchmark's performance sample count, from its record in harness/data/benchmarks.py: "
                   "e.g. 1024 for resnet50].")
@click.option("--source", type=click.Path(path_type=Path), default=None,
              help="A real dataset folder in its official layout to preprocess instead of drawing a synthetic one "
                   "(ImageNet: JPEGs + val_map.txt; COCO: annotations/instances_val2017.json + val2017/; "
                   "OpenImages: annotations/openimages-mlperf.json + validation/data/).")
@click.option("--model", "model_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Use this ONNX file instead of building the seeded model; its digest is checked against "
                   "the registry of official artefacts.")
@click.option("--fetch", is_flag=True, help="Download the official model (checksum verified, resumable).")
@click.option("--output-layout", default=None, metavar="LAYOUT",
              help="The layout --model FILE gives its output in, where the benchmark's record allows another "
                   "(yolo-95/yolo-99: attribute-major [84,8400], or anchor-major [8400,84]); recorded with the "
                   "model, so runs read it that way [default: the record's]. Example: --model yolo11l-t.onnx "
                   "--output-layout anchor-major")
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True,
              help="int8: also quantise the model (onnxruntime static quantisation, QDQ, per-channel int8 "
                   "weights) to read the uint8 samples directly, and report its top-1 agreement with FP32; fp16: "
                   "also convert it to fp16 for GPU cards (uint8 input too), agreement measured on the CPU; bf16: "
                   "the FP32 weights computed in bfloat16 by OpenVINO (CPUs with AVX512_BF16 or AMX; runs on "
                   "--backend openvino), and its agreement with FP32 measured on this CPU; tf32: the FP32 weights "
                   "computed in TensorFloat-32 by the CUDA provider (use_tf32=1; --backend onnxruntime-cuda), its "
                   "agreement measured on a CPU emulation.")
@click.option("--calibration-list", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="int8: image names to calibrate on, one per line (MLPerf's cal_image_list_option_1.txt "
                   "form) [default: a seeded list of 128 names of the prepared dataset].")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
def prepare(benchmark: str, data_dir: Path, samples: int | None, source: Path | None, model_file: Path | None,
            fetch: bool, output_layout: str | None, precision: str, calibration_list: Path | None,
            quiet: bool) -> None:
    """Build the model and preprocess the dataset, offline, once.

    \b
    Examples:
      appliance prepare --benchmark resnet50
      appliance prepare --benchmark resnet50 --samples 64 --data-dir /tmp/data
      appliance prepare --benchmark resnet50 --source /data/imagenet --model /data/resnet50_v1.onnx
      appliance prepare --benchmark ssd-mobilenet --samples 64
      appliance prepare --benchmark ssd-resnet34 --source /data/coco
      appliance prepare --benchmark yolo-99 --model yolo11l-t.onnx --output-layout anchor-major
      appliance prepare --precision int8 --calibration-list cal_image_list_option_1.txt
      appliance prepare --precision fp16
      appliance prepare --precision bf16        # then: appliance run --precision bf16 --backend openvino
      appliance prepare --precision tf32        # then: appliance tune --precisions fp32,tf32 on a GPU
    """
    from harness.prepare.steps import check_space, disk_faults_as_errors, read_source, space_needed, sweep_leftovers

    progress.set_quiet(quiet)
    if model_file is not None and fetch:
        raise click.UsageError("--model and --fetch exclude each other")
    if calibration_list is not None and precision != "int8":
        raise click.UsageError("--calibration-list is for --precision int8")
    if precision == "bf16":  # before any work: this CPU may have no bf16
        from harness.hw.bf16_support import require

        require("--precision bf16")
    bench = benchmarks.get(benchmark)
    if output_layout is not None:
        bench = bench.with_output_layout(output_layout)
    if source is not None:
        read_source(bench, source, samples)  # the inputs before the expensive work (the model build)
    layout = Layout(ensure_writable_dir(data_dir, "data folder"), bench)
    sweep_leftovers(layout, click.echo)
    check_space(layout, space_needed(layout, samples, source, precision, model_file, fetch))
    with disk_faults_as_errors(layout), routed(data_dir, "native-prepare.log", click.echo):
        _prepare(layout, samples, source, model_file, fetch, precision, calibration_list)
    click.echo(f"ready: appliance run --benchmark {bench.name} --data-dir {data_dir}"
               + (f" --precision {precision}" if precision != "fp32" else "")
               + (" --backend openvino" if precision == "bf16" else "")
               + (" --backend onnxruntime-cuda" if precision == "tf32" else ""))


def _prepare(layout: Layout, samples: int | None, source: Path | None, model_file: Path | None, fetch: bool,
             precision: str, calibration_list: Path | None) -> None:
    """The steps of `prepare`, each skipped when its output is up to date."""
    from harness.prepare.steps import prepare_data, prepare_model

    bench, data_dir = layout.bench, layout.data_dir
    record = prepare_model(layout, model_file, fetch, click.echo)
    prepare_data(layout, record, samples, source, bench.default_batch, click.echo)
    if precision != "fp32":
        from harness.prepare.precision import PREPARERS, Job
        from harness.records.store import open_prepared

        data = open_prepared(layout.preprocessed, bench.prepare_hint(data_dir))
        PREPARERS[precision](Job(layout.model_record.parent, layout.record_for(precision), bench, record, data,
                                 calibration_list, click.echo))


class _BackendChoice(click.Choice[str]):
    """--backend: the backend records' names when the option is read (a record added after this module was
    imported too: a plugin's, a test's), and auto."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return (*backends.RECORDS, "auto")  # harness.run.options.Auto

    @choices.setter
    def choices(self, _: object) -> None:
        pass  # click's __init__ sets them; the records say

@cli.command()
@_benchmark_opt
@click.option("--scenario", "-s", type=click.Choice(SCENARIOS), default="Offline", show_default=True,
              help="LoadGen scenario.")
@click.option("--mode", "-m", type=click.Choice(MODES + TESTS), default="performance", show_default=True,
              help="performance: timed run; accuracy: every sample once, scored into accuracy.txt; "
                   "TEST01 / TEST04 / TEST05: MLPerf compliance test against this scenario's latest "
                   "performance (and accuracy) run, verified into <scenario>/TESTxx/verify_*.txt.")
@_data_dir_opt
@click.option("--results", "results_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("results"),
              envvar="APPLIANCE_RESULTS_DIR", show_default=True,
              help="Results root; runs go to <root>/<system>/<benchmark>/<scenario>/performance/run_N or accuracy.")
@click.option("--duration-ms", type=_AsciiInt(1), default=None,
              help="Minimum duration override (user.conf min_duration); a run shorter than 600000 ms is "
                   "reported as not submission-length.")
@click.option("--count", type=_AsciiInt(1), default=None,
              help="Minimum query count override (user.conf min_query_count; for Offline the sample count).")
@click.option("--target-qps", type=_AsciiFloat(min=0, min_open=True), default=None,
              help="Server target QPS (user.conf target_qps) [default: half the rate the cards sustain, "
                   "measured by short LoadGen probes before the test].")
@click.option("--user-conf", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="A user.conf to start from; the options above are appended as overrides.")
@click.option("--backend", type=_BackendChoice(), default=backends.DEFAULT, show_default=True,
              envvar="APPLIANCE_BACKEND",
              help=f"Card backend: {backends.described()}, auto (the `appliance tune` record's choice, else "
                   f"{backends.DEFAULT}) [env APPLIANCE_BACKEND: the GPU image sets onnxruntime-cuda]. The choice "
                   "and why go to manifest.json.")
@click.option("--tuned", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="An `appliance tune` record: its precision (unless --precision is given), backend (unless "
                   "--backend), batch size (unless --batch-size) and user.conf (unless --user-conf) for this "
                   "scenario [--backend auto reads <data-dir>/tuned/<benchmark>.json when there is one].")
@click.option("--cards", default=None,
              help="Cards and their cores: auto (detected cards, else one CPU-emulated card per L3 domain), "
                   "emulate:N (N CPU-emulated cards), simulate:PROFILE:N (N SIMULATED cards modelled on "
                   "a packaged profile such as cloud-ai-100, or a profile .yaml), "
                   "or a card map YAML from `appliance topology detect` [default: the tuned record's layout "
                   "with --tuned / --backend auto, else auto].")
@click.option("--replicate", type=click.Choice(("node", "card", "none")), default="node", show_default=True,
              help="Sample buffer replicas: one per NUMA node, one per card, or one shared; each filled by a "
                   "thread pinned to its node's (card's) CPUs.")
@click.option("--max-wait-us", type=_AsciiInt(0, MAX_WAIT_US), default=None,
              help="Server: longest a partial batch waits for samples [default: the time a batch fills in with "
                   "99% probability at the target QPS, at most a tenth of the latency bound].")
@click.option("--card-outputs", type=click.Choice(CARD_OUTPUTS), default="fp32", show_default=True,
              help="Precision the cards return their outputs in: fp32, or quantised as the paper's cards do "
                   "(the forms in the detection record's spec, e.g. ssd-mobilenet: uint8 scores and boxes).")
@click.option("--nms-params", type=click.Choice(NMS_PARAM_SETS), default="reference", show_default=True,
              help="Detection: the host NMS parameter set of the benchmark's record, MLCommons' reference values "
                   "or KRAI's NMS-ABP ones (e.g. --nms-params krai).")
@click.option("--precision", type=click.Choice(PRECISIONS), default=None,
              help="Which prepared model runs: fp32, int8 (made by `appliance prepare --precision int8`; "
                   "reads the uint8 samples directly), or bf16 (`prepare --precision bf16`: the FP32 weights "
                   "computed in bf16, --backend openvino on a CPU with AVX512_BF16 or AMX), fp16 or tf32 (GPU: "
                   "the FP32 weights in TensorFloat-32, --backend onnxruntime-cuda); with --tuned / --backend "
                   "auto, the record's best candidate "
                   "at this precision [default: the tuned record's choice with --tuned / --backend auto, else "
                   "fp32]. Example: --precision int8")
@click.option("--batch-size", type=_AsciiInt(1), default=None,
              help="Samples per card batch [default: 1 for SingleStream, else the benchmark's (8 for resnet50)].")
@click.option("--requests", type=_AsciiInt(1), default=None,
              help=f"{backends.with_requests()} only: infer requests (one stream each) kept in flight per card, the "
                   "card's depth; "
                   "other backends refuse N > 1 (onnxruntime runs one batch per card at a time) [default: the "
                   "tuned record's choice with --tuned / --backend auto, else 1]. Example: --backend openvino "
                   "--requests 2")
@click.option("--provider-options", default=None,
              help="onnxruntime GPU backends: CUDA provider options, space-separated key=value (prefer_nhwc, "
                   "cudnn_conv_algo_search, fuse_conv_bias, cudnn_conv_use_max_workspace) [default: the tuned "
                   "record's choice with --tuned / --backend auto, else the provider's]. Example: "
                   "--provider-options 'prefer_nhwc=1 cudnn_conv_algo_search=EXHAUSTIVE'")
@click.option("--keep-warm", is_flag=True,
              help="Keep the cards' CPUs awake while LoadGen runs: a lowest-priority (SCHED_IDLE) spinner on each, "
                   "preempted whenever a card thread wants the CPU; for Server below full load, where CPUs idle "
                   "between queries and wake late. Costs power; off by default (tools/bench_idle_wakeup.py "
                   "measures it).")
@click.option("--system", "system_name", default=None,
              help="System name used in the results path [default: derived from the CPU and the cards].")
@click.option("--json", "as_json", is_flag=True, help="Print the final summary as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
def run(benchmark: str, scenario: str, mode: str, data_dir: Path, results_dir: Path, duration_ms: int | None,
        count: int | None, target_qps: float | None, user_conf: Path | None, backend: str, cards: str | None,
        replicate: str, max_wait_us: int | None, card_outputs: str, nms_params: str, precision: str | None,
        batch_size: int | None, requests: int | None, provider_options: str | None, keep_warm: bool,
        system_name: str | None, as_json: bool, quiet: bool, tuned: Path | None) -> None:
    """Run one benchmark scenario through MLCommons LoadGen.

    With no options: prepares resnet50 if needed, then a short Offline run on this machine.

    \b
    Examples:
      appliance run
      appliance run --benchmark resnet50 --scenario Server --duration-ms 10000 --target-qps 10
      appliance run -b resnet50 -s SingleStream --mode accuracy --results /results
      appliance run --cards emulate:2 --replicate card
      appliance run --cards simulate:cloud-ai-100:16 -s Server --max-wait-us 300
      appliance run -b resnet50 -s Offline --mode TEST01 --results /results
      appliance run -b ssd-mobilenet -s SingleStream --mode accuracy --card-outputs quantised
      appliance run --precision int8 --backend openvino
      appliance run --backend openvino --requests 2
      appliance run -s Server --tuned data/tuned/resnet50.json
    """
    from harness.report.summary import summary_table
    from harness.run.options import Auto
    from harness.run.runner import RunOptions, write_json_summary
    from harness.run.runner import run as run_one

    progress.set_quiet(quiet or as_json)
    echo = (lambda m: click.echo(m, err=True)) if as_json else click.echo
    bench = benchmarks.get(benchmark)
    ctx = click.get_current_context()
    # `appliance run` alone (results/output options aside) is the embedded default benchmark
    default_run = all(ctx.get_parameter_source(p) is not ParameterSource.COMMANDLINE
                      for p in ctx.params if p not in ("results_dir", "as_json", "quiet", "system_name"))
    if default_run:
        from harness.records.layout import Layout

        duration_ms = DEFAULT_RUN_MS
        if not (Layout(data_dir, bench).preprocessed / "manifest.json").is_file():
            echo(f"no prepared data in {data_dir}: preparing {bench.name} first")
            ctx.invoke(prepare, benchmark=benchmark, data_dir=data_dir, quiet=quiet)
    if tuned is not None and ctx.get_parameter_source("backend") is not ParameterSource.COMMANDLINE:
        backend = Auto.AUTO.value
    # a compliance test (--mode TEST0x) is made of performance runs
    requested = Requested(Scenario(scenario), Mode.PERFORMANCE if mode in TESTS else Mode(mode), duration_ms, count,
                          target_qps, user_conf)
    record = Auto.AUTO if backend == Auto.AUTO.value else backends.get(backend)  # the one place a name becomes one
    opts = RunOptions(benchmark=bench.name, requested=requested,
                      data_dir=data_dir, results_dir=results_dir, backend=record, batch_size=batch_size,
                      system_name=system_name, cards=cards, replicate=replicate, max_wait_us=max_wait_us,
                      card_outputs=card_outputs, nms_params=nms_params, precision=precision, tuned=tuned,
                      requests=requests, keep_warm=keep_warm,
                      provider_options=None if provider_options is None else canonical(provider_options))
    if mode in TESTS:
        from harness.audit.compliance import run_compliance

        outcome, folder, verdicts = run_compliance(mode, opts, echo=echo)
        echo(f"{mode}: " + ", ".join(f"{k} {'PASS' if v else 'FAIL'}" for k, v in verdicts.items())
             + f" (verify_*.txt in {folder})")
    else:
        outcome = run_one(opts, echo=echo)
    if as_json:
        click.echo(write_json_summary([outcome]))
    else:
        click.echo(summary_table([outcome]))


def _csv(kind: type, choices: tuple[str, ...] = ()) -> Callable[[click.Context, click.Parameter, str | None],
                                                              tuple[Any, ...] | None]:
    """A click callback: a comma-separated list of `kind`, each in `choices` when given."""
    def parse(ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[Any, ...] | None:
        if value is None:
            return None
        try:  # int() also takes '٣' (an Arabic-Indic three): ASCII digits only
            if kind is int and not all(inbound.is_digits(v.strip()) for v in value.split(",") if v.strip()):
                raise ValueError(value)
            items = tuple(kind(v.strip()) for v in value.split(",") if v.strip())
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a comma-separated list of {kind.__name__}") from None
        bad = [v for v in items if (choices and v not in choices) or (kind is int and v < 1)]
        if bad or not items:
            raise click.BadParameter(f"{value!r}: " + (f"not allowed: {', '.join(map(str, bad))}" if bad else "empty")
                                     + (f" (choose from {', '.join(choices)})" if choices else ""))
        return items
    return parse


@cli.command()
@_benchmark_opt
@_data_dir_opt
@click.option("--scenario", "-s", "scenarios", type=click.Choice(SCENARIOS), multiple=True,
              help="Scenario to choose for; repeat for several [default: Offline and Server (Offline only for "
                   "edge benchmarks)].")
@click.option("--batch-sizes", callback=_csv(int), default=None,
              help="Batch sizes to time, comma-separated [default: 1,2,4,8,16 on CPU backends, "
                   "1,8,32,64,128,256,512,1024 on GPU backends].")
@click.option("--backends", callback=_csv(str), default=None,
              help="Backends to time, comma-separated [default: those installed of onnxruntime, openvino, and "
                   "onnxruntime-cuda where onnxruntime-gpu is installed and NVML sees a GPU].")
@click.option("--requests", callback=_csv(int), default="1,2", show_default=True,
              help=f"Infer requests (batches in flight) per {backends.with_requests()} card to time, comma-separated; "
                   "other backends "
                   "are timed at 1. Example: --requests 1,2,4")
@click.option("--precisions", "--precision", "precisions", callback=_csv(str, PRECISIONS), default=None,
              help="Prepared models to time, comma-separated; a precision is chosen only if its model meets the "
                   "benchmark's accuracy target as prepare recorded it (fp32 always; int8 if its agreement with "
                   "FP32 reaches e.g. 99% for resnet50); --precision int8 is --precisions int8 [default: fp32 and "
                   "every other precision prepared]. Example: --precisions fp32,int8")
@click.option("--cards", "layouts", callback=_csv(str), default="auto", show_default=True,
              help="Card layouts to time, comma-separated, each as for `appliance run --cards`; the choice per "
                   "scenario names its layout, which `run --tuned` / `--backend auto` use unless --cards is given. "
                   "Example: --cards emulate:1,emulate:4,emulate:16 (on a many-core CPU Server wants several "
                   "cards of several cores)")
@click.option("--provider-options", "option_sets", multiple=True,
              help="onnxruntime GPU backends: a set of CUDA provider options to time, space-separated key=value; "
                   "repeat for several, '' for the provider's defaults [default: prefer_nhwc=0 and prefer_nhwc=1]. "
                   "Example: --provider-options prefer_nhwc=1 --provider-options 'prefer_nhwc=1 "
                   "cudnn_conv_algo_search=HEURISTIC'")
@click.option("--card-outputs", type=click.Choice(CARD_OUTPUTS), default="fp32", show_default=True,
              help="What the cards return, as for `appliance run --card-outputs` (detection: quantised outputs "
                   "cross PCIe at half the bytes or less); a run of the record should give the same. "
                   "Example: appliance tune -b yolo-99 --card-outputs quantised")
@click.option("--server-search", is_flag=True,
              help="Confirm the Server choice with short LoadGen Server runs (a bisection on target_qps from the "
                   "ideal queue's figure); the record keeps both figures.")
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The record to write; the user.conf goes beside it as <name>.user.conf "
                   "[default: <data-dir>/tuned/<benchmark>.json, where --backend auto finds it].")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
def tune(benchmark: str, data_dir: Path, scenarios: tuple[str, ...], batch_sizes: tuple[int, ...] | None,
         backends: tuple[str, ...] | None, requests: tuple[int, ...], precisions: tuple[str, ...] | None,
         layouts: tuple[str, ...], option_sets: tuple[str, ...], card_outputs: str, server_search: bool,
         output: Path | None, as_json: bool, quiet: bool) -> None:
    """Time each card layout x precision x backend x batch size x requests per card on this machine and choose
    per scenario.

    The run's own cards, warmed up as a performance run does, then each kept full for a short burst
    with `requests` batches in flight (its rate, and a batch's latency under that load): seconds per
    configuration, not LoadGen runs. Writes a LoadGen user.conf (target_qps / target_latency per
    scenario) and a JSON record of precision, backend, card layout, batch size and requests per scenario
    (among the precisions that meet the accuracy target), which `appliance run --tuned FILE` (or `--backend auto`)
    uses and names in manifest.json.

    \b
    Examples:
      appliance tune
      appliance tune -s Offline -s SingleStream --batch-sizes 1,4,8 --backends onnxruntime,openvino
      appliance tune --backends openvino --requests 1,2,4 && appliance run --backend auto
      appliance tune --precisions fp32,int8 && appliance run --backend auto
      appliance tune --backends openvino --cards emulate:1,emulate:4,emulate:8 -s Server
      appliance tune -b yolo-99 --card-outputs quantised -s Offline
      appliance run --backend auto --precision fp32     # the best fp32 candidate of the same record
    """
    import json as _json

    from harness.tune.search import (
        DEFAULT_SCENARIOS,
        Sweep,
        asked_backends,
        available_backends,
        prepared_precisions,
        summary,
    )
    from harness.tune.search import tune as run_tune

    progress.set_quiet(quiet or as_json)
    bench = benchmarks.get(benchmark)
    chosen = tuple(map(Scenario, scenarios)) or \
        (DEFAULT_SCENARIOS if bench.server_latency_ms is not None else (Scenario.OFFLINE,))
    timed = asked_backends(backends) if backends else available_backends(True)
    sweep = Sweep(precisions or prepared_precisions(data_dir, bench.name), timed,
                  batch_sizes or None, requests, tuple(dict.fromkeys(layouts)),
                  tuple(dict.fromkeys(map(canonical, option_sets))) or None, card_outputs)
    folder = (output or Layout(data_dir, bench).tuned).parent
    with routed(folder, "native-tune.log", lambda line: click.echo(line, err=as_json)):
        path, record = run_tune(bench.name, data_dir, chosen, sweep, output, server_search,
                                lambda line: click.echo(line, err=True))
    if as_json:
        click.echo(_json.dumps(record.to_json(), indent=2, sort_keys=True))
    else:
        click.echo(summary(record))
        click.echo(f"wrote {path} and {path.parent / record.user_conf}; use: appliance run --tuned {path}")


@cli.command()
@click.argument("tree", type=click.Path(path_type=Path, exists=True, file_okay=False))
@_data_dir_opt
@click.option("--tolerance", default="5%", show_default=True,
              help="Largest accepted deviation of the performance metric, e.g. 5% or 0.05.")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=Path("reproduce"), show_default=True,
              help="Folder for reproduce_report.md / .json and the new runs (must not exist).")
@click.option("--duration-ms", type=_AsciiInt(1), default=None,
              help="Override the recorded min duration (a quicker, not submission-length, check).")
@click.option("--json", "as_json", is_flag=True, help="Print the report rows as JSON.")
def reproduce(tree: Path, data_dir: Path, tolerance: str, output: Path, duration_ms: int | None,
              as_json: bool) -> None:
    """Re-run a results or submission tree here and compare it, row by row (for auditors).

    Re-hashes the local model and dataset shards (against their records and the tree's manifests),
    re-runs every benchmark and scenario with the recorded user.conf (either submission layout),
    compares the metric within --tolerance and accuracy exactly. Each row is PASS, FAIL (a file
    named, or outside the tolerance) or NOT REPRODUCIBLE with its reasons (synthetic local data,
    other hardware, shortened or INVALID re-run, benchmark not prepared here). The report is always
    written. Exit code 1 when any row is not a PASS.

    \b
    Examples:
      appliance reproduce results/
      appliance reproduce /submissions/closed/ORG --tolerance 10% -o /results/audit
    """
    import json as _json

    from harness.audit.reproduce import PASSES, parse_tolerance
    from harness.audit.reproduce import reproduce as reproduce_tree

    echo = (lambda m: click.echo(m, err=True)) if as_json else click.echo
    rows = reproduce_tree(tree, data_dir, output, parse_tolerance(tolerance), echo=echo, duration_ms=duration_ms)
    if as_json:
        click.echo(_json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        for r in rows:
            click.echo(f"{r.verdict:17} {r.benchmark} {r.scenario} {r.kind}: {r.recorded} -> {r.reproduced}")
            for line in ([f"caveat: {r.caveat}"] if r.caveat else []) + \
                    ([f"user.conf: {r.user_conf}"] if r.kind == Mode.PERFORMANCE else []) + \
                    [f"reason: {n}" for n in r.reasons] + r.notes:
                click.echo(f"{'':17} - {line}")
        click.echo(f"report: {output / 'reproduce_report.md'}")
    if not rows or any(r.verdict not in PASSES for r in rows):
        raise click.exceptions.Exit(1)


@cli.command()
@click.argument("results", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), default=Path("report.html"),
              show_default=True, help="The HTML file; the plots are also written beside it as PNG files.")
def report(results: Path, output: Path) -> None:
    """Write one self-contained HTML report (summary, latency, scaling, card map) of a results folder.

    \b
    Examples:
      appliance report results/
      appliance report /results -o /results/report.html
    """
    from harness.report.html import render

    click.echo(f"report: {render(results, output)}")


def _register_subcommands() -> None:
    from harness.cli.fleet import fleet
    from harness.cli.submission import submission
    from harness.cli.topology import topology

    cli.add_command(topology)
    cli.add_command(submission)
    cli.add_command(fleet)


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line per error, a non-zero exit code, tracebacks only with --debug. Ctrl-C, SIGTERM
    and SIGHUP stop every command the same way: one line, exit 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP).
    A command that fails leaves none of the folders it made empty behind. Standard output that cannot be
    written (closed, full) is said to be so (harness.cli.stdout)."""
    _register_subcommands()
    forget_made()
    with stdout.guarded() as out:
        code = _main(argv) if out is not None else 2
    if out is None or (out.failed is not None and not isinstance(out.failed, BrokenPipeError)):  # `| head`: chosen
        click.echo(f"appliance: error: {stdout.lost(None if out is None else out.failed)}", err=True)
        code = code or 2
    if code != 0:
        remove_made_if_empty()
    return code



def _utf8_args(argv: list[str]) -> None:
    """Every argument UTF-8 text: a name with byte 0xFF reached LoadGen (`FromConfig(): incompatible function
    arguments`) or a JSON writer (UnicodeEncodeError); Python keeps such bytes as surrogates."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            byte = os.fsencode(arg[exc.start])[0]
            raise ApplianceError(f"the argument {shown(arg)} is not UTF-8 text (byte 0x{byte:02X}); name files, "
                                 f"folders and systems in UTF-8") from None


def _main(argv: list[str] | None) -> int:
    try:
        with interrupts_raised():
            _utf8_args(sys.argv[1:] if argv is None else argv)
            code = cli.main(args=argv, prog_name="appliance", standalone_mode=False)
    except click.exceptions.Abort as exc:  # click's form of a KeyboardInterrupt (or Terminated) in a command
        if exc.__cause__ is not None and not isinstance(exc.__cause__, KeyboardInterrupt):
            return _internal_error(exc.__cause__)  # click's Abort for an EOFError: no signal came
        cause = exc.__cause__ or KeyboardInterrupt()
        click.echo(f"appliance: {stopped_by(cause)}", err=True)
        return interrupt_exit_code(cause)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except Interrupted as exc:
        click.echo(f"appliance: {exc}", err=True)
        remove_made_if_empty()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exc.exit_code)  # LoadGen's thread cannot be stopped; leave without waiting for it
    except ApplianceError as exc:
        if _DEBUG and exc.traceback:
            traceback.print_exc()
        click.echo(f"appliance: error: {shown(str(exc))}", err=True)  # one line, whatever names it holds
        return exc.exit_code
    except KeyboardInterrupt as exc:
        click.echo(f"appliance: {stopped_by(exc)}", err=True)
        return interrupt_exit_code(exc)
    except OSError as exc:
        if _DEBUG:
            traceback.print_exc()
        line = _file_fault(exc)
        if line is None:
            click.echo(f"appliance: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", err=True)
            return 1
        click.echo(f"appliance: error: {line}", err=True)
        return 2
    except Exception as exc:
        return _internal_error(exc)
    return code if isinstance(code, int) else 0


def _signal_within(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C / SIGTERM / SIGHUP an error was raised while handling, if any (its cause or context chain)."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return at
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return None


def _internal_error(exc: BaseException) -> int:
    """A bug (never reported as an interrupt, whatever click made of it): one line, the traceback with --debug.
    An error raised while a signal was handled is that signal's stop (matplotlib's import: a RuntimeError)."""
    stop = _signal_within(exc)
    if stop is not None:
        click.echo(f"appliance: {stopped_by(stop)}", err=True)
        return interrupt_exit_code(stop)
    if _DEBUG:
        traceback.print_exception(exc)
    else:
        click.echo(f"appliance: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", err=True)
    return 1


def _file_fault(exc: OSError) -> str | None:
    """One line for a writer stopped by the machine (full or read-only file system, failing disk) or by a
    folder's permissions, naming where; None for any other OSError (a bug: an internal error)."""
    from harness.core.fsutil import disk_fault

    fault = disk_fault(exc)
    if exc.errno == errno.ENAMETOOLONG:
        name = str(exc.filename or "")
        shown = name if len(name) <= 120 else f"{name[:60]}…{name[-50:]}"
        return f"{shown}: {exc.strerror} ({len(os.fsencode(name))} bytes); choose a shorter folder"
    if fault is not None:
        return f"{fault}; nothing half-written was left there: free some space or choose a writable folder"
    if exc.errno in (errno.EACCES, errno.EPERM) and exc.filename:
        return (f"{exc.strerror} ({errno.errorcode[exc.errno]}): {exc.filename}; choose a folder you may write "
                f"or fix its permissions")
    return None


if __name__ == "__main__":
    sys.exit(main())
