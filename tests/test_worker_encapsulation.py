"""Nothing outside harness/run/sut/worker/ writes a card worker's attributes: dispatch and the SUT call its
methods (`take`, `mark_dead`, ...), each of which says which thread calls it and what it touches. Inside it, the
worker's pieces (one class per module, all one object) write only the attributes state.py declares, each beside
the thread that writes it.

The check reads the source (no import, no run): in every module of harness/ and tools/ but the worker's own, an
assignment or augmented assignment whose target is an attribute of a worker. A worker is what the code names
as one: a parameter annotated with a worker piece's class (`CardWorker`, `WorkerState`, ...: every class of the
package built on `WorkerState`), a name bound from a `workers` list (a loop, a comprehension, an index) or from
another worker name (`best = w`, tuple assignments too), `<x>.workers[i]`, and `<x>.worker`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = ROOT / "harness" / "run" / "sut" / "worker"
BASE = "WorkerState"  # the class that declares the worker's attributes (OWN / "state.py")


def _classes(path: Path) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)}


def _pieces() -> dict[str, ast.ClassDef]:
    """The worker's classes: `WorkerState` and every class of the package built on it (by their base names)."""
    found = {name: c for p in sorted(OWN.glob("*.py")) for name, c in _classes(p).items()}
    assert BASE in found, f"no class {BASE} in {OWN}: the worker's attributes are declared there"
    pieces = {BASE}
    while grown := {n for n, c in found.items() if n not in pieces and any(
            isinstance(b, ast.Name) and b.id in pieces for b in c.bases)}:
        pieces |= grown
    return {n: found[n] for n in sorted(pieces)}


PIECES = frozenset(_pieces())


def _annotated_worker(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = annotation.value if isinstance(annotation, ast.Constant) else ast.unparse(annotation)
    return isinstance(text, str) and any(name in PIECES for name in text.replace("|", " ").replace(".", " ").split())


def _workers_list(node: ast.expr) -> bool:
    """`workers`, `<x>.workers`, or a slice / copy of one (`list(x.workers)`, `x.workers[1:]`)."""
    if isinstance(node, ast.Name):
        return node.id == "workers"
    if isinstance(node, ast.Attribute):
        return node.attr == "workers"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Slice) and _workers_list(node.value)
    if isinstance(node, ast.Call):
        return any(_workers_list(a) for a in node.args)
    return False


