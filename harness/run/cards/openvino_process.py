"""OpenVINO card in a worker process of its own, pinned to the card's CPUs before OpenVINO is imported.

Why a process: in one process OpenVINO 2026.4.1's CPU plugin does not keep a card's inference on the
card's CPUs (docs/run.md, "--backend openvino"): with its pinning off its stream threads take the process's
CPUs, with pinning on (and CPU reservation) it places streams by its own CPU map in compile order, not
by the compiling thread's affinity. A process whose affinity is the card's CPUs from its first
instruction leaves OpenVINO nothing else to see, so every thread it starts stays there.

Shape. The parent side (`OpenVinoProcessCard`, an `AsyncCard`, made on the card thread) starts
`python -m harness.run.cards.openvino_process` from that thread, so the child inherits the card's CPUs,
and the child sets them again before importing anything but the standard library and numpy. The child
runs an ordinary `OpenVinoCard` on them. Batches travel through two shared-memory segments per card,
each `depth` slots of the compiled batch: the parent copies a staged batch into an input slot (the
one extra copy this path costs; OpenVINO reads the slot in place), the child writes the outputs into
the matching output slot. Control messages (pickled tuples) go over the child's stdin / stdout:

    parent -> child   ("map", n, input_segment, output_segment, output_specs)   slots of n samples from now on
                      ("infer", slot, n)                           run the batch in that input slot
                      ("close",)                                   finish and exit (so does EOF)
    child -> parent   ("ready", input_dtype, sample_dims, depth, details)   once, after loading the model
                      ("done", slot)                               outputs are in that slot (submission order)
                      ("error", kind, message)                     then it exits

The parent owns the segments (created and unlinked here; Python's resource tracker unlinks them if the
parent itself is killed); the child only maps them. A child that dies is the card's error: the next
`poll` / `wait` / `submit` raises it in one line, with the exit status and the child's last stderr line.
"""

from __future__ import annotations

import mmap
import os
import pickle
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import shared_memory
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

import harness
from harness.core import environment
from harness.core.errors import ApplianceError, DataError
from harness.run.cards.backends import Planned
from harness.run.cards.base import CardInfo, Outputs, PageableHostBuffers
from harness.run.cards.spec import PROCESS_ENV, BackendSpec, own

if TYPE_CHECKING:
    from harness.run.cards.openvino_card import OpenVinoCard

SEGMENT_PREFIX = "appliance-ov"  # /dev/shm/appliance-ov-<pid>-c<card>-<in|out><n>
ERRORS: dict[str, type[Exception]] = {"DataError": DataError, "ApplianceError": ApplianceError}
CLOSE_TIMEOUT_S = 30.0


def _send(pipe: IO[bytes], message: tuple[Any, ...]) -> None:
    pickle.dump(message, pipe, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.flush()


def _slots(buf: memoryview | mmap.mmap, depth: int, n: int,
           shapes: list[tuple[tuple[int, ...], str]]) -> list[list[np.ndarray]]:
    """Views of a segment as `depth` slots, each one array per shape of n samples, laid out one after another."""
    views, offset = [], 0
    for _ in range(depth):
        slot = []
        for shape, dtype in shapes:
            a = np.ndarray((n, *shape), dtype=dtype, buffer=buf, offset=offset)
            offset += a.nbytes
            slot.append(a)
        views.append(slot)
    return views


def _segment_bytes(depth: int, n: int, shapes: list[tuple[tuple[int, ...], str]]) -> int:
    return max(1, depth * n * sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in shapes))


