"""Two variants of the head's input, tried on issue 29 and not adopted: `trinity train` (its
whole protocol: 5 folds, best-fixed re-chosen in each) with the head's input space replaced.

- `within`: the K directions of the state are principal components within each turn only.
  The shipped basis spends its first directions on the states' mean and on what tells the
  turns apart, which the turn indicators already carry.
- `per-turn`: each turn has its own state weights (logits = W_t · z + b_t, where z is the
  shipped K directions). The state can then route the retry after a REJECT without moving
  the first answer. The start is fitted by ridge turn by turn.

    python scripts/head_variants.py within train --pool ldb-mbpp --tasks mbpp \
        --imitate routed --out v.npz
    python scripts/head_variants.py per-turn train --pool ldb-mbpp --tasks mbpp \
        --imitate routed --out v.npz         # and --imitate best-fixed

The line `cross-validated (5 folds): ...` on stderr is the result (docs/measurements.md).
The head files these runs write are for this comparison only: `solve` cannot load a per-turn
head.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trinity_cli.core.head import N_ROLES, LinearHead, TurnProbs, softmax, turn_indicators
from trinity_cli.train import es, imitate

shipped_space, shipped_fit = imitate.input_space, imitate.fit_steps


def within_space(
    states: np.ndarray, n_outputs: int, project: int | None, groups: Sequence[int] | None = None,
    turn_features: int = 0,
) -> LinearHead:
    """As imitate.input_space, but with turn indicators the K directions are all within-turn
    principal components (each scaled to unit root mean square)."""
    if not turn_features or project is None or groups is None:
        return shipped_space(states, n_outputs, project, groups, turn_features)
    z = np.asarray(states, dtype=np.float64)
    std = z.std(axis=0) + 1e-6
    z = z / std
    labels = np.asarray(groups)
    names = list(np.unique(labels))
    centres = np.array([z[labels == g].mean(axis=0) for g in names])
    within = z - centres[[names.index(g) for g in labels]]
    directions = np.linalg.svd(within, full_matrices=False)[2][:project]
    scale = np.sqrt(((z @ directions.T) ** 2).mean(axis=0))
    return LinearHead(
        np.zeros((n_outputs, len(directions) + turn_features)), np.zeros(z.shape[1]), std,
        directions / np.maximum(scale, 1e-9)[:, None], turn_features,
    )


@dataclass(frozen=True)
class PerTurnHead(LinearHead):
    """x = [e(turn) ⊗ z, e(turn)]: turn t reads z through its own block of the weights."""

    @property
    def n_features(self) -> int:
        return int(self.basis.shape[0]) if self.basis is not None else 0

    def choose(self, hidden: np.ndarray | None, turn: int) -> TurnProbs:
        if hidden is None:
            raise ValueError("a linear head needs the coordinator's hidden state")
        e = turn_indicators(turn, self.turn_features)
        logits = self.weights @ np.concatenate([np.outer(e, self.features(hidden)).ravel(), e])
        return TurnProbs(softmax(logits[: self.n_agents]), softmax(logits[self.n_agents :]))

    def with_weights(self, flat: np.ndarray) -> PerTurnHead:
        return PerTurnHead(
            flat.reshape(self.weights.shape), self.mean, self.std, self.basis, self.turn_features
        )

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return PerTurnHead, (self.weights, self.mean, self.std, self.basis, self.turn_features)


def per_turn_space(
    states: np.ndarray, n_outputs: int, project: int | None, groups: Sequence[int] | None = None,
    turn_features: int = 0,
) -> LinearHead:
    space = shipped_space(states, n_outputs, project, groups, turn_features)
    if not turn_features or space.basis is None:
        return space
    k = space.n_features
    return PerTurnHead(
        np.zeros((n_outputs, (k + 1) * turn_features)), space.mean, space.std, space.basis,
        turn_features,
    )


def per_turn_fit(
    space: LinearHead, states: np.ndarray, steps: Sequence[tuple[int, int]],
    turns: Sequence[int] | None = None, ridge: float = 1.0, margin: float = 3.0,
) -> LinearHead:
    """imitate.fit_steps turn by turn: each turn's mean target is its bias, and its own state
    weights ridge-fit what is left."""
    if not isinstance(space, PerTurnHead) or turns is None:
        return shipped_fit(space, states, steps, turns, ridge, margin)
    count, k, n_agents = space.turn_features, space.n_features, space.n_agents
    z = np.asarray([space.features(state) for state in states])
    targets = np.full((len(steps), n_agents + N_ROLES), -margin)
    for row, (agent, role) in enumerate(steps):
        targets[row, agent] = targets[row, n_agents + role] = margin
    slot = np.array([min(max(turn, 1), count) - 1 for turn in turns])
    weights = np.zeros(space.weights.shape)
    for t in range(count):
        rows = slot == t
        if rows.any():
            bias = targets[rows].mean(axis=0)
            zt = z[rows]
            weights[:, t * k : (t + 1) * k] = np.linalg.solve(
                zt.T @ zt + ridge * np.eye(k), zt.T @ (targets[rows] - bias)
            ).T
            weights[:, k * count + t] = bias
    return space.with_weights(weights.ravel())


VARIANTS = {"within": (within_space, shipped_fit), "per-turn": (per_turn_space, per_turn_fit)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in VARIANTS:
        sys.exit(f"usage: head_variants.py {{{','.join(VARIANTS)}}} train [train's options]")
    imitate.input_space = es.input_space = VARIANTS[sys.argv[1]][0]  # type: ignore[assignment]
    imitate.fit_steps = es.fit_steps = VARIANTS[sys.argv[1]][1]  # type: ignore[assignment]
    from trinity_cli.cli import main

    sys.argv = ["trinity", *sys.argv[2:]]
    main()
