"""A GPU backend the harness has never heard of, a record and a card class defined in this file and nothing else, is
planned, tuned and run as onnxruntime-cuda is (issue 37, item 1): its record's library check and start check run
before any card, its cards are made through the record, tune times it where the record says it is available and
stops growing a layout's batches when its card raises `BatchDoesNotFit`, and a real LoadGen run goes through it.

Its GPU is an NVIDIA GPU on a fake sysfs tree (tests/sysfs_fixtures.py) with this process's CPUs: a `gpu` backend's
cards are placed on the NVIDIA GPUs the topology sees, by CUDA ordinal (harness.hw.gpu), whatever runtime drives them;
the fake runtime touches no device, so the test runs on any machine.

Then docs/developing.md's recipes: "Adding a card backend" names every file a backend touches, which is what
this test needed (a record and a card module), and no harness module outside the card modules branches on a
backend's name or imports a card module; every recipe's paths exist.
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers import appliance
from sysfs_fixtures import DISPLAY_3D_CLASS, H100_PCIE, NVIDIA, Machine, Pci, write_machine

import harness.hw.topology
from harness.core.errors import ApplianceError, BatchDoesNotFit
from harness.hw import gpu
from harness.hw.topology.detect import detect
from harness.run.cards import backends
from harness.run.cards.backends import Backend, Planned
from harness.run.cards.base import CardInfo, PageableHostBuffers, ZeroOutputs
from harness.run.cards.spec import BackendSpec, own
from harness.run.plan import plan_cards
from harness.tune.search import available_backends

ROOT = Path(__file__).resolve().parent.parent
FAKE = "fake-gpu"
FITS = 8  # the fake GPU's memory holds batches of up to 8 samples
LOADS: list[int] = []  # the batch size (the run's) of every fake card made


@dataclass(frozen=True)
class FakeSettings:
    """The fake backend's own settings, made by its record's `settings` from what the plan decided."""

    ordinals: tuple[int, ...]  # card i's CUDA ordinal
    batch: int                 # the run's batch size, run at load


def fake_settings(planned: Planned) -> FakeSettings:
    return FakeSettings(tuple(g.ordinal for g in planned.gpus), planned.batch)


class FakeGpuCard(PageableHostBuffers):  # pageable host memory: no page-locking hook
    """A GPU card of a runtime the harness does not know: zeros of the benchmark's shapes, on its CUDA ordinal;
    a batch larger than FITS does not fit in its memory, which it says at load (as the onnxruntime GPU cards run a
    batch of the run's size at load) and on the batch."""

    input_dtype = None

    def __init__(self, spec: BackendSpec[FakeSettings], index: int, cpus: tuple[int, ...]) -> None:
        settings = own(spec, FakeSettings)
        ordinal = settings.ordinals[index]
        LOADS.append(settings.batch)
        self.label = f"card {index} (fakegpu:{ordinal})"
        if settings.batch > FITS:
            raise BatchDoesNotFit(f"{self.label}: a batch of {settings.batch} does not fit in the fake GPU's "
                                  f"memory; use a smaller --batch-size")
        self._zeros = ZeroOutputs(spec.output_specs)
        self.info = CardInfo(index=index, backend=FAKE, device=f"fakegpu:{ordinal}", cpus=cpus, emulated=False,
                             details={"fake": True})

    def infer(self, batch: np.ndarray | None, n: int) -> list[np.ndarray]:
        if n > FITS:
            raise BatchDoesNotFit(f"{self.label}: a batch of {n} does not fit in the fake GPU's memory")
        return self._zeros(n)

    def close(self) -> None:
        pass


@pytest.fixture
def fake_gpu(tmp_path_factory, monkeypatch):
    """The fake backend's record in `backends.RECORDS` and one NVIDIA GPU on this process's CPUs; the checks its
    record ran, in order."""
    checked: list[tuple[object, ...]] = []
    record = Backend(FAKE, "gpu", None, None, ("fp32", "int8"), tunable=True, card=FakeGpuCard,
                     libraries=lambda record: checked.append(("libraries", record.name)),
                     starts=lambda record, ordinals: checked.append(("starts", record.name, tuple(ordinals))),
                     available=lambda record: True, settings=fake_settings)
    monkeypatch.setitem(backends.RECORDS, FAKE, record)
    cpus = os.sched_getaffinity(0)
    machine = Machine(sockets=1, cores_per_socket=max(cpus) + 1, threads=1, cores_per_l3=max(cpus) + 1,
                      offline=set(range(max(cpus) + 1)) - cpus,
                      pci=[Pci(bus=0x01, node=0, vendor=NVIDIA, device=H100_PCIE, class_code=DISPLAY_3D_CLASS)])
    root = write_machine(tmp_path_factory.mktemp("fake-gpu-host"), machine)
    monkeypatch.setattr(harness.hw.topology, "detect", lambda: detect(root))
    for var in gpu.VISIBLE_ENVS:
        monkeypatch.delenv(var, raising=False)
    LOADS.clear()
    return checked


def test_the_plan_places_the_fake_backend_on_the_gpu_through_its_record(fake_gpu):
    record = backends.RECORDS[FAKE]
    cards = plan_cards("auto", record, "resnet50", harness.hw.topology.detect())
    assert [g.ordinal for g in cards.gpus] == [0] and cards.how.startswith("--cards cuda:all")
    assert fake_gpu == [("libraries", FAKE), ("starts", FAKE, (0,))]  # the libraries first, then each GPU
    assert len(plan_cards("cuda:allx2", record, "resnet50", harness.hw.topology.detect()).slots) == 2
    with pytest.raises(ApplianceError, match="runs on NVIDIA GPUs"):
        plan_cards("emulate:1", record, "resnet50", harness.hw.topology.detect())


@pytest.mark.slow  # a short tune and LoadGen run
def test_tune_and_run_go_through_the_fake_backend(fake_gpu, data_dir, tmp_path, capsys):
    record = backends.RECORDS[FAKE]
    assert record in available_backends() and record not in available_backends(default=True)  # asked for only
    record = tmp_path / "t" / "resnet50.json"
    assert appliance("tune", "--data-dir", data_dir, "--backends", FAKE, "--precisions", "fp32", "-s", "Offline",
                     "--batch-sizes", "1,8,16,32", "--cards", "cuda:all", "-o", record, "--json") == 0
    tuned = json.loads(capsys.readouterr().out)
    # 16 did not fit (the card said so at load), so 32 was never tried
    assert [m["batch_size"] for m in tuned["measured"]] == [1, 8] and sorted(set(LOADS)) == [1, 8, 16]
    assert all(m["backend"] == FAKE and m["layout"] == "cuda:all" for m in tuned["measured"])
    assert tuned["chosen"]["Offline"]["backend"] == FAKE
    results = tmp_path / "r"
    assert appliance("run", "--data-dir", data_dir, "--results", results, "--tuned", record, "--duration-ms", 300,
                     "--count", 16, "-q") == 0
    (path,) = results.glob("*/resnet50/Offline/performance/run_1/manifest.json")
    manifest = json.loads(path.read_text())
    assert manifest["backend"] == FAKE and [c["device"] for c in manifest["cards"]] == ["fakegpu:0"]
    assert ("starts", FAKE, (0,)) in fake_gpu
    capsys.readouterr()
    assert appliance("run", "--data-dir", data_dir, "--results", tmp_path / "r2", "--backend", FAKE,
                     "--batch-size", 16, "--duration-ms", 300, "--count", 16) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not fit in the fake GPU's memory" in err[0], err  # one line, no internal error


def test_a_backend_its_record_says_is_missing_is_refused_by_tune_in_one_line(fake_gpu, data_dir, tmp_path, capsys,
                                                                             monkeypatch):
    monkeypatch.setitem(backends.RECORDS, FAKE, Backend(FAKE, "gpu", None, card=FakeGpuCard,
                                                         available=lambda record: False, tunable=True))
    assert backends.RECORDS[FAKE] not in available_backends()
    assert appliance("tune", "--data-dir", data_dir, "--backends", FAKE, "-o", tmp_path / "t.json") != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{FAKE} not available here" in err[0], err


def test_every_record_names_functions_that_exist():
    """The records' "module:attribute" references resolve (mypy cannot see them); onnxruntime's GPU ones too."""
    for record in backends.RECORDS.values():
        for ref in (record.card, record.libraries, record.starts, record.available, record.settings):
            if ref is not None:
                assert callable(backends.resolve(ref)), (record.name, ref)


# the recipes ---------------------------------------------------------------------------------------------------
RECIPES = ("Adding a benchmark", "Adding a card backend", "Adding a precision", "Adding a submission round")


def _recipe(title: str) -> str:
    text = (ROOT / "docs" / "developing.md").read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, f"docs/developing.md has no section {title!r}"
    return match.group(1)


def _paths(section: str) -> set[str]:
    """The repository paths a recipe names in backticks (a file or folder, `<name>` placeholders included)."""
    return {p for p in re.findall(r"`([\w./<>*-]+)`", section)
            if "/" in p and re.match(r"(harness|tests|tools|docs|ci)/", p)}


def _touched(section: str, label: str = "Files it touches") -> set[str]:
    """The paths of a recipe's "**Files it touches**:" (or "**Only when**:") paragraph."""
    match = re.search(rf"\*\*{label}\*\*:(.*?)(?=\*\*Only when\*\*|\n\n|$)", section, re.S)
    assert match, f"no **{label}**: paragraph"
    return _paths(match.group(1))


@pytest.mark.parametrize("title", RECIPES)
def test_every_path_a_recipe_names_exists(title):
    paths = _paths(_recipe(title))
    assert paths, title
    missing = [p for p in paths if "<" not in p and not any(ROOT.glob(p))]
    assert not missing, f"{title}: {missing}"


def _file(module: str) -> Path:
    path = ROOT / (module.replace(".", "/") + ".py")
    return path if path.is_file() else ROOT / module.replace(".", "/") / "__init__.py"


def _imported(start: set[str]) -> set[str]:
    """`start` and the card modules they import, transitively (at any depth: inside functions too)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module in seen or not _file(module).is_file():
            continue
        seen.add(module)
        for node in ast.walk(ast.parse(_file(module).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness.run.cards"):
                todo += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return seen


def _card_modules(computing: bool) -> set[str]:
    """The files the records make the harness import, derived from the records: the modules their functions
    (card, libraries, starts, available, settings) live in and the card modules those import, less what the harness
    imports whatever the backend (harness.run.cards and its imports). `computing`: of the backends whose cards infer;
    else of the stand-ins (null, simulated)."""
    named = {ref.partition(":")[0] for b in backends.RECORDS.values() if b.infers == computing
             for ref in (b.card, b.libraries, b.starts, b.available, b.settings) if isinstance(ref, str)}
    return {str(_file(m).relative_to(ROOT)) for m in _imported(named) - _imported({"harness.run.cards"})}


def _name_tables(path: Path, names: set[str]) -> list[str]:
    """Where a module holds backends' names as facts of its own: compares with one, or keys a table by them (two
    or more names as keys of one dict; one such key is a package's name, "openvino": its version)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else \
            [k for k in node.keys if k is not None] if isinstance(node, ast.Dict) else []
        consts = [c for side in sides for c in (side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set)
                                                else [side]) if isinstance(c, ast.Constant) and c.value in names]
        if isinstance(node, ast.Compare) or len(consts) > 1:
            found += [f"{path.relative_to(ROOT)}:{c.lineno} {c.value!r}" for c in consts]
    return found


