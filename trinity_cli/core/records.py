"""What one episode produces: each decision, each finished turn, the execution check, the result.

The loop (`core.episode`) makes them; the events (`core.events`) carry them to the display,
`--jsonl` and the run log.
"""

from __future__ import annotations

from dataclasses import dataclass

from trinity_cli.core.roles import ROLE_ORDER, Role
from trinity_cli.core.transcript import Turn


@dataclass(frozen=True)
class CheckOutcome:
    """An answer's execution check: run by the caller (the sandbox), judged by the loop."""

    passed: bool
    summary: str
    # what checked it (TestSuite.source), or "syntax": the answer did not parse, so no test ran
    source: str


@dataclass(frozen=True)
class Truncation:
    """What one reader (the coordinator, or an agent) cut of its input to fit its context, in
    its own tokens. `reader` names it (one warning each); `note` says what was cut, in words."""

    kept_tokens: int
    dropped_tokens: int
    reader: str = ""
    note: str = ""

    def as_json(self) -> dict[str, int]:
        return {"kept_tokens": self.kept_tokens, "dropped_tokens": self.dropped_tokens}


def largest_cut(*cuts: Truncation | None) -> Truncation | None:
    """The cut that dropped the most tokens; None when nothing was cut."""
    return max((c for c in cuts if c is not None), key=lambda c: c.dropped_tokens, default=None)


@dataclass(frozen=True)
class Decision:
    turn: int
    agent_index: int
    agent: str
    role: Role
    role_source: str  # "head" | "thinker"
    agent_probs: tuple[float, ...]
    role_probs: tuple[float, ...]
    coordinator_seconds: float
    coordinator_tokens: int
    chosen_probability: float | None = None  # of this choice, when a role mask made it differ
    input_truncated: Truncation | None = (
        None  # what the coordinator cut of the transcript to read it
    )

    @property
    def probability(self) -> float:
        """The policy's probability of this (agent, role) choice (of the agent, given the role,
        when a Thinker named the role)."""
        if self.chosen_probability is not None:
            return self.chosen_probability
        role_p = (
            1.0 if self.role_source == "thinker" else self.role_probs[ROLE_ORDER.index(self.role)]
        )
        return self.agent_probs[self.agent_index] * role_p


@dataclass(frozen=True)
class TurnRecord:
    decision: Decision
    text: str
    answer: str | None
    verdict: str | None
    tokens_in: int
    tokens_out: int
    usd: float
    usd_estimated: bool
    seconds: float
    truncated: bool = False  # the reply stopped at max_tokens
    prompt_truncated: Truncation | None = None  # what the agent cut of its prompt

    @property
    def input_truncated(self) -> Truncation | None:
        """The turn's largest cut: the coordinator's reading of the transcript, or the agent's
        prompt."""
        return largest_cut(self.decision.input_truncated, self.prompt_truncated)

    def as_turn(self) -> Turn:
        """The turn as the transcript keeps it."""
        return Turn(self.decision.agent, self.decision.role, self.text, self.answer, self.verdict)


@dataclass(frozen=True)
class EpisodeResult:
    verdict: str
    answer: str | None
    turns: tuple[TurnRecord, ...]
    usd: float
    error: str | None = None
    check: CheckOutcome | None = None  # the final answer's execution check, when there was one

    @property
    def input_truncated(self) -> Truncation | None:
        """The run's largest cut of any input, by any reader; None when all was read."""
        return largest_cut(*(t.input_truncated for t in self.turns))

    @property
    def verifier_verdict(self) -> str | None:
        """The last Verifier's own verdict, whatever the execution check said."""
        verdicts = [t.verdict for t in self.turns if t.verdict is not None]
        return verdicts[-1] if verdicts else None
