"""The four LoadGen scenarios and the two test modes, as enums.

Text becomes a `Scenario` / `Mode` once, where it comes in (the CLI, `Requested`, a results tree's folder
names), and is compared and passed as one everywhere else, so a misspelt "Ofline" is a type error rather
than a branch never taken. They are StrEnums: a member equals, formats and serialises as its string
(`Scenario.OFFLINE == "Offline"`, `f"{Scenario.OFFLINE}"` is "Offline"), so folder names, user.conf keys,
logs and JSON are exactly what they were with plain strings.
"""

from __future__ import annotations

from enum import StrEnum

from harness.core.errors import ApplianceError

__all__ = ["MODES", "SCENARIOS", "Mode", "Scenario", "parse_mode", "parse_scenario"]


class Scenario(StrEnum):
    OFFLINE = "Offline"
    SERVER = "Server"
    SINGLE_STREAM = "SingleStream"
    MULTI_STREAM = "MultiStream"


class Mode(StrEnum):
    PERFORMANCE = "performance"   # timed run
    ACCURACY = "accuracy"         # every sample once, scored


# The CLI's spellings, in the order its help lists them (plain strings: click.Choice of an Enum would
# match the members' names, OFFLINE, instead of their values).
SCENARIOS: tuple[str, ...] = tuple(s.value for s in Scenario)
MODES: tuple[str, ...] = tuple(m.value for m in Mode)


def parse_scenario(text: str) -> Scenario:
    """`text` as a Scenario, or one line naming the choices. Readers of other people's trees use
    `harness.audit.submission.rounds.SCENARIO_SPELLINGS.get` instead, which never raises."""
    try:
        return Scenario(text)
    except ValueError:
        raise ApplianceError(f"unknown scenario {text!r}; choose one of: {', '.join(SCENARIOS)}") from None


def parse_mode(text: str) -> Mode:
    """`text` as a Mode, or one line naming the choices."""
    try:
        return Mode(text)
    except ValueError:
        raise ApplianceError(f"unknown mode {text!r}; choose one of: {', '.join(MODES)}") from None
