"""No untyped record crosses a package boundary (issue 37): a public function, method or dataclass field of a
harness package (harness/<package>/: core, hw, records, data, prepare, run, tune, audit, report, cli) whose
annotation holds `Any` (`dict[str, Any]`, `Mapping[str, Any]`, bare `Any`) may be used only inside its own
package, unless ALLOW names it with a reason (a JSON document that IS an on-disk or wire format, a value whose
type is a third-party library's untyped object).

"Used from another package" is read from the source with `ast`: a module of another package (or tools/) imports
the name from this package, or reads it as an attribute of a module of this package it imported; a class so
used (or named in such a signature) carries its public methods and fields across with it. Over-approximate by
design: a name that might cross counts as crossing.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_JSON_DOOR = "the one door for JSON files: any JSON value in or out; its callers check and type what they read"
_ONNX = "an onnx ModelProto: onnx is imported lazily inside the door, so the annotation cannot name its type"
_MANIFEST = ("a card's own facts, kept as found in manifest.json's card entry (RunManifest's Card.details, a "
             "bounded JSON sub-document); every other manifest section is a type (harness.records.manifest)")
_DETAIL = "LoadGen's mlperf_log_detail.txt key-values: LoadGen's own format, any JSON value per key"
_ENERGY = ("the manifest's energy / host_postprocess section as the meter makes it and report reads it back from "
           "manifest.json (an on-disk JSON document)")

# "module.qualname": why it may hold Any and still be used from another package (issue 37: a record that crosses
# a package boundary is a dataclass; what stays a dict is a JSON document that IS an on-disk format, or a
# third-party object without types)
ALLOW: dict[str, str] = {
    "harness.report.fleet.Fleet.to_json": "what `appliance fleet --json` prints (docs/fleet.md): a wire format",
    "harness.core.inbound.expect_object": _JSON_DOOR,
    "harness.core.inbound.read_json_object": _JSON_DOOR,
    "harness.core.outbound.atomic_write_json": _JSON_DOOR,
    "harness.records.readers.read_json_object": _JSON_DOOR,
    "harness.core.inbound.load_onnx": _ONNX,
    "harness.core.outbound.save_onnx": _ONNX,
    "harness.records.benchmark_record.Benchmark.adopt_model": _ONNX + " (ModelProto -> ModelProto)",
    "harness.core.syscalls.call": "ctypes arguments of a raw syscall (ints, pointers, buffers)",
    "harness.hw.bf16_support.check_compiled": "an OpenVINO CompiledModel: openvino ships no types",
    "harness.run.cards.backends.resolve": "a record's reference to one of its runtime's functions (card factory, "
                                          "checks), each typed where the record's methods call it",
    "harness.run.sut.messages.Call.fn": "work for whichever card type the worker thread holds (WarmUpCard)",
    "harness.records.model_record.ModelRecord.quantization": (
        "how prepare made a reduced-precision model, written into the model record and the manifest as-is; its "
        "agreement keys are read through model_record.AGREEMENT / eligibility"),
    "harness.records.benchmark_record.Score.details": "an accuracy run's extra figures, written into the manifest's "
                                                      "result",
    "harness.records.detail_log.Detail.raw": _DETAIL,
    "harness.records.detail_log.Detail.values": _DETAIL,
    "harness.records.detail_log.perf_result": _DETAIL,
    "harness.records.detail_log.values": _DETAIL,
    "harness.run.cards.base.CardInfo.details": _MANIFEST + " (a card's own entries in `cards`)",
    "harness.hw.energy.EnergyMeter.result": _ENERGY,
    "harness.hw.gpu_energy.GpuEnergyMeter.result": _ENERGY,
    "harness.run.runner.RunOutcome.energy": _ENERGY,
    "harness.run.runner.RunOutcome.host_nms": _ENERGY,
    "harness.report.measured.energy_text": _ENERGY,
    "harness.report.measured.nms_text": _ENERGY,
}


def _package(module: str) -> str:
    """harness.run.sut.worker -> run; tools.x -> tools."""
    parts = module.split(".")
    return parts[1] if parts[0] == "harness" and len(parts) > 1 else parts[0]


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for base in ("harness", "tools"):
        for path in sorted((ROOT / base).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            yield ".".join(parts), ast.parse(path.read_text(), str(path))


ARRAYS = {"ndarray", "NDArray", "dtype", "memmap"}  # numpy's own parameters (dtype, shape): not a record


def _has_any(node: ast.expr | None) -> bool:
    """Whether an annotation holds `Any` outside a numpy array's parameters (`np.ndarray[Any, Any]`)."""
    if node is None:
        return False
    if isinstance(node, ast.Subscript) and (getattr(node.value, "attr", None) or getattr(node.value, "id", None)) \
            in ARRAYS:
        return False
    if (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any"):
        return True
    return any(_has_any(child) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))