def test_the_backend_recipe_names_what_a_new_backend_needs():
    """What the recipe must name is derived from the code: the module holding the records, the card module a
    record names (`harness/run/cards/<name>_card.py`, where every computing record's card modules are), and every
    other harness file, card modules included, that holds a computing backend's name as a fact (compares with it or
    keys a table by it: onnxruntime_card's device table was one, which the recipe did not name). No harness module
    imports a computing backend's card modules but those card modules: the records name them as text, imported
    when called."""
    runtime, stand_ins = _card_modules(computing=True), _card_modules(computing=False)
    assert runtime and stand_ins, "the derivation finds nothing: has it gone stale?"
    assert all(m.startswith("harness/run/cards/") for m in runtime | stand_ins), runtime | stand_ins
    names = {b.name for b in backends.RECORDS.values() if b.infers}
    records = str(Path(backends.__file__).resolve().relative_to(ROOT))
    tables = [hit for path in sorted((ROOT / "harness").rglob("*.py")) if str(path.relative_to(ROOT)) != records
              for hit in _name_tables(path, names)]
    needed = {records, "harness/run/cards/<name>_card.py", *(hit.split(":")[0] for hit in tables)}
    section = _recipe("Adding a card backend")
    assert {p for p in _touched(section) if p.startswith("harness/")} == needed, tables
    imports = [f"{path.relative_to(ROOT)} imports {m}" for path in sorted((ROOT / "harness").rglob("*.py"))
               if str(path.relative_to(ROOT)) not in runtime
               for m in _imported({".".join(path.relative_to(ROOT).with_suffix("").parts)}) - {
                   ".".join(path.relative_to(ROOT).with_suffix("").parts)}
               if str(_file(m).relative_to(ROOT)) in runtime]
    assert not imports, imports


def _precision_branches(path: Path, names: set[str]) -> bool:
    return any(isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in names
                                                     for side in (node.left, *node.comparators)
                                                     for c in (side.elts if isinstance(side, ast.Tuple) else [side]))
               for node in ast.walk(ast.parse(path.read_text(), str(path))))


def test_the_precision_recipe_names_every_module_that_branches_on_a_precision():
    """Every harness module that compares with a precision other than fp32 is in the recipe (always or "only
    when"), and the backend records, where who computes it is said."""
    from harness.records.layout import PRECISIONS

    section = _recipe("Adding a precision")
    named = _touched(section) | _touched(section, "Only when")
    names = set(PRECISIONS) - {"fp32"}
    branching = {str(p.relative_to(ROOT)) for p in (ROOT / "harness").rglob("*.py") if _precision_branches(p, names)}
    assert branching, "the scan finds nothing: has it gone stale?"
    assert branching <= named, sorted(branching - named)
    assert {"harness/run/cards/backends.py", "harness/records/layout.py"} <= named
