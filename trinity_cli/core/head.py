"""The routing policy: a bias-free linear head on the coordinator's hidden state.

    z = P · (h - mean) / std          # standardised state, optionally projected: (k,)
    x = [z, e(turn)]                  # e: T indicators of the turn number (T = 0: none)
    logits = W · x                     # W: (L+3, k+T), L agent logits + 3 role logits
    agent ~ softmax(logits[:L]),  role ~ softmax(logits[L:])

Without a projection P is the identity and k = d (the paper's head, (L+3)·d parameters).
The turn indicators let a head play a fixed plan on any state, exactly (what `trinity train`
starts from), so the state's part is free to learn where a task should leave the plan.
When agents may play only some roles (a pool's `roles`), the choice is over the masked joint
p(agent, role) ∝ softmax_agent · softmax_role · mask (`decide`).
Standardising with training-set statistics makes σ0 of the optimizer mean the same thing for
any backbone. Fixed policies (the untrained fallback pipeline, random) share the interface.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from trinity_cli.core.roles import ROLE_ORDER, Role

N_ROLES = len(ROLE_ORDER)


def softmax(x: np.ndarray) -> np.ndarray:
    # the ufuncs' own reductions, which x.max() and z.sum() call through Python wrappers that
    # cost more than the reduction on a vector this short (the search makes millions)
    z = np.exp(x - np.maximum.reduce(x))
    return z / np.add.reduce(z)


def turn_indicators(turn: int, count: int) -> np.ndarray:
    """e(turn): `count` indicators of turns 1..count, later turns counting as the last."""
    indicators = np.zeros(count)
    if count:
        indicators[min(max(turn, 1), count) - 1] = 1.0
    return indicators


@dataclass(frozen=True)
class TurnProbs:
    """One turn's probabilities: over agents (L,) and over ROLE_ORDER (3,)."""

    agent_probs: np.ndarray
    role_probs: np.ndarray


class Policy(Protocol):
    needs_hidden: bool

    def choose(self, hidden: np.ndarray | None, turn: int) -> TurnProbs: ...


@dataclass(frozen=True)
class LinearHead:
    weights: np.ndarray  # (L+3, k)
    mean: np.ndarray  # (d,)
    std: np.ndarray  # (d,)
    basis: np.ndarray | None = None  # (k, d) PCA basis, or None for the full head
    turn_features: int = (
        0  # T: indicators of turns 1..T after the state's k (later turns count as T)
    )
    # x for each (state, turn) read, by the state's id while the state lives (an entry goes with
    # its state, so an id never names another): shared by the heads `with_weights` makes, the
    # search's candidates, which read the same states; a pickled head leaves it behind
    inputs: dict[tuple[int, int], np.ndarray] = field(
        default_factory=dict, repr=False, compare=False
    )

    needs_hidden = True

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return LinearHead, (self.weights, self.mean, self.std, self.basis, self.turn_features)

    @property
    def n_agents(self) -> int:
        return int(self.weights.shape[0]) - N_ROLES

    @property
    def n_features(self) -> int:
        """k, the state's part of the input."""
        return int(self.weights.shape[1]) - self.turn_features

    def features(self, hidden: np.ndarray) -> np.ndarray:
        """The state's part of the input, z."""
        z = (np.asarray(hidden, dtype=np.float64) - self.mean) / self.std
        return z if self.basis is None else self.basis @ z

    def choose(self, hidden: np.ndarray | None, turn: int) -> TurnProbs:
        if hidden is None:
            raise ValueError("a linear head needs the coordinator's hidden state")
        key = (id(hidden), turn)
        x = self.inputs.get(key)
        if x is None:
            x = np.concatenate([self.features(hidden), turn_indicators(turn, self.turn_features)])
            self.inputs[key] = x
            weakref.finalize(hidden, self.inputs.pop, key, None)
        logits = self.weights @ x
        n_agents = self.n_agents
        return TurnProbs(softmax(logits[:n_agents]), softmax(logits[n_agents:]))

    @property
    def flat(self) -> np.ndarray:
        """The parameters as the optimizer's flat vector."""
        return self.weights.ravel()

    def with_weights(self, flat: np.ndarray) -> LinearHead:
        """The same head with new parameters (the optimizer's flat vector)."""
        return LinearHead(
            flat.reshape(self.weights.shape), self.mean, self.std, self.basis, self.turn_features,
            self.inputs,
        )


