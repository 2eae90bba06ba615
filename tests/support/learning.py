"""The honest learning protocol on the simulated pool, shared by the suite and the script that
chose its settings (`tests/choose_learning_settings.py`).

- The head trains on the train split minus a validation slice (`validation_slice`); every
  setting (components, σ0, generations, population, seed) was chosen by the validation margin,
  and `learning_settings.json` records the grid and the choice. The test split is scored once.
- The control keeps real hidden states but breaks the task↔state pairing: each task reads
  another task's state (a fixed derangement). A head that learned nothing from the states does
  as well under it; a head that routes by the state loses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trinity_cli.providers.registry import build_agents
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.baselines import BASELINES, HeadUnderTest, evaluate, paired_margin
from trinity_cli.train.es import TrainResult, TrainSettings, train

SETTINGS_FILE = Path(__file__).resolve().parents[1] / "learning_settings.json"


def chosen_settings() -> TrainSettings:
    return TrainSettings(**json.loads(SETTINGS_FILE.read_text())["chosen"])


def train_on(
    pool, all_tasks: list[Task], fit: list[Task], coordinator: Any, grader,
    settings: TrainSettings, checkpoint: Path, store,
) -> tuple[list[Any], TrainResult]:
    """The pool's agents and the head trained on `fit`."""
    agents = build_agents(pool.agents, all_tasks, store)
    return agents, train(fit, agents, coordinator, grader, settings, checkpoint)


def score(
    agents: list[Any], result: TrainResult, scored: list[Task], coordinator: Any, grader,
    settings: TrainSettings, baselines: Sequence[str] = BASELINES,
) -> dict[str, Any]:
    """The head evaluated on `scored`: the rows by name and the margins the suite asserts
    (`baselines`: which rows; the best single is among `single:` and `pipeline:`)."""
    report = evaluate(
        scored, agents, [HeadUnderTest("trained", result.head, coordinator)], grader,
        max_turns=settings.max_turns, baselines=baselines,
    )
    rows = {r.policy: r for r in report.pop("_rows")}
    best = rows[report["best_single"]]
    trained = rows["trained"].passes
    return {
        "result": result, "rows": rows, "report": report, "pass_at_1": rows["trained"].pass_at_1,
        "best_single": best.policy, "best_single_pass_at_1": best.pass_at_1,
        "margin_vs_best_single": paired_margin(trained, best.passes),
        "margin_vs_random": (
            paired_margin(trained, rows["random"].passes) if "random" in rows else None
        ),
    }


def train_and_score(
    pool, all_tasks: list[Task], fit: list[Task], scored: list[Task], coordinator: Any, grader,
    settings: TrainSettings, checkpoint: Path, store, baselines: Sequence[str] = BASELINES,
) -> dict[str, Any]:
    """Train on `fit`, evaluate on `scored` (`score`)."""
    fitted = train_on(pool, all_tasks, fit, coordinator, grader, settings, checkpoint, store)
    return score(*fitted, scored, coordinator, grader, settings, baselines)
