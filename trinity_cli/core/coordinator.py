"""What the core needs from a coordinator: one hidden state per decision, with its cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from trinity_cli.core.records import Truncation
from trinity_cli.core.transcript import Transcript


@dataclass(frozen=True)
class Encoding:
    hidden: np.ndarray  # (d,)
    seconds: float
    tokens: int  # tokens evaluated for this decision (0 when memoized)
    input_truncated: Truncation | None = None  # what the overflow policy cut of the transcript


class TurnStream(Protocol):
    """A turn being encoded while its text streams in."""

    def feed(self, text: str) -> None: ...

    def finish(self) -> None: ...


class Coordinator(Protocol):
    """Coordinators that can encode a turn while it streams also have
    `stream_turn(transcript, agent, role)` returning a TurnStream."""

    hidden_size: int

    def encode(self, transcript: Transcript) -> Encoding: ...