def _names(node: ast.expr | None) -> set[str]:
    return set() if node is None else {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


class _Sig:
    """One public signature: where it is, whether it holds Any, and the names its annotations mention."""

    def __init__(self, module: str, qualname: str, annotations: list[ast.expr | None], owner: str | None):
        self.module, self.qualname, self.owner = module, qualname, owner
        self.any = any(_has_any(a) for a in annotations)
        self.mentions = set().union(*(_names(a) for a in annotations))

    @property
    def key(self) -> str:
        return f"{self.module}.{self.qualname}"


def _signatures(module: str, tree: ast.Module) -> Iterator[_Sig]:
    def function(f: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str, owner: str | None) -> _Sig:
        a = f.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                  *([a.kwarg] if a.kwarg else [])]
        return _Sig(module, qualname, [p.annotation for p in params] + [f.returns], owner)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            yield function(node, node.name, None)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for b in node.body:
                if isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef) and \
                        (not b.name.startswith("_") or b.name == "__init__"):
                    yield function(b, f"{node.name}.{b.name}", node.name)
                elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name) and \
                        not b.target.id.startswith("_"):
                    yield _Sig(module, f"{node.name}.{b.target.id}", [b.annotation], node.name)


def _used_elsewhere(modules: list[tuple[str, ast.Module]]) -> dict[str, set[str]]:
    """Per package: the names modules of other packages import from it or read off its modules."""
    used: dict[str, set[str]] = defaultdict(set)
    for module, tree in modules:
        here = _package(module)
        aliases: dict[str, str] = {}  # local name -> the package of the module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness."):
                source = _package(node.module)
                for alias in node.names:  # a name, or a module (`from harness.run import plan`)
                    if source != here:
                        used[source].add(alias.name)
                    aliases[alias.asname or alias.name] = source
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("harness.") and alias.asname:
                        aliases[alias.asname] = _package(alias.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    aliases.get(node.value.id, here) != here:
                used[aliases[node.value.id]].add(node.attr)
    return used


def crossing_any() -> list[str]:
    """The signatures that hold Any and may be used from another package, ALLOW left out."""
    modules = list(_modules())
    used = _used_elsewhere(modules)
    sigs = [s for module, tree in modules if module.startswith("harness.") for s in _signatures(module, tree)]
    classes = {(_package(s.module), s.owner) for s in sigs if s.owner is not None}
    crossing = {(p, c) for p, c in classes if c in used[p]}
    while True:  # a class named in a crossing signature crosses with it
        more = {(_package(s.module), name) for s in sigs
                if (s.owner is None and s.qualname in used[_package(s.module)]) or
                (s.owner is not None and (_package(s.module), s.owner) in crossing)
                for name in s.mentions if (_package(s.module), name) in classes} - crossing
        if not more:
            break
        crossing |= more
    return sorted(s.key for s in sigs if s.any and s.key not in ALLOW and (
        (s.owner is None and s.qualname in used[_package(s.module)]) or
        (s.owner is not None and (_package(s.module), s.owner) in crossing)))


def test_no_untyped_record_crosses_a_package_boundary() -> None:
    found = crossing_any()
    assert not found, (f"{len(found)} public signatures hold Any (dict[str, Any], ...) and are used from another "
                       f"package: give them a type (a dataclass), or add them to ALLOW with the reason:\n  "
                       + "\n  ".join(found))


def test_allow_names_only_what_exists() -> None:
    keys = {s.key for module, tree in _modules() for s in _signatures(module, tree) if s.any}
    assert not set(ALLOW) - keys, f"ALLOW names signatures that no longer hold Any: {sorted(set(ALLOW) - keys)}"