class _Scope(ast.NodeVisitor):
    """One function (or module body): the names that hold a worker, and the attribute writes on them."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.workers: set[str] = set()
        self.writes: list[str] = []

    def is_worker(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.workers
        if isinstance(node, ast.Attribute):
            return node.attr == "worker"
        if isinstance(node, ast.Subscript):
            return not isinstance(node.slice, ast.Slice) and _workers_list(node.value)
        return False

    def bind(self, target: ast.expr, value: ast.expr | None, from_list: bool = False) -> None:
        if isinstance(target, ast.Name):
            if from_list or (value is not None and self.is_worker(value)):
                self.workers.add(target.id)
        elif isinstance(target, ast.Tuple | ast.List):
            values = value.elts if isinstance(value, ast.Tuple | ast.List) else [None] * len(target.elts)
            for t, v in zip(target.elts, values, strict=False):
                self.bind(t, v)

    def written(self, target: ast.expr, node: ast.stmt) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self.written(t, node)
        elif isinstance(target, ast.Attribute) and self.is_worker(target.value):
            self.writes.append(f"{self.path}:{node.lineno}: {ast.unparse(node).splitlines()[0]}")

    # bindings
    def visit_arguments(self, node: ast.arguments) -> None:
        for a in [*node.posonlyargs, *node.args, *node.kwonlyargs]:
            if _annotated_worker(a.annotation):
                self.workers.add(a.arg)

    def visit_For(self, node: ast.For) -> None:
        self.bind(node.target, None, from_list=_workers_list(node.iter))
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.bind(node.target, None, from_list=_workers_list(node.iter))
        self.generic_visit(node)

    # writes (and the bindings they make)
    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.written(target, node)
            self.bind(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.written(node.target, node)
        if isinstance(node.target, ast.Name) and _annotated_worker(node.annotation):
            self.workers.add(node.target.id)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.written(node.target, node)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.bind(node.target, node.value)
        self.generic_visit(node)


def worker_writes(source: str, path: str) -> list[str]:
    """Every attribute write on a worker in `source`, as 'path:line: statement', in line order. Each function is
    a scope with the functions nested in it (closures see its names); the module's own statements are one more."""
    tree = ast.parse(source)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    scopes: list[list[ast.AST]] = [[n for n in tree.body if not isinstance(n, defs)]]
    scopes += [[n] for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    writes: set[str] = set()
    for nodes in scopes:
        scope = _Scope(path)
        for _ in range(2):  # twice: a name bound below its first write in the text (a loop's next turn) counts
            scope.writes.clear()
            for node in nodes:
                scope.visit(node)
        writes.update(scope.writes)
    return sorted(writes, key=lambda w: int(w.split(":")[1]))


def _modules() -> list[Path]:
    return sorted(p for d in ("harness", "tools") for p in (ROOT / d).rglob("*.py") if OWN not in p.parents)


def test_nothing_outside_the_worker_writes_a_workers_attributes() -> None:
    found = [w for p in _modules() for w in worker_writes(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "a worker's attribute written outside harness/run/sut/worker/ (call a method of it):\n" + \
        "\n".join(found)


# The check can fail: dispatch before issue 37 wrote two of a worker's members (its text, as it was).
OLD_DISPATCH = '''
class SystemUnderTest:
    def _dispatch(self, batch: Batch) -> None:
        workers, n = self.workers, len(self.workers)
        best, best_k, best_load = None, 0, float("inf")
        for k in range(n):
            w = workers[(self._next + k) % n]
            if not w.alive or len(w.queue) >= depth:
                continue
            load = w.work_ahead(now) if server else w.in_hand - w.depth + 1
            if load < best_load:
                best, best_k, best_load = w, k, load
        if best is not None:
            self._next = (self._next + best_k + 1) % n
            idle = best.in_hand <= 0
            best.dispatched += 1

    def card_failed(self, worker: CardWorker, why: str) -> None:
        with self._dispatch_lock:
            if not worker.alive:
                return
            worker.alive = False
'''


def test_the_check_finds_the_old_dispatchers_writes() -> None:
    found = worker_writes(OLD_DISPATCH, "dispatch.py")
    assert [line.split(": ", 1)[1] for line in found] == ["best.dispatched += 1", "worker.alive = False"], found


def test_the_check_finds_each_way_of_naming_a_worker() -> None:
    source = '''
def f(sut, other: "CardWorker"):
    for w in sut.workers:
        w.depth = 2
    sut.workers[0].alive = False
    other.finished += 1
    first, rest = sut.workers[0], None
    first.stolen = 3
    sut.worker.on_card = 0
    [setattr(x, "a", 1) for x in sut.workers]  # not an assignment statement: not caught (nor written so anywhere)
    self.depth = 1  # the worker's own idiom elsewhere: not a worker
'''
    found = [line.split(": ", 1)[1] for line in worker_writes(source, "m.py")]
    assert found == ["w.depth = 2", "sut.workers[0].alive = False", "other.finished += 1", "first.stolen = 3",
                     "sut.worker.on_card = 0"], found


def _declared(state: ast.ClassDef) -> set[str]:
    """What `WorkerState` declares: its class-level annotations and what its `__init__` assigns to `self`."""
    names = {n.target.id for n in state.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    init = next(n for n in state.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return names | set(_self_writes(init))


def _self_writes(tree: ast.AST) -> dict[str, int]:
    """Attributes of `self` assigned (or augmented) in `tree`: name -> first line."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for t in targets:
            for e in t.elts if isinstance(t, ast.Tuple | ast.List) else [t]:
                if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                    found.setdefault(e.attr, node.lineno)
    return found


def undeclared(pieces: dict[str, ast.ClassDef]) -> list[str]:
    """Each attribute a piece writes that `WorkerState` does not declare: 'Piece.attr (line)'."""
    declared = _declared(pieces[BASE])
    return [f"{name}.{attr} (line {line})" for name, cls in pieces.items() if name != BASE
            for attr, line in _self_writes(cls).items() if attr not in declared]


def test_the_pieces_write_only_what_state_declares() -> None:
    assert {"CardWorker", "CardThread", "Routing", "Taking"} <= PIECES
    assert not undeclared(_pieces()), "declare it in WorkerState.__init__, with the thread that writes it: " + \
        ", ".join(undeclared(_pieces()))


def test_the_declaration_check_finds_a_new_attribute() -> None:
    source = """
class WorkerState:
    card_thread: object
    def __init__(self) -> None:
        self.finished = 0
class Taking(WorkerState):
    def _take(self) -> None:
        self.finished += 1
        self.card_thread = None
        self.taken_at = 0.0
"""
    pieces = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}
    assert undeclared(pieces) == ["Taking.taken_at (line 10)"]


def test_a_piece_annotation_names_a_worker() -> None:
    found = worker_writes("def card_failed(self, worker: WorkerState, why: str):\n    worker.alive = False\n",
                          "dispatch.py")
    assert [line.split(": ", 1)[1] for line in found] == ["worker.alive = False"], found
