"""A run's manifest.json: everything its result depends on, so an auditor can re-run it and explain a
difference. One writer (`write`, called by the runner) and one reader (`read`), versioned by `format`.

Every section is a type, read field by field (harness.records.fields): kinds, finite numbers, ranges, list
sizes, string lengths; a wrong value is one DataError line naming the file and the field. The on-disk layout is
the one format-1 manifests have always had; a section's keys added since are optional.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import DataError
from harness.core.outbound import atomic_write_json
from harness.core.scenarios import MODES, SCENARIOS
from harness.records import fields
from harness.records.base import load_json, versioned
from harness.records.fields import bound
from harness.records.readers import Problem, read_json_object

FORMAT = 1
NAME = "manifest.json"
MAX_CPUS = 8192   # the kernel's largest NR_CPUS: a CPU list longer than this is not a machine's
MAX_CARDS = 1024  # cards of one run


@dataclass(frozen=True)
class Model:
    """The model file the run loaded (made from harness.records.model_record.ModelRecord)."""

    path: str
    sha256: str
    synthetic: bool = False
    md5: str | None = None
    seed: int | None = None
    official_artefact: str | None = None
    params: int | None = field(default=None, metadata=bound(lo=0))
    macs_per_sample: int | None = field(default=None, metadata=bound(lo=0))


@dataclass(frozen=True)
class Dataset:
    """The prepared samples the run loaded: digests of their manifest and of each shard."""

    path: str
    count: int = field(metadata=bound(lo=0))
    synthetic: bool = False
    manifest_sha256: str | None = None
    shards: dict[str, str] | None = field(default=None, metadata=bound(items=65536))


@dataclass(frozen=True)
class Card:
    """One card of the run: where it ran and what it did; `details` holds its backend's own facts."""

    index: int = field(metadata=bound(lo=0, hi=MAX_CARDS))
    backend: str = "?"
    device: str = "?"
    cpus: tuple[int, ...] = field(default=(), metadata=bound(lo=0, hi=MAX_CPUS * 128, items=MAX_CPUS))
    numa_node: int | None = field(default=None, metadata=bound(lo=-1, hi=MAX_CPUS))
    emulated: bool = False
    simulated: bool = False
    samples_completed: int | None = field(default=None, metadata=bound(lo=0))
    batches_in_flight: int | None = field(default=None, metadata=bound(lo=0))
    details: dict[str, object] = field(default_factory=dict, metadata=bound(rest=True))


@dataclass(frozen=True)
class CardMap:
    """How the cards were chosen: the --cards spec as given, how it was resolved, the backend."""

    spec: str | None = None
    how: str | None = None
    backend: str | None = None


@dataclass(frozen=True)
class Dispatch:
    """The SUT's batching and what happened to the queue (harness.run.sut)."""

    queue_depth_batches: int | None = field(default=None, metadata=bound(lo=0))
    scenario: str | None = None
    server_max_wait_us: float | None = field(default=None, metadata=bound(lo=0))
    keep_warm: bool = False
    backlogged_batches: int | None = field(default=None, metadata=bound(lo=0))
    redispatched_samples: int | None = field(default=None, metadata=bound(lo=0))
    card_failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Host:
    """The machine the run ran on."""

    cpu_model: str | None = None
    available_cpus: tuple[int, ...] = field(default=(), metadata=bound(lo=0, hi=MAX_CPUS * 128, items=MAX_CPUS))
    image_digest: str | None = None
    image: dict[str, object] | None = None     # the container image (harness.hw.system.image_identity)
    nvidia: dict[str, object] | None = None    # NVML's driver and GPUs (harness.hw.gpu.host_facts)
    node: dict[str, object] | None = None      # governor, NUMA layout, ... (harness.hw.node_facts)


@dataclass(frozen=True)
class LoadGen:
    version: str | None = None
    seeds: dict[str, int | None] | None = field(default=None, metadata=bound(lo=0, hi=2**64 - 1, items=16))


@dataclass(frozen=True)
class Synthetic:
    """What of the run was not real: seeded weights, generated data, simulated or emulated cards."""

    weights: bool = False
    data: bool = False
    cards: str | None = None
    any: bool = False


@dataclass(frozen=True)
class Result:
    """A performance run's metric and verdict, or an accuracy run's score (`top1`, `mAP`, their golden_ twins)
    with its scorer's other figures in `figures`."""

    metric: float | None = field(default=None, metadata=bound(lo=0))
    unit: str | None = None
    valid: bool | None = None
    reasons: tuple[str, ...] = ()
    top1: float | None = field(default=None, metadata=bound(lo=0, hi=100))
    mAP: float | None = field(default=None, metadata=bound(lo=0, hi=100))
    golden_top1: float | None = field(default=None, metadata=bound(lo=0, hi=100))
    golden_mAP: float | None = field(default=None, metadata=bound(lo=0, hi=100))
    hash: str | None = None
    figures: dict[str, object] = field(default_factory=dict, metadata=bound(rest=True))

    def score(self) -> tuple[str, float] | None:
        """An accuracy run's (label, percent): top-1 or mAP."""
        if self.top1 is not None:
            return "top-1", self.top1
        return ("mAP", self.mAP) if self.mAP is not None else None