@dataclass(frozen=True)
class UniversalHead:
    """The pool-agnostic head: agents are scored from their profiles (core.profile), with
    parameters shared across agents, so one head routes a pool of any size and make-up.

        z = basis · (h - mean) / std                       # (k,), as LinearHead
        x = [z, e(turn)]                                   # T turn indicators, as LinearHead
        agent logit_a = xᵀ · W · p_a + u · p_a             # p_a: agent a's profile vector (P,)
        role logits   = R · x                              # (3,)

    Parameters: W (k+T, P), u (P,), R (3, k+T), flat in that order: (k+T)·P + P + 3(k+T)
    values, whatever the pool. The turn rows of W weigh the profile per turn (the Verifier's
    turn can prefer the cheapest agent, the Worker's the best). `profiles` (L, P) binds it to a
    pool (`for_pool`)."""

    params: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    basis: np.ndarray  # (k, d)
    profiles: np.ndarray  # (L, P); (0, P) when bound to no pool
    turn_features: int = 0  # T

    needs_hidden = True

    @staticmethod
    def size(k: int, profile_size: int, turn_features: int = 0) -> int:
        inputs = k + turn_features
        return inputs * profile_size + profile_size + N_ROLES * inputs

    @property
    def n_agents(self) -> int:
        return int(self.profiles.shape[0])

    @property
    def n_features(self) -> int:
        """k, the state's part of the input (what profiles are measured in)."""
        return int(self.basis.shape[0])

    def features(self, hidden: np.ndarray) -> np.ndarray:
        return self.basis @ ((np.asarray(hidden, dtype=np.float64) - self.mean) / self.std)

    def parts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        inputs, size = self.n_features + self.turn_features, int(self.profiles.shape[1])
        w = self.params[: inputs * size].reshape(inputs, size)
        u = self.params[inputs * size : inputs * size + size]
        return w, u, self.params[inputs * size + size :].reshape(N_ROLES, inputs)

    def choose(self, hidden: np.ndarray | None, turn: int) -> TurnProbs:
        if hidden is None:
            raise ValueError("the universal head needs the coordinator's hidden state")
        x = np.concatenate([self.features(hidden), turn_indicators(turn, self.turn_features)])
        w, u, roles = self.parts()
        agent_logits = self.profiles @ (w.T @ x + u)
        return TurnProbs(softmax(agent_logits), softmax(roles @ x))

    @property
    def flat(self) -> np.ndarray:
        return self.params

    def with_weights(self, flat: np.ndarray) -> UniversalHead:
        return replace(self, params=np.asarray(flat, dtype=np.float64))

    def for_pool(self, profiles: np.ndarray) -> UniversalHead:
        return replace(self, profiles=np.asarray(profiles, dtype=np.float64))


@dataclass(frozen=True)
class PipelinePolicy:
    """The fallback when no trained head fits: Thinker → Worker → Verifier, one round per
    agent in pool order (a rejection moves on to the next agent), skipping the roles an agent
    may not play (`mask`)."""

    n_agents: int
    mask: np.ndarray | None = None  # (L, 3): which roles each agent may play
    needs_hidden = False

    def choose(self, hidden: np.ndarray | None, turn: int) -> TurnProbs:
        steps = [
            (a, r)
            for a in range(self.n_agents)
            for r in range(N_ROLES)
            if self.mask is None or self.mask[a, r]
        ]
        agent_index, role_index = steps[(turn - 1) % len(steps)]
        agent = np.zeros(self.n_agents)
        agent[agent_index] = 1.0
        role = np.zeros(N_ROLES)
        role[role_index] = 1.0
        return TurnProbs(agent, role)


