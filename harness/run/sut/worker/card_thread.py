"""A card's own thread (`c<i>.card`): it makes the card, then keeps up to `depth` batches on it, times each for
Server's routing estimate, and finishes each as it comes back (completed here, or handed to the done thread).
Every card call but the ready callback and `replica_loaded` happens on this thread.
"""

from __future__ import annotations

import time
from collections import deque

from harness.run import buffers
from harness.run.buffers import OWN
from harness.run.cards.base import AsyncCard, FromReplica, Outputs, as_async
from harness.run.sut.messages import READY, Batch, Call, Ready, Staged, Stop
from harness.run.sut.worker.completing import Completing
from harness.run.sut.worker.failing import Failing
from harness.run.sut.worker.staging import InFlight
from harness.run.sut.worker.state import Input
from harness.run.sut.worker.warm_up import WarmUpCard


class CardThread(Failing, Completing):
    """The card thread's loop: make the card, run batches on it, finish them."""

    def _card_loop(self) -> None:
        self._pin("card")
        try:
            card = as_async(self.factory(self.slot.index, self.slot.cpus))
            card.set_ready_callback(lambda: self.to_card.put(READY))
            self.reader = card if isinstance(card, FromReplica) else None
            self.info = card.info
            self.depth = max(1, int(card.depth))
            self.direct = card.input_dtype is None and self.depth == 1
            # The depth rule (harness.run.buffers): the feeder's, then the card thread's own (OWN). A card that
            # copies from the replica itself uses them only if it cannot (their pages are touched only then).
            self.buffers = buffers.card_staging(self.depth, self.batch_size, self.qsl.benchmark.input_shape,
                                                card.input_dtype)
            card.register_host_buffers([b for b in self.buffers if b is not None])  # a GPU card page-locks them
            if self.reader is not None:  # it page-locks each replica loaded (now too, if one is)
                self.qsl.watch(self.qsl.replica_for(self.slot.index), self._replica_loaded)
        except BaseException as exc:  # reported by SystemUnderTest.start on the main thread
            self.startup_error = exc
            self.ready.set()
            return
        if self.completer is not None:
            self.completer.start()
        if not self.direct:
            for b in range(buffers.feeder_count(self.depth)):
                self.free.put(b)
            self.feeder = self._thread(self._feed_loop, "feed")
            self.feeder.start()
        self.ready.set()
        try:
            if self.direct:
                self._take_and_run(card)
            else:
                self._run_staged(card)
        finally:
            if self.reader is not None:
                self.qsl.unwatch(self._replica_loaded)
            card.close()
            if self.to_done is not None:
                self.to_done.put(None)

    def _run_staged(self, card: AsyncCard) -> None:
        """Take messages, keep up to `depth` batches on the card, complete each as it comes back."""
        pending: deque[Staged] = deque()  # staged, waiting for a slot on the card
        flight: deque[InFlight] = deque()
        view = WarmUpCard(self, card)
        while True:
            msg = self.to_card.get()
            if isinstance(msg, Stop):
                break
            if isinstance(msg, Call):
                msg.run(view)
                continue
            if isinstance(msg, Batch):  # dispatched to this card while idle: staged here, no feeder hop
                pending.append(self._stage(msg, OWN))
            elif isinstance(msg, Staged):
                pending.append(msg)
            else:
                assert isinstance(msg, Ready)
            self._drive(card, pending, flight)
            if self.server and self.depth == 1 and flight and self.alive and self.to_card.empty():
                self._wait_here(card, pending, flight)
        for item in pending:
            self._release(item.buf)
        while flight and self.alive:  # the run is over: let the card finish what it reads, drop the outputs
            try:
                card.wait()
            except Exception:
                break
            self._release(flight.popleft().buf)

    def _wait_here(self, card: AsyncCard, pending: deque[Staged], flight: deque[InFlight]) -> None:
        """Server, a card of depth 1 holding its batch, nothing else to do: wait for it on this thread (GIL
        released) rather than sleep until the card's ready signal wakes it, one thread wake-up fewer per
        batch, which at low load on an idle CPU is most of the harness's tail (BENCHMARKS.md, real CPU
        Server). The ready signal still comes and finds nothing to collect."""
        try:
            outputs = card.wait()
        except Exception as exc:
            self._fail_holding(exc, [], flight)
            return
        self._landed(flight.popleft(), outputs)
        self._drive(card, pending, flight)

    def _drive(self, card: AsyncCard, pending: deque[Staged], flight: deque[InFlight]) -> None:
        """Collect what the card has finished, then submit pending batches while it has room."""
        while True:
            while flight:
                try:
                    outputs = card.poll()
                except Exception as exc:
                    self._fail_holding(exc, [], flight)
                    break
                if outputs is None:
                    break
                self._landed(flight.popleft(), outputs)
            if not pending or (len(flight) >= self.depth and self.alive):
                return
            item = pending.popleft()
            if not self.alive:  # failed earlier: staged batches go back to dispatch
                self._release(item.buf)
                self.dispatch.redispatch(item.batch)
                continue
            start = time.perf_counter() if self.server else 0.0  # before: a synchronous card runs in submit
            try:
                if item.error is not None:
                    raise item.error
                self._submit(card, item.staged, len(item.batch), start)
            except Exception as exc:
                self._release(item.buf)
                self._fail_holding(exc, [item.batch], flight)
                continue
            flight.append(InFlight(item.batch, item.buf, start))

    def _submit(self, card: AsyncCard, staged: Input, n: int, start: float) -> None:
        if self.server and not self.on_card:
            self.busy_until = start + self.service_s
        self.on_card += 1
        try:
            self._hand(card, staged, n)
        except BaseException:
            self.on_card -= 1
            raise
        self.accepted += 1

    def _landed(self, done: InFlight, outputs: Outputs) -> None:
        """A batch back from the card: its buffer is free, its time feeds the Server estimate, then finish."""
        self._release(done.buf)
        self.on_card -= 1
        if self.server:
            now = time.perf_counter()
            took = now - done.submitted
            self.service_s = took if not self.service_s else self.service_s + 0.125 * (took - self.service_s)
            self.busy_until = now + self.service_s  # the next oldest: at most one batch time from now
        self._finish(done.batch, outputs)

    def _take_and_run(self, card: AsyncCard) -> None:
        """A card without input, one batch at a time: take, run and complete on this one thread."""
        view = WarmUpCard(self, card)
        while (item := self._take()) is not None:
            if isinstance(item, Call):
                item.run(view)
                continue
            try:
                start = time.perf_counter() if self.server else 0.0
                self._submit(card, None, len(item), start)
                outputs = card.wait()
            except Exception as exc:
                self._fail(exc, [item])
                break
            self._landed(InFlight(item, OWN, start), outputs)
        if not self.alive:
            self._give_back_queue()

    def _finish(self, samples: Batch, outputs: Outputs) -> None:
        """Count the batch, let an overdue Server batch come if this card now has room, then complete
        here or hand the outputs to the NMS thread."""
        self.finished += 1
        if self.in_hand < self.depth:
            self.dispatch.card_has_room()
        if self.to_done is None:
            self._complete(samples, outputs)
        else:
            self.to_done.put((samples, outputs))
