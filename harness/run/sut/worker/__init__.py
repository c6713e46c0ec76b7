"""One card's worker (`CardWorker`), one object whose methods are split by job, each piece a class of its own
module that the next builds on (the attributes are declared once, in state.py, each with its writer):

    state.py        WorkerState: every attribute and the thread that writes it; `in_hand`, `mark_dead`, the
                    threads' naming and pinning; `Dispatcher`: the four calls a worker may make into dispatch
    staging.py      Staging: a batch staged into a buffer (or found in the replica), handed to the card, its
                    buffer freed; `InFlight`: a batch on the card
    taking.py       Taking: the next batch or warm-up call off the card's queue (then the backlog); the feeder
    failing.py      Failing: a card that raises mid-run, its batches handed back to dispatch
    completing.py   Completing: a batch answered to LoadGen and counted; the done thread's loop (host NMS)
    warm_up.py      WarmUpCard: the card as warm-up and the timed bursts drive it, on its own thread
    card_thread.py  CardThread: the card thread's loop: make the card, keep `depth` batches on it, time them,
                    finish each
    routing.py      Routing: what dispatch asks (`routing_load`, `idle`, `has_room`, `take`, `wake`)
    card_worker.py  CardWorker(CardThread, Routing): the threads made, what the SUT asks on the main thread

One object rather than several talking to each other: the per-batch path reads and writes the counters in one
attribute lookup each, as it did in one class.
"""

from harness.run.sut.worker.card_worker import CardWorker
from harness.run.sut.worker.routing import CANNOT_TAKE
from harness.run.sut.worker.state import CardFactory, Dispatcher, WorkerState
from harness.run.sut.worker.warm_up import WarmUpCard

__all__ = ["CANNOT_TAKE", "CardFactory", "CardWorker", "Dispatcher", "WarmUpCard", "WorkerState"]
