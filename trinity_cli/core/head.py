"""The routing policy: a bias-free linear head on the coordinator's hidden state.

    z = P · (h - mean) / std          # standardised state, optionally projected: (k,)
    logits = W · z                     # W: (L+3, k), L agent logits + 3 role logits
    agent ~ softmax(logits[:L]),  role ~ softmax(logits[L:])

Without a projection P is the identity and k = d (the paper's head, (L+3)·d parameters).
Standardising with training-set statistics makes σ0 of the optimizer mean the same thing for
any backbone. Fixed policies (the untrained fallback pipeline, random) share the interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from trinity_cli.core.roles import ROLE_ORDER, Role

N_ROLES = len(ROLE_ORDER)


def softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - np.max(x))
    return z / z.sum()


@dataclass(frozen=True)
class Choice:
    """One turn's probabilities: over agents (L,) and over ROLE_ORDER (3,)."""

    agent_probs: np.ndarray
    role_probs: np.ndarray


class Policy(Protocol):
    needs_hidden: bool

    def choose(self, hidden: np.ndarray | None, turn: int) -> Choice: ...


@dataclass(frozen=True)
class LinearHead:
    weights: np.ndarray  # (L+3, k)
    mean: np.ndarray  # (d,)
    std: np.ndarray  # (d,)
    basis: np.ndarray | None = None  # (k, d) PCA basis, or None for the full head

    needs_hidden = True

    @property
    def n_agents(self) -> int:
        return int(self.weights.shape[0]) - N_ROLES

    @property
    def n_features(self) -> int:
        return int(self.weights.shape[1])

    def features(self, hidden: np.ndarray) -> np.ndarray:
        z = (np.asarray(hidden, dtype=np.float64) - self.mean) / self.std
        return z if self.basis is None else self.basis @ z

    def choose(self, hidden: np.ndarray | None, turn: int) -> Choice:
        if hidden is None:
            raise ValueError("a linear head needs the coordinator's hidden state")
        logits = self.weights @ self.features(hidden)
        return Choice(softmax(logits[: self.n_agents]), softmax(logits[self.n_agents :]))

    def with_weights(self, flat: np.ndarray) -> LinearHead:
        """The same head with new parameters (the optimizer's flat vector)."""
        return LinearHead(flat.reshape(self.weights.shape), self.mean, self.std, self.basis)


@dataclass(frozen=True)
class PipelinePolicy:
    """The fallback when no trained head fits: Thinker → Worker → Verifier, one round per
    agent in pool order (a rejection moves on to the next agent)."""

    n_agents: int
    needs_hidden = False

    def choose(self, hidden: np.ndarray | None, turn: int) -> Choice:
        step = turn - 1
        agent = np.zeros(self.n_agents)
        agent[(step // N_ROLES) % self.n_agents] = 1.0
        role = np.zeros(N_ROLES)
        role[step % N_ROLES] = 1.0
        return Choice(agent, role)


@dataclass(frozen=True)
class RandomPolicy:
    """Uniform over agents and roles; meaningful only when sampled."""

    n_agents: int
    needs_hidden = False

    def choose(self, hidden: np.ndarray | None, turn: int) -> Choice:
        return Choice(np.full(self.n_agents, 1.0 / self.n_agents), np.full(N_ROLES, 1.0 / N_ROLES))


@dataclass(frozen=True)
class PlanPolicy:
    """A fixed (agent, role) per turn, repeating the last step: baselines and the oracle."""

    n_agents: int
    plan: tuple[tuple[int, Role], ...]
    needs_hidden = False

    def choose(self, hidden: np.ndarray | None, turn: int) -> Choice:
        agent, role = self.plan[min(turn, len(self.plan)) - 1]
        agent_probs = np.zeros(self.n_agents)
        agent_probs[agent] = 1.0
        role_probs = np.zeros(N_ROLES)
        role_probs[ROLE_ORDER.index(role)] = 1.0
        return Choice(agent_probs, role_probs)


def pick(probs: np.ndarray, u: float | None) -> int:
    """Greedy (u is None) or inverse-CDF sampling with a uniform draw u in [0, 1)."""
    if u is None:
        return int(np.argmax(probs))
    index = int(np.searchsorted(np.cumsum(probs), u * probs.sum(), side="right"))
    return min(index, len(probs) - 1)


def role_at(index: int) -> Role:
    return ROLE_ORDER[index]