class OpenVinoProcessCard(PageableHostBuffers):
    """An openvino card whose inference runs in a child process pinned to `cpus`; `depth` = the child's
    infer requests. Made, driven and closed on the card thread (the `AsyncCard` contract); a reader
    thread of its own (started there, so on the card's CPUs) turns the child's messages into ready calls."""

    def __init__(self, index: int, model_path: Path, input_name: str, outputs: tuple[str, ...],  # noqa: PLR0913
                 output_specs: tuple[tuple[tuple[int, ...], str], ...], cpus: tuple[int, ...],
                 requests: int = 1, inference_precision: str = "f32", *, backend: str) -> None:
        self.index = index
        self.cpus = tuple(cpus) or tuple(sorted(os.sched_getaffinity(0)))
        self.output_specs = [(tuple(s), d) for s, d in output_specs]
        self._death_lock = threading.Lock()
        self._why = ""
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (the child's stderr, closed in close())
        root = str(Path(harness.__file__).resolve().parents[1])
        env = environment.child(PYTHONPATH=os.pathsep.join(p for p in (root, environment.raw("PYTHONPATH")) if p))
        # started from the card thread: the child inherits the card's CPUs at fork, before it runs anything
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.run.cards.openvino_process", ",".join(map(str, self.cpus)), str(index),
             str(model_path), input_name, ",".join(outputs), str(requests), inference_precision, backend],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.to_child, self.from_child = self.proc.stdin, self.proc.stdout
        try:
            hello = pickle.load(self.from_child)
        except (EOFError, pickle.UnpicklingError):
            hello = ("error", "RuntimeError", self._death())
        if hello[0] == "error":
            self._reap()
            for f in (self.to_child, self.from_child, self.stderr):
                f.close()
            raise ERRORS.get(hello[1], RuntimeError)(hello[2])
        _, self.input_dtype, dims, self.depth, details = hello
        self.sample_dims: tuple[int, ...] = tuple(dims)
        self.info = CardInfo(index=index, backend=backend, device="cpu-emulated", cpus=self.cpus, emulated=True,
                             details={**details, "worker_process": self.proc.pid,
                                      "affinity": "worker process pinned to the card's CPUs before importing OpenVINO"})
        self.capacity = 0  # samples per slot of the mapped segments
        self.segments: list[shared_memory.SharedMemory] = []
        self.inputs: list[list[np.ndarray]] = []
        self.outputs: list[list[np.ndarray]] = []
        self._next = 0
        self._flight: deque[tuple[int, int]] = deque()  # (slot, n), submission order
        self._ready: Callable[[], None] = lambda: None
        self._done: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._closing = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def set_ready_callback(self, ready: Callable[[], None]) -> None:
        self._ready = ready

    def _read(self) -> None:
        """The child's messages, in order: each 'done' (and a death, as an error) queued, then ready."""
        while True:
            try:
                message = pickle.load(self.from_child)
            except (EOFError, OSError, pickle.UnpicklingError):
                if self._closing:
                    return
                message = ("error", "RuntimeError", self._death())
            self._done.put(message)
            self._ready()
            if message[0] == "error":
                return

    def _death(self) -> str:
        """One line on why the child ended: its exit status and the last line it wrote to stderr."""
        with self._death_lock:  # the reader and the card thread (a failed send) may both ask
            if not self._why:
                self._why = self._why_ended()
            return self._why

    def _why_ended(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        how = ("did not exit" if code is None else f"was killed by {signal.Signals(-code).name}" if code < 0
               else f"exited with status {code}")
        self.stderr.seek(0)
        lines = [line.strip() for line in self.stderr.read().decode(errors="replace").splitlines() if line.strip()]
        return (f"openvino worker process of card {self.index} (pid {self.proc.pid}) {how}"
                + (f"; its last message: {lines[-1][:200]}" if lines else ""))

    def _map(self, n: int) -> None:
        """Segments of `depth` slots of n samples (the batch the child compiles for), replacing any before."""
        self._unmap()
        shapes_in = [(self.sample_dims, self.input_dtype)]
        names = []
        for kind, shapes in (("in", shapes_in), ("out", self.output_specs)):
            name = f"{SEGMENT_PREFIX}-{os.getpid()}-c{self.index}-{kind}{n}"
            shm = shared_memory.SharedMemory(name=name, create=True, size=_segment_bytes(self.depth, n, shapes))
            self.segments.append(shm)
            names.append(name)
        self.inputs, self.outputs = (_slots(shm.buf, self.depth, n, shapes)  # type: ignore[arg-type]
                                     for shm, shapes in zip(self.segments, (shapes_in, self.output_specs), strict=True))
        self.capacity = n
        self.info.details["compiled_batch"] = n
        self._tell(("map", n, *names, self.output_specs))

    def _unmap(self) -> None:
        self.inputs, self.outputs = [], []
        for shm in self.segments:
            shm.close()
            shm.unlink()
        self.segments = []

    def _tell(self, message: tuple[Any, ...]) -> None:
        try:
            _send(self.to_child, message)
        except OSError:  # the child is gone: say why
            raise RuntimeError(self._death()) from None

    def submit(self, batch: np.ndarray | None, n: int) -> None:
        if n > self.capacity:
            if self._flight:
                raise RuntimeError(f"batch of {n} with batches in flight on a card compiled for {self.capacity}")
            self._map(n)
        slot = self._next
        self._next = (slot + 1) % self.depth
        assert batch is not None
        self.inputs[slot][0][:n] = batch[:n]
        self._tell(("infer", slot, n))
        self._flight.append((slot, n))

    def _take(self, message: tuple[Any, ...]) -> Outputs:
        if message[0] == "error":
            self._done.put(message)  # sticky: every later call raises it too
            raise ERRORS.get(message[1], RuntimeError)(message[2])
        slot, n = self._flight.popleft()
        assert message == ("done", slot), (message, slot)
        return [out[:n].copy() for out in self.outputs[slot]]  # copies: the slot is reused

    def poll(self) -> Outputs | None:
        if not self._flight or self._done.empty():
            return None
        return self._take(self._done.get())

    def wait(self) -> Outputs:
        return self._take(self._done.get())

    def close(self) -> None:
        self._closing = True
        try:
            _send(self.to_child, ("close",))
            self.to_child.close()
        except OSError:
            pass  # already gone
        self._reap()
        self._reader.join(timeout=CLOSE_TIMEOUT_S)
        self.from_child.close()
        self.stderr.close()
        self._unmap()

    def _reap(self) -> None:
        try:
            self.proc.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# the child ----------------------------------------------------------------------------------------

class _Child:
    """The worker process's side: one `OpenVinoCard`, commands from stdin and its ready calls on one queue."""

    def __init__(self, card: Any, reply: IO[bytes], dims: tuple[int, ...]) -> None:
        self.card, self.reply, self.dims = card, reply, dims
        self.inbox: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self.maps: list[mmap.mmap] = []
        self.inputs: list[list[np.ndarray]] = []
        self.outputs: list[list[np.ndarray]] = []
        self.flight: deque[int] = deque()
        card.set_ready_callback(lambda: self.inbox.put(("ready",)))

    def listen(self) -> None:
        """Stdin's messages onto the inbox; EOF (the parent went away) as None."""
        stdin = sys.stdin.buffer
        while True:
            try:
                message = pickle.load(stdin)
            except (EOFError, OSError, pickle.UnpicklingError):
                self.inbox.put(None)
                return
            self.inbox.put(message)

    def map(self, n: int, input_name: str, output_name: str, output_specs: list[tuple[tuple[int, ...], str]]) -> None:
        self.inputs, self.outputs = [], []
        self.maps = []  # old mappings go when their views do
        shapes_in = [(self.dims, self.card.input_dtype)]
        for name in (input_name, output_name):
            with open(f"/dev/shm/{name}", "r+b") as f:
                self.maps.append(mmap.mmap(f.fileno(), 0))
        self.inputs = _slots(self.maps[0], self.card.depth, n, shapes_in)
        self.outputs = _slots(self.maps[1], self.card.depth, n, output_specs)

    def serve(self) -> None:
        while (message := self.inbox.get()) is not None and message[0] != "close":
            if message[0] == "map":
                self.map(*message[1:])
            elif message[0] == "infer":
                slot, n = message[1], message[2]
                self.card.submit(self.inputs[slot][0][:n], n)
                self.flight.append(slot)
            else:  # ready: every finished batch, in order
                while self.flight and (outs := self.card.poll()) is not None:
                    slot = self.flight.popleft()
                    for dst, src in zip(self.outputs[slot], outs, strict=True):
                        np.copyto(dst[:len(src)], src, casting="same_kind")
                    _send(self.reply, ("done", slot))
        self.card.close()


def child_main(argv: list[str]) -> int:
    """`python -m harness.run.cards.openvino_process CPUS INDEX MODEL INPUT OUTPUTS REQUESTS PRECISION BACKEND`: pin,
    then import OpenVINO."""
    cpus = tuple(int(c) for c in argv[0].split(","))
    os.sched_setaffinity(0, cpus)  # before anything starts a thread
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes or leaves us EOF
    reply = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (OpenVINO's, a library's) go to stderr, never into the message pipe
    index, model_path, input_name, outputs = int(argv[1]), Path(argv[2]), argv[3], tuple(argv[4].split(","))
    requests, inference_precision, backend = int(argv[5]), argv[6], argv[7]
    try:
        from harness.run.cards.openvino_card import OpenVinoCard

        card = OpenVinoCard(index, model_path, input_name, outputs, cpus, requests, inference_precision,
                            backend=backend)
    except (ApplianceError, DataError) as exc:
        _send(reply, ("error", type(exc).__name__, str(exc)))
        return 2
    dims = tuple(d.get_length() for d in list(card.model.input(input_name).get_partial_shape())[1:])
    _send(reply, ("ready", card.input_dtype, dims, card.depth, card.info.details))
    child = _Child(card, reply, dims)
    threading.Thread(target=child.listen, daemon=True).start()
    try:
        child.serve()
    except Exception as exc:  # the card's error, to the parent in one line
        _send(reply, ("error", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else repr(exc)))
        return 1
    return 0



@dataclass(frozen=True)
class OpenvinoSettings:
    """The openvino record's settings: infer requests per card, and whether each card runs in a worker process."""

    requests: int = 1       # infer requests (one stream each) per card, its depth: `appliance run --requests`
    processes: bool = False  # each card in a pinned worker process of its own (a run of several cards)


def settings(planned: Planned) -> OpenvinoSettings:
    """The openvino record's `settings`: the run's requests per card; worker processes when it has several cards."""
    return OpenvinoSettings(planned.requests, planned.cards > 1)


def from_spec(spec: BackendSpec[OpenvinoSettings], index: int,
              cpus: tuple[int, ...]) -> OpenVinoCard | OpenVinoProcessCard:
    """The openvino backend's cards (its record's `card`): each in a worker process of its own with
    `processes` (several cards) or APPLIANCE_OPENVINO_PROCESS=1, else in this process; in the precision the model
    record asks (bf16), else f32."""
    assert spec.model_path is not None
    own_settings = own(spec, OpenvinoSettings)
    precision = spec.inference_precision or "f32"
    if own_settings.processes or environment.switch(PROCESS_ENV):
        return OpenVinoProcessCard(index, spec.model_path, spec.input_name, spec.outputs, spec.output_specs, cpus,
                                   own_settings.requests, precision, backend=spec.backend.name)
    from harness.run.cards.openvino_card import OpenVinoCard

    return OpenVinoCard(index, spec.model_path, spec.input_name, spec.outputs, cpus, own_settings.requests,
                        precision, backend=spec.backend.name)


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
