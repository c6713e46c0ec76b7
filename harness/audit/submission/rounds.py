"""The MLPerf Inference rounds, one declarative record each, as the official checker of that round holds them.

Sources (read 2026-11-23): mlcommons/inference `tools/submission/submission_checker.py` and
`loadgen/mlperf.conf` at tags v4.1, v5.0, v5.1; `tools/submission/submission_checker/constants.py` on master
for v6.0 and v6.1. Only the vision benchmarks are recorded (the appliance's domain); another benchmark of the
round in a tree is named as not checked. Adding a round is adding one `Round(...)` to `ROUNDS`.

A benchmark's rules are read from its record (harness/data/benchmarks.py: performance sample count, accuracy
target, dataset size, Server latency, compliance tests, the checker's model name, the folder names it maps);
a round states only where its checker differed from the records, with that round's source. The scenarios
each system type must submit (`required_scenarios`) are each round's own table, copied from its checker: they
are no benchmark's property (v5.1 dropped ResNet50 from `datacenter`; v6.x asks `datacenter` for none of these
benchmarks yet `datacenter,edge` for ResNet50's Server), so no record holds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from harness.core.scenarios import Scenario
from harness.data import benchmarks
from harness.records.benchmark_record import Benchmark

__all__ = ["ACC_PATTERNS", "ANALYZERS", "BOTH", "DC", "DIVISIONS", "EARLY_STOPPING", "EDGE", "FOLDED", "FOLDERS",
           "GUESSED_BERT", "GUESSED_RESNET", "INFERABLE", "MEASUREMENT_KEYS", "MS", "OFFLINE", "OLD_FOLDERS",
           "OTHER_BENCHMARKS", "RESNET", "RESULT_FIELDS", "RETINANET", "RETINANET_TESTS", "ROUNDS", "SCENARIOS",
           "SCENARIO_SPELLINGS", "SEED_KEYS", "SEPARATE", "SERVER", "SOURCES_V41", "SOURCES_V50", "SS", "STATUSES",
           "SYSTEM_MEANINGFUL", "SYSTEM_REQUIRED", "SYSTEM_TYPES", "YOLO_95", "YOLO_99", "BenchmarkRules",
           "PowerRules", "Round", "round_of_seeds"]

SS, MS, SERVER, OFFLINE = Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM, Scenario.SERVER, Scenario.OFFLINE
SCENARIOS = (SS, MS, SERVER, OFFLINE)  # the checker's order
# Folder spellings the official checker maps (SCENARIO_MAPPING): real trees use both. `.get` of an unknown
# name is None, for the checker to report (it never raises on other people's folder names).
SCENARIO_SPELLINGS: dict[str, Scenario] = {s.lower(): s for s in SCENARIOS} | {s.value: s for s in SCENARIOS}
SYSTEM_TYPES = ("datacenter", "edge", "datacenter,edge", "edge,datacenter")
STATUSES = ("available", "preview", "rdi")
DIVISIONS = ("closed", "open", "network")
ACC_PATTERNS = {"acc": r"^accuracy=([\d\.]+).*", "mAP": r"^mAP=([\d\.]+).*"}
RESULT_FIELDS = {OFFLINE: "result_samples_per_second", SS: "early_stopping_latency_ss",
                 MS: "early_stopping_latency_ms", SERVER: "result_completed_samples_per_sec"}
EARLY_STOPPING = (SS, MS, SERVER)
# (folder scenario, logged scenario) pairs whose result the checker infers (get_inferred_result)
INFERABLE = {(OFFLINE, SS), (OFFLINE, MS), (MS, SS)}
SEED_KEYS = ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")
# The official checker's other benchmarks (MODEL_CONFIG "models" and model_mapping, v4.1 to v6.1): outside the
# appliance's scope, so a tree's folder of one is named as not checked, never counted as a problem.
OTHER_BENCHMARKS = frozenset({
    "bert-99", "bert-99.9", "dlrm-v2-99", "dlrm-v2-99.9", "dlrm-v3", "3d-unet-99", "3d-unet-99.9", "gptj-99",
    "gptj-99.9", "llama2-70b-99", "llama2-70b-99.9", "llama2-70b-interactive-99", "llama2-70b-interactive-99.9",
    "stable-diffusion-xl", "mixtral-8x7b", "llama3.1-405b", "llama3.1-405b-interactive", "llama3_1-405b",
    "llama3.1-8b", "llama3.1-8b-edge", "llama3.1-8b-interactive", "llama3_1-8b", "llama3_1-8b-edge", "rgat",
    "pointpainting", "deepseek-r1", "deepseek-r1-interactive", "whisper", "gpt-oss-120b", "wan-2.2-t2v-a14b",
    "qwen3-vl-235b-a22b",
})
# get_mlperf_model's last resort (every round v4.1 to master): a folder naming one of these is that model
GUESSED_RESNET = ("mobilenet", "efficientnet", "resnet50")
GUESSED_BERT = ("bert-99.9", "bert-99")
SEPARATE, FOLDED = "separate", "folded"  # results/ measurements/ compliance/ apart, or all under results/

SYSTEM_REQUIRED = (
    "division", "submitter", "status", "system_name", "number_of_nodes", "host_processor_model_name",
    "host_processors_per_node", "host_processor_core_count", "host_memory_capacity", "host_storage_capacity",
    "host_storage_type", "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack", "host_processor_frequency",
    "host_processor_caches", "host_memory_configuration", "host_processor_interconnect", "host_networking",
    "host_networking_topology", "accelerator_frequency", "accelerator_host_interconnect",
    "accelerator_interconnect", "accelerator_interconnect_topology", "accelerator_memory_configuration",
    "accelerator_on-chip_memories", "cooling", "hw_notes", "sw_notes", "host_network_card_count",
    "system_type_detail",
)
# Of those, the ones that need a non-empty value (the checker's `not value`: "", 0, null, [] are empty).
SYSTEM_MEANINGFUL = (
    "division", "submitter", "system_type", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count", "host_memory_capacity",
    "host_memory_configuration", "host_storage_capacity", "host_storage_type", "host_networking",
    "host_network_card_count", "host_networking_topology", "accelerators_per_node", "accelerator_model_name",
    "accelerator_memory_capacity", "accelerator_host_interconnect", "accelerator_memory_configuration",
    "accelerator_interconnect", "cooling", "framework", "operating_system", "other_software_stack",
)
MEASUREMENT_KEYS = ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                    "weight_transformations")


@dataclass(frozen=True)
class BenchmarkRules:
    """One benchmark as the round's checker defines it (names are the checker's model names)."""

    model: str                       # checker's name: resnet, retinanet, yolo-95, yolo-99
    loadgen_model: str               # LoadGen/mlperf.conf model name
    performance_sample_count: int
    accuracy_metric: str             # key of ACC_PATTERNS
    accuracy_target: float           # in percent, as accuracy.txt prints it
    dataset_size: int | None         # accuracy-run sample count the checker demands (None: not checked)
    offline_min_samples_per_query: int
    min_queries: Mapping[Scenario, int]
    server_latency_ns: int | None
    compliance_tests: tuple[str, ...]


@dataclass(frozen=True)
class PowerRules:
    """What the round's power checker (`tools/submission/power/power_checker.py` at the tag, and the submission
    checker's check_power_dir around it) accepts. The rules themselves are in power.py."""

    ptd_versions: tuple[str, ...]            # SUPPORTED_VERSION: PTDaemon's version in its `Identify` reply
    sources: Mapping[str, str]               # sources_checksums.json: the power client/server files' sha1
    amps_range_commands: tuple[int, ...]     # the `SR,A` command that restores the amps range (3rd; v5.1+: or 4th)
    ptd_config_list: bool                    # server.json's ptd_config: one analyzer, or a list of them (v5.1+)
    measure_files: bool                      # analyzer_table.*, power_settings.* beside the measurements (pre-v6.0)


