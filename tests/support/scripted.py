"""Test doubles for the core: a provider that replays scripted replies, a fixed coordinator.

They stand in for agents and the coordinator only in tests of the pure loop; every real
provider and the real coordinator are tested against real servers and the real GGUF.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trinity_cli.core.coordinator import Encoding
from trinity_cli.core.head import TurnProbs
from trinity_cli.core.provider import Reply, Request
from trinity_cli.core.records import Truncation
from trinity_cli.core.roles import ROLE_ORDER, Role
from trinity_cli.core.transcript import Transcript


@dataclass
class ScriptedProvider:
    replies: list[object]  # str replies, Reply objects as they are, or exceptions to raise
    price_per_call: float = 0.0
    requests: list[Request] = field(default_factory=list)

    def complete(self, request: Request, on_text=None, on_retry=None) -> Reply:
        self.requests.append(request)
        item = self.replies.pop(0)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Reply):
            return item
        if on_text:
            on_text(str(item))
        return Reply(str(item), 10, 5, self.price_per_call, 0.01)


@dataclass
class CountingCoordinator:
    """Returns a fixed vector; counts the transcripts it was asked to encode."""

    hidden_size: int = 4
    seen: list[Transcript] = field(default_factory=list)
    cut: Truncation | None = None  # what it reports cutting of every transcript

    def encode(self, transcript: Transcript) -> Encoding:
        self.seen.append(transcript)
        return Encoding(np.ones(self.hidden_size, dtype=np.float32), 0.001, 3, self.cut)


@dataclass(frozen=True)
class ScriptedPolicy:
    """Chooses (agent, role) from a list, one per turn; needs hidden states like a real head."""

    plan: tuple[tuple[int, Role], ...]
    n_agents: int = 2
    needs_hidden = True

    def choose(self, hidden, turn: int) -> TurnProbs:
        agent, role = self.plan[turn - 1]
        agent_probs = np.full(self.n_agents, 0.1 / max(1, self.n_agents - 1))
        agent_probs[agent] = 0.9
        role_probs = np.full(3, 0.05)
        role_probs[ROLE_ORDER.index(role)] = 0.9
        return TurnProbs(agent_probs, role_probs)


# A problem with doctest examples, and scripted answers to it
PROBLEM_TEXT = """# Add

Write `add(a, b)`.

```python
def add(a: int, b: int) -> int:
    \"\"\"Return a + b.

    >>> add(2, 3)
    5
    >>> add(-1, 1)
    0
    \"\"\"
```
"""
WRONG = "```python\ndef add(a, b):\n    return a * b\n```"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
ACCEPT = "Looks right. <verdict>ACCEPT</verdict>"
BROKEN = "```python\ndef add(a, b):\n    return a +\n```"