@dataclass(frozen=True)
class RandomPolicy:
    """Uniform over agents and roles; meaningful only when sampled."""

    n_agents: int
    needs_hidden = False

    def choose(self, hidden: np.ndarray | None, turn: int) -> TurnProbs:
        return TurnProbs(
            np.full(self.n_agents, 1.0 / self.n_agents), np.full(N_ROLES, 1.0 / N_ROLES)
        )


@dataclass(frozen=True)
class PlanPolicy:
    """A fixed (agent, role) per turn, repeating the last step: baselines and the oracle."""

    n_agents: int
    plan: tuple[tuple[int, Role], ...]
    needs_hidden = False

    def choose(self, hidden: np.ndarray | None, turn: int) -> TurnProbs:
        agent, role = self.plan[min(turn, len(self.plan)) - 1]
        agent_probs = np.zeros(self.n_agents)
        agent_probs[agent] = 1.0
        role_probs = np.zeros(N_ROLES)
        role_probs[ROLE_ORDER.index(role)] = 1.0
        return TurnProbs(agent_probs, role_probs)


@dataclass(frozen=True)
class Pick:
    """One turn's choice, with the probabilities it was drawn from (masked marginals)."""

    agent: int
    role: int
    agent_probs: np.ndarray
    role_probs: np.ndarray
    probability: float  # of this (agent, role); given the role when `forced_role` chose it
    forced: bool  # the role came from `forced_role`


def decide(
    probs: TurnProbs, mask: np.ndarray | None, draws: tuple[float, float] | None = None,
    forced_role: int | None = None,
) -> Pick:
    """Greedy: the joint argmax. Sampled: the agent from the masked joint's marginal with
    draws[0], the role given that agent with draws[1]. A forced role (a Thinker's
    <next_role>) picks the agent among those that may play it; when none may, it is ignored.
    Without a mask, agent and role are chosen independently, which is the same thing."""
    u_agent, u_role = (None, None) if draws is None else draws
    if mask is None:
        agent = pick(probs.agent_probs, u_agent)
        role = forced_role if forced_role is not None else pick(probs.role_probs, u_role)
        p = probs.agent_probs[agent] * (
            1.0 if forced_role is not None else probs.role_probs[role]
        )
        return Pick(
            agent, role, probs.agent_probs, probs.role_probs, float(p), forced_role is not None
        )
    joint = probs.agent_probs[:, None] * probs.role_probs * mask  # np.outer's own product
    total = np.add.reduce(joint, axis=None)  # joint.sum(), without its wrapper (as softmax)
    if total <= 0:  # all the policy's mass on forbidden pairs: uniform over allowed ones
        joint = mask.astype(np.float64)
        total = np.add.reduce(joint, axis=None)
    joint = joint / total
    agent_marginal, role_marginal = np.add.reduce(joint, axis=1), np.add.reduce(joint, axis=0)
    if forced_role is not None and joint[:, forced_role].sum() > 0:
        given_role = joint[:, forced_role] / joint[:, forced_role].sum()
        agent = pick(given_role, u_agent)
        return Pick(
            agent, forced_role, agent_marginal, role_marginal, float(given_role[agent]), True
        )
    if draws is None:
        agent, role = divmod(int(joint.argmax()), joint.shape[1])
    else:
        agent = pick(agent_marginal, u_agent)
        role = pick(joint[agent] / joint[agent].sum(), u_role)
    return Pick(agent, role, agent_marginal, role_marginal, float(joint[agent, role]), False)


def pick(probs: np.ndarray, u: float | None) -> int:
    """Greedy (u is None) or inverse-CDF sampling with a uniform draw u in [0, 1)."""
    if u is None:
        return int(probs.argmax())
    index = int(np.searchsorted(np.cumsum(probs), u * probs.sum(), side="right"))
    return min(index, len(probs) - 1)


def role_at(index: int) -> Role:
    return ROLE_ORDER[index]