# SUPPORTED_MODEL of every tag v4.1 to master: the analyzers (PTDaemon device names and numbers) accepted
ANALYZERS = {"YokogawaWT210": 8, "YokogawaWT500": 35, "YokogawaWT500_multichannel": 48, "YokogawaWT310": 49,
             "YokogawaWT310E": 49, "YokogawaWT330": 52, "YokogawaWT330E": 52, "YokogawaWT330_multichannel": 77,
             "YokogawaWT210_DC": 508, "YokogawaWT310_DC": 549, "YokogawaWT330_DC": 586}
# sources_checksums.json (sha1 of each file of mlcommons/power-dev's ptd_client_server): the same 13 files at
# every tag, lib/server.py and lib/summary.py changed at v5.0 (one list entry per tag, v4.1 to master)
_SOURCES = {
    "__init__.py": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "client.py": "33ca4f26368777ac06e01f9567b714a4b8063886",
    "lib/__init__.py": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "lib/client.py": "ac2aa093c8e8bbc9569b9e2a3471bc64e58a2258",
    "lib/common.py": "611d8b29633d331eb19c9455ea3b5fa3284ed6df",
    "lib/external/__init__.py": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "lib/external/ntplib.py": "4da8f970656505a40483206ef2b5d3dd5e81711d",
    "lib/source_hashes.py": "60a2e02193209e8d392803326208d5466342da18",
    "lib/time_sync.py": "80894ef2389e540781ff78de94db16aa4203a14e",
    "server.py": "c3f90f2f7eeb4db30727556d0c815ebc89b3d28b",
    "tests/unit/__init__.py": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "tests/unit/test_server.py": "948c1995d4008bc2aa6c4046a34ffa3858d6d671",
    "tests/unit/test_source_hashes.py": "00468a2907583c593e6574a1f6b404e4651c221a",
}
SOURCES_V41 = {**_SOURCES, "lib/server.py": "99303c836c683aa9017ec565104e636161d02acb",
               "lib/summary.py": "aa92f0a3f975eecd44d3c0cd0236342ccc9f941d"}
