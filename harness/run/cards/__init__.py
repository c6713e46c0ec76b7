"""Card backends: each card is a synchronous `Card` (`infer(batch, n) -> outputs`) or an `AsyncCard`
with several batches in flight (`submit` / `poll` / `wait`); harness/run/cards/base.py has both contracts.

Which backend makes the cards of a run is the only thing the harness asks of this package:
`make_card(spec, index, cpus)` on the card's own (pinned) worker thread. The backend's record
(harness.run.cards.backends, `spec.backend`) names the function that makes its cards, and the one that makes
their settings (`spec.settings`, the card module's own type) from what the plan decided.
"""

from __future__ import annotations

from harness.run.cards.backends import check_computes, resolve
from harness.run.cards.base import AsyncCard, Card
from harness.run.cards.spec import BackendSpec


def make_card(spec: BackendSpec[object], index: int, cpus: tuple[int, ...]) -> Card | AsyncCard:
    if spec.inference_precision is not None:  # the plan refuses it first; a card never computes other than it says
        check_computes(spec.backend, spec.precision)
    made: Card | AsyncCard = resolve(spec.backend.card)(spec, index, cpus)
    return made
