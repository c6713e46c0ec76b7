"""A run's manifest.json: everything its result depends on, so an auditor can re-run it and explain a
difference. One writer (`write`, called by the runner) and one reader (`read`), versioned by `format`.

Every section is a type, read field by field (harness.records.fields): kinds, finite numbers, ranges, list
sizes, string lengths; a wrong value is one DataError line naming the file and the field. The on-disk layout is
the one format-1 manifests have always had; a section's keys added since are optional.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
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
    params: int | None = bound(lo=0, default=None)
    macs_per_sample: int | None = bound(lo=0, default=None)


@dataclass(frozen=True)
class Dataset:
    """The prepared samples the run loaded: digests of their manifest and of each shard."""

    path: str
    count: int = bound(lo=0)
    synthetic: bool = False
    manifest_sha256: str | None = None
    shards: dict[str, str] | None = bound(items=65536, default=None)


@dataclass(frozen=True)
class Card:
    """One card of the run: where it ran and what it did; `details` holds its backend's own facts."""

    index: int = bound(lo=0, hi=MAX_CARDS)
    backend: str = "?"
    device: str = "?"
    cpus: tuple[int, ...] = bound(lo=0, hi=MAX_CPUS * 128, items=MAX_CPUS, default=())
    numa_node: int | None = bound(lo=-1, hi=MAX_CPUS, default=None)
    emulated: bool = False
    simulated: bool = False
    samples_completed: int | None = bound(lo=0, default=None)
    batches_in_flight: int | None = bound(lo=0, default=None)
    details: dict[str, object] = bound(rest=True)


@dataclass(frozen=True)
class CardMap:
    """How the cards were chosen: the --cards spec as given, how it was resolved, the backend."""

    spec: str | None = None
    how: str | None = None
    backend: str | None = None


@dataclass(frozen=True)
class Dispatch:
    """The SUT's batching and what happened to the queue (harness.run.sut)."""

    queue_depth_batches: int | None = bound(lo=0, default=None)
    scenario: str | None = None
    server_max_wait_us: float | None = bound(lo=0, default=None)
    keep_warm: bool = False
    backlogged_batches: int | None = bound(lo=0, default=None)
    redispatched_samples: int | None = bound(lo=0, default=None)
    card_failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Host:
    """The machine the run ran on."""

    cpu_model: str | None = None
    available_cpus: tuple[int, ...] = bound(lo=0, hi=MAX_CPUS * 128, items=MAX_CPUS, default=())
    image_digest: str | None = None
    image: object = None
    nvidia: object = None


@dataclass(frozen=True)
class LoadGen:
    version: str | None = None
    seeds: dict[str, int | None] | None = bound(lo=0, hi=2**64 - 1, items=16, default=None)


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

    metric: float | None = bound(lo=0, default=None)
    unit: str | None = None
    valid: bool | None = None
    reasons: tuple[str, ...] = ()
    top1: float | None = bound(lo=0, hi=100, default=None)
    mAP: float | None = bound(lo=0, hi=100, default=None)
    golden_top1: float | None = bound(lo=0, hi=100, default=None)
    golden_mAP: float | None = bound(lo=0, hi=100, default=None)
    hash: str | None = None
    figures: dict[str, object] = bound(rest=True)

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
    benchmark: str = bound(text=64)
    scenario: str = bound(one_of=SCENARIOS)
    mode: str = bound(one_of=MODES)
    requested: dict[str, object] = bound(items=64)  # the LoadGen settings asked for (loadgen_settings.Requested)
    batch_size: int = bound(lo=0, hi=2**31)
    backend: str = bound(text=256)
    card_outputs: str = bound(text=64)
    backend_choice: dict[str, object] = bound(items=64)  # which backend and why (tuned_choice.BackendChoice)
    model: Model = bound()
    precision: str = bound(text=64)
    quantization: dict[str, object] | None = bound()
    dataset: Dataset = bound()
    configs: dict[str, str] = bound(items=16)  # user.conf / mlperf.conf -> sha256
    cards: tuple[Card, ...] = bound(items=MAX_CARDS)
    card_map: CardMap = bound()
    sample_buffers: dict[str, object] = bound()
    dispatch: Dispatch = bound()
    host: Host = bound()
    packages: dict[str, str | None] = bound(items=256)
    loadgen: LoadGen = bound()
    synthetic: Synthetic = bound()
    result: Result = bound()
    notes: tuple[str, ...] = bound(items=256)
    energy: dict[str, object] | None = bound()
    # added within format 1: absent from older manifests
    appliance: dict[str, object] | None = None  # {version, commit, commit_from}: harness.core.build_info
    requests_per_card: int | None = bound(lo=1, hi=1024, default=None)  # infer requests per openvino card
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