SOURCES_V50 = {**_SOURCES, "lib/server.py": "9bc9a3b6b9b716520658ac175913bcbbdb354336",
               "lib/summary.py": "602a9fedfa503e5544d27ab3b0067f235047efc3"}
_POWER_V51 = PowerRules(("1.11.1",), SOURCES_V50, (3, 4), ptd_config_list=True, measure_files=True)


@dataclass(frozen=True)
class Round:
    version: str
    source: str                      # where the facts come from
    seeds: Mapping[str, int]
    benchmarks: Mapping[str, BenchmarkRules]
    required_scenarios: Mapping[str, Mapping[str, tuple[Scenario, ...]]]  # datacenter | edge | datacenter,edge
    layout: str                      # SEPARATE or FOLDED
    scenario_files: tuple[str, ...]  # beside the results (FOLDED) or in measurements/ (SEPARATE)
    test05_seeds: Mapping[str, int] = field(default_factory=dict)
    folder_names: Mapping[str, str] = field(default_factory=dict)  # tree folder -> checker model name
    calibration_doc: bool = False    # closed division needs calibration.md
    min_duration_ms: int = 600_000
    power: PowerRules = _POWER_V51

    def model_of(self, folder: str, extra: Mapping[str, object] | None = None) -> str:
        """The checker's model for a benchmark folder, as every round's get_mlperf_model finds it: its own name,
        the round's folder mapping, the submitter's model_mapping.json (open division), then its guess by
        substring (a `mobilenet`, `efficientnet` or `resnet50` folder is resnet)."""
        if folder in self.benchmarks or folder in OTHER_BENCHMARKS:
            return folder
        if folder in self.folder_names:
            return self.folder_names[folder]
        mapped = (extra or {}).get(folder)
        if isinstance(mapped, str) and mapped:
            return mapped
        if any(word in folder for word in GUESSED_RESNET):
            return self.folder_names.get(RESNET, RESNET)
        return next((b for b in GUESSED_BERT if b in folder), folder)

    def required(self, system_type: str, model: str) -> tuple[Scenario, ...] | None:
        """Scenarios a system of this type must have for `model`; None when the type may not enter it."""
        kind = "datacenter,edge" if system_type in ("datacenter,edge", "edge,datacenter") else system_type
        return self.required_scenarios.get(kind, {}).get(model)


