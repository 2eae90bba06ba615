"""Agent profiles: all the pool-agnostic head knows of an agent.

Definition `trinity-profile-v2`, measured on n calibration tasks (the same tasks for every
agent; each task's `y` is 1/0 for a graded Worker answer, or a recorded pass probability):

    pass_rate = mean(y)
    skill     = (XᵀX + RIDGE·n·I)⁻¹ Xᵀ (y − pass_rate)   # (k,) ridge fit, X = Z − mean(Z)
    offset    = mean(Z) · skill
    cost      = max(log10(usd_per_answer), −6) + 3       # $0.001 → 0, a free model → −3
    vector    = [pass_rate, cost, offset, *skill]         # P = k + 3 values

Z holds the calibration tasks' problem states in the universal head's input space (standardised
and projected to k components by the head's basis), so `pass_rate + z · skill − offset` is the
agent's predicted pass on a task with state z: a skill vector in the head's input space. The
vector holds the pass rate itself (v1 held only the fit's value at z = 0, pass_rate − offset),
so a head can weigh the pass rate and the task-specific part separately. RIDGE is
light (0.03): the states are whitened, and a heavy penalty would leave the pass rate alone
deciding (measured on the synthetic record of tests/support/learnable_record.py).
`usd_per_answer` is the mean $ of one Worker answer at the agent's prices. A profile is only
meaningful with the coordinator and basis it was measured with; `ProfileKey` names both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

DEFINITION = "trinity-profile-v2"
RIDGE = 0.03
COST_FLOOR = -6.0


@dataclass(frozen=True)
class Profile:
    pass_rate: float
    skill: tuple[float, ...]  # (k,)
    usd_per_answer: float
    n: int
    # mean(Z) · skill: the predicted pass on a task with state z is pass_rate + z · skill − offset
    offset: float

    @property
    def cost(self) -> float:
        return (
            max(
                math.log10(self.usd_per_answer) if self.usd_per_answer > 0 else COST_FLOOR,
                COST_FLOOR,
            )
            + 3.0
        )

    def vector(self) -> np.ndarray:
        import numpy as np  # not at import: `trinity pool` reads profiles without numpy

        return np.array([self.pass_rate, self.cost, self.offset, *self.skill], dtype=np.float64)


def measure(passes: Sequence[float], states: np.ndarray, usd_per_answer: float) -> Profile:
    """The profile of an agent that scored `passes` on tasks whose projected states are the
    rows of `states` (n, k)."""
    import numpy as np

    y = np.asarray(passes, dtype=np.float64)
    z = np.asarray(states, dtype=np.float64)
    if len(y) == 0 or z.shape[0] != len(y):
        raise ValueError("a profile needs one state per calibration task")
    mean, centre = float(y.mean()), z.mean(axis=0)
    x = z - centre
    skill = np.linalg.solve(x.T @ x + RIDGE * len(y) * np.eye(z.shape[1]), x.T @ (y - mean))
    return Profile(
        mean, tuple(float(s) for s in skill), float(usd_per_answer), len(y), float(centre @ skill)
    )
