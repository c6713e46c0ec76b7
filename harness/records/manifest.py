"""A run's manifest.json: everything its result depends on, so an auditor can re-run it and explain a
difference. One writer (`write`, called by the runner) and one reader (`read`), versioned by `format`.

The sections stay JSON objects (their insides are documented where the runner fills them); the record
fixes which sections exist and their types, so a reader can rely on them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import DataError
from harness.core.outbound import atomic_write_json
from harness.records.base import load_json, required_fields, versioned
from harness.records.readers import Problem, read_json_object

FORMAT = 1
NAME = "manifest.json"


@dataclass(frozen=True)
class RunManifest:
    created_utc: str
    command: list[str]
    benchmark: str
    scenario: str
    mode: str
    requested: dict[str, Any]       # the LoadGen settings asked for (harness.run.loadgen_settings.Requested)
    batch_size: int
    backend: str
    card_outputs: str
    backend_choice: dict[str, Any]  # which backend and why (harness.run.tuned_choice.resolve)
    model: dict[str, Any]           # path (absolute), sha256, md5, synthetic, seed, official_artefact, ...
    precision: str
    quantization: dict[str, Any] | None
    dataset: dict[str, Any]         # path, count, synthetic, manifest_sha256, shards {file: sha256}
    configs: dict[str, str]         # user.conf / mlperf.conf -> sha256
    cards: list[dict[str, Any]]
    card_map: dict[str, Any]
    sample_buffers: dict[str, Any]
    dispatch: dict[str, Any]
    host: dict[str, Any]
    packages: dict[str, str]
    loadgen: dict[str, Any]
    synthetic: dict[str, Any]
    result: dict[str, Any]
    notes: list[str]
    energy: dict[str, Any]
    # added within format 1: absent from older manifests
    appliance: dict[str, Any] | None = None  # {version, commit, commit_from}: harness.core.build_info
    requests_per_card: int | None = None     # infer requests (batches in flight) per openvino card; 1 otherwise
    inference_precision: str | None = None   # what the cards compute in: fp32, or bf16 (harness.prepare.bf16)
    shared_cores: list[str] | None = None    # other appliance runs live on this run's cores (harness.run.neighbours)
    host_postprocess: dict[str, Any] | None = None  # detection: host NMS CPU share (harness.run.completion_meter)
    # {eligible, why}: the precision against the benchmark's accuracy rule (harness.records.model_record.eligibility)
    precision_eligibility: dict[str, Any] | None = None
    native_log: dict[str, Any] | None = None  # onnxruntime / CUDA log lines kept in native.log (core.native_lines)

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, **dataclasses.asdict(self)}


_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int, "str": str, "list[str]": list, "dict[str, Any]": dict, "dict[str, str]": dict,
    "list[dict[str, Any]]": list, "dict[str, Any] | None": (dict, type(None)), "int | None": (int, type(None)),
    "str | None": (str, type(None)),
    "list[str] | None": (list, type(None)),
}


def parse(data: object, where: Path | str) -> RunManifest:
    """A manifest from its JSON, or DataError (one line) naming what is wrong."""
    data = versioned(data, where, "run manifest", FORMAT, required=required_fields(RunManifest))
    for field in dataclasses.fields(RunManifest):
        if field.name in data and not isinstance(data[field.name], _TYPES[str(field.type)]):
            raise DataError(f"{where} is not a valid run manifest: {field.name!r} is "
                            f"{type(data[field.name]).__name__}, expected {field.type}")
    return RunManifest(**{f.name: data[f.name] for f in dataclasses.fields(RunManifest) if f.name in data})


def write(folder: Path, sections: dict[str, Any]) -> RunManifest:
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


def read_lenient(run: Path, problem: Problem = lambda _: None, where: str | None = None) -> dict[str, Any] | None:
    """The manifest of a run folder in a tree someone else's tools may have touched (reproduce, submission check,
    report): its JSON object as it is, or None when absent or unusable (a problem line said why). Never raises."""
    path = run / NAME
    if not path.is_file():
        return None
    return read_json_object(path, where or str(path), problem)


def not_submittable(data: dict[str, Any]) -> str | None:
    """Why a run's precision fails its benchmark's accuracy rule, as its manifest (any reader's) says; None when
    it passes or the manifest does not say (other tools' runs)."""
    verdict = data.get("precision_eligibility")
    if isinstance(verdict, dict) and verdict.get("eligible") is False:
        return str(verdict.get("why", "its precision fails the accuracy rule"))
    return None