@dataclass(frozen=True)
class Eligibility:
    """The precision against the benchmark's accuracy rule (harness.records.model_record.eligibility)."""

    eligible: bool
    why: str | None = None


@dataclass(frozen=True)
class RunManifest:
    created_utc: str
    command: tuple[str, ...]
    benchmark: str = field(metadata=bound(text=64))
    scenario: str = field(metadata=bound(one_of=SCENARIOS))
    mode: str = field(metadata=bound(one_of=MODES))
    # the LoadGen settings asked for (loadgen_settings.Requested)
    requested: dict[str, object] = field(metadata=bound(items=64))
    batch_size: int = field(metadata=bound(lo=0, hi=2**31))
    backend: str = field(metadata=bound(text=256))
    card_outputs: str = field(metadata=bound(text=64))
    # which backend and why (tuned_choice.BackendChoice)
    backend_choice: dict[str, object] = field(metadata=bound(items=64))
    model: Model = field()
    precision: str = field(metadata=bound(text=64))
    quantization: dict[str, object] | None = field()
    dataset: Dataset = field()
    configs: dict[str, str] = field(metadata=bound(items=16))  # user.conf / mlperf.conf -> sha256
    cards: tuple[Card, ...] = field(metadata=bound(items=MAX_CARDS))
    card_map: CardMap = field()
    sample_buffers: dict[str, object] = field()
    dispatch: Dispatch = field()
    host: Host = field()
    packages: dict[str, str | None] = field(metadata=bound(items=256))
    loadgen: LoadGen = field()
    synthetic: Synthetic = field()
    result: Result = field()
    notes: tuple[str, ...] = field(metadata=bound(items=256))
    energy: dict[str, object] | None = field()
    # added within format 1: absent from older manifests
    appliance: dict[str, object] | None = None  # {version, commit, commit_from}: harness.core.build_info
    # infer requests (batches in flight) per openvino card; 1 otherwise
    requests_per_card: int | None = field(default=None, metadata=bound(lo=1, hi=1024))
    inference_precision: str | None = None   # what the cards compute in: fp32, or bf16 (harness.prepare.bf16)
    shared_cores: tuple[str, ...] | None = None  # other appliance runs live on this run's cores (run.neighbours)
    host_postprocess: dict[str, object] | None = None  # detection: host NMS CPU share (run.completion_meter)
    precision_eligibility: Eligibility | None = None  # the precision against the benchmark's accuracy rule
    native_log: dict[str, object] | None = None  # onnxruntime / CUDA log lines kept in native.log

    def to_json(self) -> dict[str, object]:
        body = fields.to_json(self)
        return {"format": FORMAT, **body, **{k: None for k in _WRITTEN_AS_NULL if k not in body}}

    @property
    def not_submittable(self) -> str | None:
        """Why the run's precision fails its benchmark's accuracy rule; None when it passes or is not said."""
        verdict = self.precision_eligibility
        if verdict is not None and verdict.eligible is False:
            return verdict.why or "its precision fails the accuracy rule"
        return None


# top-level keys every writer wrote, null included (a section's unset keys are left out instead)
_WRITTEN_AS_NULL = ("quantization", "energy", "appliance", "requests_per_card", "inference_precision",
                    "shared_cores", "precision_eligibility", "native_log")


def parse(data: object, where: Path | str) -> RunManifest:
    """A manifest from its JSON, or DataError (one line) naming the file and the field that is wrong."""
    data = versioned(data, where, "run manifest", FORMAT)
    return fields.parse(RunManifest, data, where)


def write(folder: Path, sections: dict[str, object]) -> RunManifest:
    """Check the runner's sections against RunManifest and write <folder>/manifest.json atomically.

    A section RunManifest does not know is refused (a reader ignores one), so a new section is
    declared here first."""
    unknown = set(sections) - {f.name for f in dataclasses.fields(RunManifest)}
    if unknown:
        raise ValueError(f"manifest sections {sorted(unknown)} are not in harness.records.manifest.RunManifest")
    manifest = parse({"format": FORMAT, **sections}, "the manifest being written")
    atomic_write_json(folder / NAME, manifest.to_json())
    return manifest


def read(run: Path) -> RunManifest:
    """The manifest of a run folder; DataError (one line) when absent, unreadable or malformed."""
    path = run / NAME
    try:
        data = load_json(path)
    except FileNotFoundError:
        raise DataError(f"{run} has no {NAME}: not a finished `appliance run` folder") from None
    return parse(data, path)


def read_lenient(run: Path, problem: Problem = lambda _: None, where: str | None = None) -> RunManifest | None:
    """The manifest of a run folder in a tree someone else's tools may have touched (reproduce, submission check,
    report), or None when absent or unusable: a problem line said why, naming the file and the field. Never raises."""
    path = run / NAME
    if not path.is_file():
        return None
    where = where or str(path)
    data = read_json_object(path, where, problem)
    if data is None:
        return None
    try:
        return parse(data, where)
    except DataError as exc:
        problem(str(exc))
        return None
