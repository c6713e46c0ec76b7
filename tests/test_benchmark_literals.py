"""Every benchmark fact is in the benchmark record (harness/data/benchmarks.py): outside harness/data no code
names a benchmark as a string literal. A branch on a name, a table keyed by names or a default spelled out
is a fact the catalogue does not see; the record says it (a field), the catalogue's name constants
(`benchmarks.RESNET50`, ...) or `benchmarks.NAMES` name it."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.data import benchmarks

ROOT = Path(__file__).resolve().parents[1] / "harness"
ALLOWED_DIR = ROOT / "data"  # the catalogue and what it is made of
# (file relative to harness/, literal): each with its reason.
ALLOW: dict[tuple[str, str], str] = {
    ("audit/submission/rounds.py", "resnet50"): "the official checker's folder-name guess (get_mlperf_model): a "
    "substring it looks for in others' folder names, not a fact of our benchmark record",
}


def benchmark_names() -> frozenset[str]:
    """The catalogue's names, LoadGen's and the official checker's names of them, and LoadGen's short ones."""
    names = set(benchmarks.NAMES) | {"resnet", "yolo"}
    for name in benchmarks.NAMES:
        record = benchmarks.get(name)
        names |= {record.loadgen_model, record.checker_model}
    return frozenset(names - {""})


def literals_in(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """(line, literal) of each string constant in `source` that is exactly a benchmark name."""
    return sorted((node.lineno, node.value) for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names)


def test_no_benchmark_name_is_a_literal_outside_the_catalogue() -> None:
    names = benchmark_names()
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.is_relative_to(ALLOWED_DIR):
            continue
        rel = str(path.relative_to(ROOT))
        found += [f"harness/{rel}:{line}: {value!r}" for line, value in literals_in(path.read_text(), names)
                  if (rel, value) not in ALLOW]
    assert not found, ("benchmark names as literals outside harness/data (put the fact in the benchmark record "
                       "and read it from there):\n" + "\n".join(found))


def test_the_walk_finds_what_the_code_before_this_change_held() -> None:
    """The literals this test was written against (issue 37: hw/gpu_plan.py's HOST_READS, audit/reproduce.py's
    resnet mapping, the submission rounds keyed by the checker's names) are found; names inside longer
    strings (messages, f-strings) are not."""
    names = benchmark_names()
    before = ('HOST_READS = {"resnet50": (True, False)}\n'
              'name = {"resnet": "resnet50"}.get(t.benchmark, t.benchmark)\n'
              'rules = {"yolo-95": _yolo(0.95), "retinanet": _retinanet(24781)}\n'
              'message = f"yolo-{round(0.95 * 100)}: resnet50 runs no host NMS"\n')
    assert literals_in(before, names) == [(1, "resnet50"), (2, "resnet"), (2, "resnet50"), (3, "retinanet"),
                                          (3, "yolo-95")]
    assert {"resnet", "yolo", "resnet50", "ssd-mobilenet", "retinanet", "yolo-99"} <= names


def test_the_records_state_what_the_literals_did() -> None:
    """The facts moved into the records keep their values."""
    resnet = benchmarks.get(benchmarks.RESNET50)
    assert resnet.outputs_read(2) == (True, False) and resnet.checker_model == "resnet"
    assert benchmarks.of_folder("resnet") == "resnet50" and benchmarks.of_folder("retinanet") == "retinanet"
    assert benchmarks.of_folder("bert-99") == "bert-99"
    assert benchmarks.get("yolo-99").outputs_read(1) == (True,)
