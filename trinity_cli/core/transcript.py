"""The conversation so far, and the two ways it is shown: to the coordinator and to agents.

Transcript formats (what the coordinator reads; every head records the id it was trained on,
and the coordinator reads a head's transcripts in that format):

    trinity-tf2 (current)
    segment 0:  "Task:\\n{problem}\\n"                              (tokenized with BOS)
    segment i:  "\\n[turn {i} | {agent} | {role}]\\n{text}"            (one per turn, no BOS)
    cue:        "\\n[next] Who acts next, and in which role?\\n"

    trinity-tf1 (the first heads'): each turn segment also ends "\\n[end of turn {i} | {agent} |
    {role}]\\n".

tf2 drops the end tag because a streamed turn's decision has to evaluate it after the agent's
last token (14 or more tokens, more than the cue). The cue stays: a first decision (no turns
yet) reads the same state in both formats.

Each segment is tokenized on its own and the token ids are concatenated, so the ids of a
transcript never change when a turn is appended: an incremental encode and a full re-encode
see the same ids. The hidden state is read at a fixed position of the cue (default: its
penultimate token, the paper's choice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trinity_cli.core.roles import Role

DECISION_CUE = "\n[next] Who acts next, and in which role?\n"


@dataclass(frozen=True)
class TranscriptFormat:
    id: str
    end_tags: bool  # each turn segment ends with "[end of turn ...]"


TF1 = TranscriptFormat("trinity-tf1", end_tags=True)
TF2 = TranscriptFormat("trinity-tf2", end_tags=False)
FORMATS = {f.id: f for f in (TF1, TF2)}
CURRENT_FORMAT = TF2  # what new heads are trained on

# Agents see at most this many previous turns, each clipped, so prompts stay bounded.
AGENT_VIEW_TURNS = 6
AGENT_VIEW_CHARS = 3000


@dataclass(frozen=True)
class Problem:
    """A coding task: the statement, and the code an answer continues (signature + docstring)."""

    text: str
    code_prompt: str = ""
    task_id: str = ""  # set for tasks of a task set (the simulated pool looks them up)
    stdin_program: bool = False  # the answer is a whole program: input on stdin, output on stdout

    @classmethod
    def from_markdown(cls, text: str, stdin_program: bool = False) -> Problem:
        """The code prompt of a Markdown problem is its last Python fenced block, if any."""
        blocks = re.findall(r"```(?:python|py)[^\n]*\n(.*?)```", text, re.DOTALL)
        return cls(text=text, code_prompt=blocks[-1] if blocks else "", stdin_program=stdin_program)


@dataclass(frozen=True)
class Turn:
    agent: str
    role: Role
    text: str
    answer: str | None = None  # Worker turns: the code extracted from the reply
    verdict: str | None = None  # Verifier turns: accept | reject | malformed


@dataclass(frozen=True)
class Transcript:
    problem: Problem
    turns: tuple[Turn, ...] = field(default_factory=tuple)

    def with_turn(self, turn: Turn) -> Transcript:
        return Transcript(self.problem, self.turns + (turn,))

    @property
    def latest_answer(self) -> str | None:
        for turn in reversed(self.turns):
            if turn.answer is not None:
                return turn.answer
        return None

    def coordinator_segments(
        self, fmt: TranscriptFormat = CURRENT_FORMAT, *, last_open: bool = False
    ) -> list[str]:
        """The segments in format `fmt`, problem first; the cue is not included.

        `last_open`: the last turn is still being written, so its segment has no end tag yet."""
        segments = [f"Task:\n{self.problem.text.strip()}\n"]
        for i, turn in enumerate(self.turns, start=1):
            tag = f"turn {i} | {turn.agent} | {turn.role.value}"
            closed = fmt.end_tags and not (last_open and i == len(self.turns))
            end = f"\n[end of {tag}]\n" if closed else ""
            segments.append(f"\n[{tag}]\n{turn.text.strip()}{end}")
        return segments

    def agent_view(self) -> str:
        """The task and the most recent turns, as an agent's user message."""
        parts = [f"## Task\n\n{self.problem.text.strip()}"]
        recent = self.turns[-AGENT_VIEW_TURNS:]
        first = len(self.turns) - len(recent) + 1
        for i, turn in enumerate(recent, start=first):
            text = turn.text.strip()
            if len(text) > AGENT_VIEW_CHARS:
                text = text[: AGENT_VIEW_CHARS // 2] + "\n[...]\n" + text[-AGENT_VIEW_CHARS // 2 :]
            parts.append(f"## Turn {i}: {turn.role.value} ({turn.agent})\n\n{text}")
        return "\n\n".join(parts)
