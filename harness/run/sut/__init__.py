"""LoadGen's system under test: queries in, batches to card workers, completions back to LoadGen.

Where things are:

    dispatch.py   SystemUnderTest: the native intake, cutting batches, routing them to cards, the
                  frozen batching policy (`Batching`), failures, `stats()` for the manifest
    worker/       CardWorker: one card's threads (feed, card, done), driving the card through the
                  asynchronous card contract (harness/run/cards/base.py `AsyncCard`), its methods split by
                  job over the package's modules (worker/__init__.py lists them); `Dispatcher`: the four
                  calls a worker may make into dispatch
    messages.py   the values that cross threads: Batch, the card queue's typed messages
                  (Batch | Staged | Ready | Stop | Call), Batching, CardStats, SutStats
    respond.py    encoding a batch's outputs and completing it (one QuerySamplesComplete per batch)
    window.py     the interpreter settings for LoadGen's window (GC off, GIL switch interval), thread names

Threads of a run, and what each one owns
----------------------------------------
Each card has up to three threads, all pinned to the card's CPUs before the card is created (threads
they start, such as onnxruntime's intra-op pool, inherit the affinity and the name):

    intake      takes LoadGen's samples from the native intake, cuts batches and dispatches them.
                Owns: `_next`, `_overdue`; under `_dispatch_lock`: `backlog` (appends), `backlogged`.
    c<i>.feed   takes a batch (own queue first, then the backlog) and stages it into one of the card's
                staging buffers while the card holds up to `depth` others (how many: harness.run.buffers);
                a batch dispatched to an idle card skips it (the card thread stages that one into its own
                buffer: one wake-up instead of two). Owns: `stolen`, its buffer from `free` until it
                puts the `Staged` message. A card that reads no input and takes one batch at a time
                (null) has no feeder: its card thread takes batches itself. A card that copies its
                batches from the replica itself (`ReplicaReader`, the GPU IO-binding card) is staged
                nothing while its replica is page-locked: the same thread (feeder, or card thread for
                OWN) looks the batch's rows up in the replica (`qsl.rows`) instead; the buffer tokens
                from `free` pace it as they pace staging.
    c<i>.card   makes the card, submits staged batches while fewer than `depth` are on it, polls it
                when it signals ready (Server, depth 1, nothing queued: waits on the card itself, the
                GIL released, one wake-up fewer), completes each batch (encode + one
                QuerySamplesComplete) and gives its buffer back to `free`. Owns: the card object (every
                card call but the ready callback and `replica_loaded` happens here), `finished`, `on_card`,
                `busy_until`, `service_s`, `accepted`, `warmup_batches`, and `completed` / `batches` when
                there is no done thread.
    c<i>.done   only for benchmarks with heavy host post-processing (NMS): encodes and completes,
                pipelined with the card. Owns `completed` / `batches` then, and `complete_cpu_ns` (its
                CPU time completing: the host NMS share in the manifest, harness/run/completion_meter.py).
    (the card's runtime threads) may call only the ready callback, which puts `READY` on `to_card`.
    (the loading thread) LoadGen's load / unload callback (`SampleLibrary.load`; warm-up's own load on the
                main thread) calls each replica reader's watch, `_replica_loaded`, with no batch in flight:
                the card page-locks the new replica and the watch writes the worker's `from_replica`,
                which the feeder and card thread read when they next take a batch.

How the threads meet
--------------------
Dispatch and a worker meet only in methods, each of which says in its docstring which thread calls it,
under which lock, and what it reads and writes: the worker's `routing_load`, `idle`, `has_room`, `take`,
`mark_dead`, `wake` (called by dispatch: worker/routing.py, worker/state.py) and `load`, `loaded`, `call`,
`post`, `stop`, `join`, `stats` (called by the SUT on the main thread: worker/card_worker.py); dispatch's
`Dispatcher` methods (called by a worker's threads). No module outside worker/ writes a worker's attributes,
and its pieces write only those worker/state.py declares (tests/test_worker_encapsulation.py). The rules those
docstrings apply:
- `_dispatch_lock` guards dispatch decisions, `backlog` appends, `card_failures`, `failure`, and what
  `take` and `mark_dead` write (a worker's `dispatched`, `queue` appends, `to_card` puts, `alive`). Card
  threads take it only to re-dispatch a failed card's batches or to report the failure.
- A worker's `queue` is appended by `take` and popped under the worker's `cv`; the taking thread sets
  `waiting` before it looks, so a `take` appending after the look wakes it.
- Counters are written by one thread each (above) and read by others without a lock: one attribute
  store, so a reader sees the old value or the new one. In routing a stale read only makes one choice
  slightly worse, never loses a batch; `in_hand` (dispatched + stolen - finished) may be read mid-update
  for the same reason. `backlog.popleft()` runs without the lock from any taking thread (a deque's
  append and popleft are atomic). Every other queue between threads is a `queue.SimpleQueue`.
- The batching policy is a frozen `Batching` handed to the intake thread as it starts; nothing
  writes it afterwards (an earlier bug set the deadline on a running SUT).

Failures: a card that raises is marked failed: its batches in flight, staged and queued go back to
dispatch and run on the other cards, and the failure is recorded (`card_failures`). When no card is
left, every outstanding sample is completed empty so LoadGen never hangs, and `failure` says why;
the runner then ends the run INVALID with that one line.
"""

from harness.run.sut.dispatch import SystemUnderTest
from harness.run.sut.messages import QUEUE_DEPTH, Batch, Batching, CardSlot, CardStats, SutStats
from harness.run.sut.window import loadgen_window, name_os_thread
from harness.run.sut.worker import CardFactory, CardWorker, Dispatcher

__all__ = ["QUEUE_DEPTH", "Batch", "Batching", "CardFactory", "CardSlot", "CardStats", "CardWorker", "Dispatcher",
           "SutStats", "SystemUnderTest", "loadgen_window", "name_os_thread"]