_ACC_METRIC = {"top-1": "acc", "mAP": "mAP"}  # record's quality_metric -> key of ACC_PATTERNS
_SAME: tuple[str, ...] = ()  # `_rules(tests=...)` default: the record's compliance tests


def _rules(b: Benchmark, *, tests: tuple[str, ...] = _SAME, dataset_size: int | None = -1) -> BenchmarkRules:
    """A benchmark's rules as its record states them; `tests` and `dataset_size` (None: not checked) only
    where a round's checker differed from the record."""
    queries = b.min_queries or ({SS: 1024, MS: 270336, OFFLINE: 1}
                                | ({SERVER: 270336} if b.server_latency_ms is not None else {}))
    latency = None if b.server_latency_ms is None else b.server_latency_ms * 1_000_000
    return BenchmarkRules(b.checker_model, b.loadgen_model, b.performance_sample_count,
                          _ACC_METRIC[b.quality_metric], round(b.quality_reference * b.quality_fraction, 6),
                          b.checker_dataset_size if dataset_size == -1 else dataset_size,
                          b.offline_min_samples_per_query, queries, latency, tests or b.compliance_tests)


_RESNET50, _RETINANET, _YOLO_95, _YOLO_99 = (benchmarks.get(n) for n in (
    benchmarks.RESNET50, benchmarks.RETINANET, benchmarks.YOLO_95, benchmarks.YOLO_99))
# the checker's model names (its keys of the rules and required scenarios)
RESNET, RETINANET, YOLO_95, YOLO_99 = (b.checker_model for b in (_RESNET50, _RETINANET, _YOLO_95, _YOLO_99))
# tree folder -> checker model name: the checker's model_mapping, from the records' `checker_name`
FOLDERS = {name: b.checker_model for name in benchmarks.NAMES if (b := benchmarks.get(name)).checker_name}
EDGE = (SS, MS, OFFLINE)
DC = (SERVER, OFFLINE)
BOTH = (SS, MS, OFFLINE, SERVER)
# v4.1, v5.1: also MobileNet folders, counted as resnet (the checker's model_mapping at those tags)
OLD_FOLDERS = {**FOLDERS, "mobilenet": RESNET}
# v4.1 to v6.0: the checker ran TEST01 alone on retinanet (v4.1: with TEST05), where the record runs TEST04 too
RETINANET_TESTS = ("TEST01",)


def _current() -> Mapping[str, BenchmarkRules]:
    """The newest round's benchmarks: the records' rules as they are."""
    return {r.model: r for r in (_rules(_RESNET50), _rules(_YOLO_95), _rules(_YOLO_99))}


