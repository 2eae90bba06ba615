"""What a training run would do and cost, worked out before it starts (`train --dry-run`).

The counts follow the loop in `es.train`: each generation plays its mini-batch (`batch_for`)
once per candidate, and an episode makes at most `max_turns` agent calls. The dollars are an
upper bound, the most the budget could be asked for: every call at its agent's `max_tokens`
(a replay agent's: its longest recorded reply),
every retried attempt billed, and each prompt as long as the transcript allows — the agent view
keeps at most AGENT_VIEW_TURNS earlier turns of about AGENT_VIEW_CHARS characters, counted here
at 4 UTF-8 bytes each (`Request.prompt_bytes` counts a byte per token). Replies already in the
response cache cost nothing; the bound does not subtract them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trinity_cli.config import AgentSpec
from trinity_cli.core.provider import Prices, Request
from trinity_cli.core.roles import COMPLETION_LEADS, SYSTEM_PROMPTS, Role
from trinity_cli.core.transcript import AGENT_VIEW_CHARS, Transcript, Turn
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.es import TrainSettings, batch_for

WIDEST_CHAR = "\U0010ffff"  # 4 bytes in UTF-8, the most a character takes


@dataclass(frozen=True)
class Plan:
    episodes: int
    calls: int  # at most: an episode may end before max_turns
    worst_usd: float | None  # None when a paid agent has no prices
    unpriced: tuple[str, ...]


def plan_training(tasks: Sequence[Task], agents: Sequence[AgentSpec], settings: TrainSettings) -> Plan:
    batches = [batch_for(tasks, settings, g) for g in range(settings.generations)]
    episodes = settings.popsize * sum(len(batch) for batch in batches)
    unpriced = tuple(a.name for a in agents if a.provider != "local" and not Prices(a.price_in, a.price_out).known)
    worst = None
    if not unpriced:
        worst = settings.popsize * sum(episode_worst_usd(tasks[i], agents, settings.max_turns) for b in batches for i in b)
    return Plan(episodes, episodes * settings.max_turns, worst, unpriced)


def episode_worst_usd(task: Task, agents: Sequence[AgentSpec], max_turns: int) -> float:
    """Each turn, the dearest call any agent in any role could make at that point."""
    return sum(max(call_worst_usd(a, longest_prompt(task, agents, turn)) for a in agents) for turn in range(1, max_turns + 1))


def call_worst_usd(agent: AgentSpec, prompt_tokens: int) -> float:
    if agent.provider == "local":
        return 0.0
    attempts = 1 if agent.provider in ("sim", "replay") else 1 + agent.retries  # the others retry (providers.registry)
    return attempts * Prices(agent.price_in, agent.price_out).usd(prompt_tokens, reply_tokens(agent))


def reply_tokens(agent: AgentSpec) -> int:
    """The most tokens a reply is billed: `max_tokens`, or for a replay agent the longest
    recorded program (its `max_tokens` does not cut a recorded reply)."""
    if agent.provider == "replay":
        from trinity_cli.providers.replay import reply_token_bound

        return reply_token_bound(agent)
    return agent.max_tokens


def longest_prompt(task: Task, agents: Sequence[AgentSpec], turn: int) -> int:
    """`Request.prompt_bytes` of the longest request turn `turn` could send, from a transcript
    whose earlier turns are all longer than the agent view keeps, in 4-byte characters."""
    widest = Turn(max((a.name for a in agents), key=len), max(Role, key=lambda r: len(r.value)),
                  WIDEST_CHAR * (AGENT_VIEW_CHARS + 1))
    transcript = Transcript(task.problem, (widest,) * (turn - 1))
    return max(
        Request(role, SYSTEM_PROMPTS[role], transcript.agent_view(), COMPLETION_LEADS[role],
                task.problem.code_prompt if role is Role.WORKER else "").prompt_bytes()
        for role in Role
    )
