"""What the loop reports as it runs (minGPT-style callbacks): display, --jsonl and logs are
sinks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trinity_cli.core.records import CheckOutcome, Decision, EpisodeResult, TurnRecord


@dataclass(frozen=True)
class TurnStarted:
    decision: Decision


@dataclass(frozen=True)
class TextDelta:
    """A piece of an agent's reply, as it streams."""

    turn: int
    text: str


@dataclass(frozen=True)
class TurnFinished:
    record: TurnRecord


@dataclass(frozen=True)
class CheckFinished:
    """The execution check of the answer standing after `turn`."""

    turn: int
    outcome: CheckOutcome


@dataclass(frozen=True)
class EpisodeFinished:
    result: EpisodeResult


Event = TurnStarted | TextDelta | TurnFinished | CheckFinished | EpisodeFinished
EventSink = Callable[[Event], None]


def ignore(event: Event) -> None:
    """The sink for runs nobody watches (training)."""