ROUNDS: dict[str, Round] = {r.version: r for r in (
    Round(
        version="v4.1", source="mlcommons/inference tag v4.1, tools/submission/submission_checker.py",
        seeds={"qsl_rng_seed": 3066443479025735752, "sample_index_rng_seed": 10688027786191513374,
               "schedule_rng_seed": 14962580496156340209},
        test05_seeds={"qsl_rng_seed": 16799458546791641818, "sample_index_rng_seed": 5453809927556429288,
                      "schedule_rng_seed": 5435552105434836064},
        # no dataset size checked yet; TEST05 still in use
        benchmarks={RESNET: _rules(_RESNET50, tests=("TEST01", "TEST04", "TEST05"), dataset_size=None),
                    RETINANET: _rules(_RETINANET, tests=("TEST01", "TEST05"), dataset_size=None)},
        required_scenarios={"datacenter": {RESNET: DC, RETINANET: DC},
                            "edge": {RESNET: EDGE, RETINANET: EDGE},
                            "datacenter,edge": {RESNET: BOTH, RETINANET: BOTH}},
        layout=SEPARATE, scenario_files=("mlperf.conf", "user.conf", "README.md"), folder_names=OLD_FOLDERS,
        power=PowerRules(("1.10.0",), SOURCES_V41, (3,), ptd_config_list=False, measure_files=True)),
    Round(
        version="v5.0", source="mlcommons/inference tag v5.0, tools/submission/submission_checker.py",
        seeds={"qsl_rng_seed": 6023615788873153749, "sample_index_rng_seed": 15036839855038426416,
               "schedule_rng_seed": 9933818062894767841},
        # no dataset size checked yet; no ssd-resnet34 folder mapping at this tag
        benchmarks={RESNET: _rules(_RESNET50, dataset_size=None),
                    RETINANET: _rules(_RETINANET, tests=RETINANET_TESTS, dataset_size=None)},
        required_scenarios={"datacenter": {RESNET: DC, RETINANET: DC},
                            "edge": {RESNET: EDGE, RETINANET: EDGE},
                            "datacenter,edge": {RESNET: BOTH, RETINANET: BOTH}},
        layout=SEPARATE, scenario_files=("user.conf", "README.md"),
        folder_names={k: v for k, v in OLD_FOLDERS.items() if v == RESNET},
        power=PowerRules(("1.11.1",), SOURCES_V50, (3,), ptd_config_list=False, measure_files=True)),
    Round(
        version="v5.1", source="mlcommons/inference tag v5.1, tools/submission/submission_checker.py",
        seeds={"qsl_rng_seed": 1780908523862526354, "sample_index_rng_seed": 14771362308971278857,
               "schedule_rng_seed": 18209322760996052031},
        benchmarks={RESNET: _rules(_RESNET50), RETINANET: _rules(_RETINANET, tests=RETINANET_TESTS)},
        required_scenarios={"datacenter": {RETINANET: DC},
                            "edge": {RESNET: EDGE, RETINANET: EDGE},
                            "datacenter,edge": {RESNET: BOTH, RETINANET: BOTH}},
        layout=SEPARATE, scenario_files=("user.conf", "README.md"), folder_names=OLD_FOLDERS,
        calibration_doc=True),
    Round(
        version="v6.0", source="mlcommons/inference master, tools/submission/submission_checker/constants.py",
        seeds={"qsl_rng_seed": 2465351861681999779, "sample_index_rng_seed": 14276810075590677512,
               "schedule_rng_seed": 3936089224930324775},
        benchmarks={**_current(), RETINANET: _rules(_RETINANET, tests=RETINANET_TESTS)},
        required_scenarios={"datacenter": {},
                            "edge": {RESNET: EDGE, YOLO_95: EDGE, YOLO_99: EDGE},
                            "datacenter,edge": {RESNET: BOTH, RETINANET: BOTH, YOLO_95: EDGE, YOLO_99: EDGE}},
        layout=FOLDED, scenario_files=("user.conf", "README.md", "measurements.json"), folder_names=FOLDERS,
        power=replace(_POWER_V51, measure_files=False)),
    Round(
        version="v6.1", source="mlcommons/inference master, tools/submission/submission_checker/constants.py",
        seeds={"qsl_rng_seed": 2085463073848966840, "sample_index_rng_seed": 2747215439041700203,
               "schedule_rng_seed": 16159082839903944936},
        benchmarks=_current(),
        required_scenarios={"datacenter": {},
                            "edge": {RESNET: EDGE, YOLO_95: EDGE, YOLO_99: EDGE},
                            "datacenter,edge": {RESNET: BOTH, YOLO_95: EDGE, YOLO_99: EDGE}},
        layout=FOLDED, scenario_files=("user.conf", "README.md", "measurements.json"), folder_names=FOLDERS,
        power=replace(_POWER_V51, measure_files=False)),
)}


def round_of_seeds(seeds: Mapping[str, object]) -> str | None:
    """The round whose RNG seeds these are (all three must match), or None."""
    for r in ROUNDS.values():
        if all(seeds.get(k) == r.seeds[k] for k in SEED_KEYS):
            return r.version
    return None
