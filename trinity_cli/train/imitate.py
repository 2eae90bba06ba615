"""A starting head that imitates the fallback pipeline, fit by ridge regression.

This is not training for reward: it gives a head whose greedy choices reproduce
Thinker → Worker → Verifier, one round per agent, from the coordinator's real hidden states, so
that a fresh install routes sensibly and the optimizer has a reasonable starting mean. The
transcripts are synthetic (task prompt, a short plan, the canonical solution, a rejection).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trinity_cli.core.head import LinearHead, PipelinePolicy
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Transcript, Turn
from trinity_cli.tasks.taskset import Task


def pipeline_transcripts(task: Task, agent_names: Sequence[str], turns: int) -> list[Transcript]:
    """The transcripts the fallback pipeline would see at turns 1..turns (synthetic replies)."""
    policy = PipelinePolicy(len(agent_names))
    steps = []
    for turn in range(1, turns):
        choice = policy.choose(None, turn)
        steps.append((agent_names[int(np.argmax(choice.agent_probs))],
                      (Role.THINKER, Role.WORKER, Role.VERIFIER)[int(np.argmax(choice.role_probs))]))
    return scripted_transcripts(task, steps)


def scripted_transcripts(task: Task, steps: Sequence[tuple[str, Role]]) -> list[Transcript]:
    """The transcripts before the first turn and after each (agent, role) step (synthetic
    replies: a plan, the canonical solution, a rejection)."""
    transcript = Transcript(task.problem)
    out = [transcript]
    for agent, role in steps:
        docstring = task.prompt.strip().splitlines()
        noise = " ".join(docstring[len(docstring) // 2 :])[:600]  # prose of varying length
        text = {
            Role.THINKER: f"Plan: implement {task.entry_point} as the docstring says. {noise}",
            Role.WORKER: f"```python\n{task.prompt}{task.canonical_solution or '    pass'}\n```",
            Role.VERIFIER: f"{noise[:200]} <verdict>REJECT</verdict>",
        }[role]
        transcript = transcript.with_turn(Turn(agent, role, text))
        out.append(transcript)
    return out


def fit_imitation_head(
    states: np.ndarray, turns: Sequence[int], n_agents: int, ridge: float = 10.0
) -> tuple[LinearHead, float]:
    """(head, training accuracy) for hidden `states` (n, d) seen at pipeline `turns` (1-based)."""
    mean = states.mean(axis=0)
    std = states.std(axis=0) + 1e-6
    z = (states - mean) / std
    policy = PipelinePolicy(n_agents)
    targets = []
    for turn in turns:
        choice = policy.choose(None, turn)
        targets.append(np.concatenate([choice.agent_probs, choice.role_probs]) * 2.0 - 1.0)
    y = np.asarray(targets) * 3.0  # ±3 logits
    gram = z.T @ z + ridge * np.eye(z.shape[1])
    weights = np.linalg.solve(gram, z.T @ y).T  # (L+3, d)
    head = LinearHead(weights, mean, std)
    hits = 0
    for state, target in zip(states, targets):
        choice = head.choose(state, 0)
        hits += int(np.argmax(choice.agent_probs) == np.argmax(target[:n_agents])
                    and np.argmax(choice.role_probs) == np.argmax(target[n_agents:]))
    return head, hits / len(states)
