"""Choose the learning test's settings on a validation slice of the train split, never the test.

Trains the simulated pool's head on the train split minus its validation slice for each setting
of a grid (components, the start, σ0, generations, seed), scores each on the validation slice,
and writes every result and the choice (the largest validation margin over the best single
agent; ties: the first in grid order, the cheaper) to
tests/learning_settings.json. The suite then trains once at the chosen settings and scores the
test split once (tests/test_train.py).

    # the grid: about 10 minutes on one core
    python tests/choose_learning_settings.py
    # once: the chosen settings on the test split
    python tests/choose_learning_settings.py --score-test
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from support.learning import (
    SETTINGS_FILE,
    chosen_settings,
    train_and_score,
)

from trinity_cli.coordinator.llama import LlamaCoordinator
from trinity_cli.coordinator.memo import MemoCoordinator
from trinity_cli.coordinator.permuted import PermutedCoordinator
from trinity_cli.llama.gguf import embedded_model_path, gguf_sha256
from trinity_cli.pool.spec import parse_pool
from trinity_cli.providers.cache import ResponseStore
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import load_humaneval, select_split, validation_slice
from trinity_cli.train.baselines import paired_margin
from trinity_cli.train.es import TrainSettings

SIM_POOL = ROOT / "examples" / "sim-pool.toml"
# Fixed: every fit task each generation, 16 candidates, one Worker turn (what the sim pool's
# skills describe). The rest is chosen here; ties go to the first in grid order (fewer
# components, the plain start, the smaller σ0, fewer generations).
BASE = {"max_turns": 1, "popsize": 16}
GRID = {
    "project": [8, 16, 32, 64], "imitate": ["best-fixed", "routed"], "sigma0": [0.1, 0.3],
    "generations": [30, 60], "seed": [0, 1],
}


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="trinity-choose-"))
    pool = parse_pool(SIM_POOL.read_text(), str(SIM_POOL))
    tasks = load_humaneval()
    fit, validation = validation_slice(select_split(tasks, "train"))
    gguf = embedded_model_path()
    coordinator = MemoCoordinator(
        LlamaCoordinator(gguf, n_ctx=4096), gguf_sha256(gguf), scratch / "hidden.sqlite"
    )
    grader, store = Grader(scratch / "grades.sqlite"), ResponseStore(scratch / "responses.sqlite")
    if "--score-test" in sys.argv:
        score_test(pool, tasks, fit, coordinator, grader, store, scratch)
        return
    results = []
    for values in itertools.product(*GRID.values()):
        settings = TrainSettings(**BASE, **dict(zip(GRID, values)))
        started = time.perf_counter()
        scored = train_and_score(
            pool, tasks, fit, validation, coordinator, grader, settings,
            scratch / f"run-{len(results)}.ckpt", store,
        )
        row = {
            "settings": asdict(settings), "validation_pass_at_1": round(scored["pass_at_1"], 4),
            "best_single": scored["best_single"],
            "best_single_pass_at_1": round(scored["best_single_pass_at_1"], 4),
            "margin_vs_best_single_se": round(scored["margin_vs_best_single"], 3),
            "margin_vs_random_se": round(scored["margin_vs_random"], 3),
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(json.dumps(row), flush=True)
        results.append(row)
    best = max(results, key=lambda r: (r["margin_vs_best_single_se"], -results.index(r)))
    SETTINGS_FILE.write_text(
        json.dumps(
            {
                "how": (
                    "tests/choose_learning_settings.py: train on the train split minus its "
                    "validation slice, score the validation slice; chosen = largest margin over "
                    "the best single agent"
                ),
                "fit_tasks": len(fit), "validation_tasks": len(validation), "grid": results,
                "chosen": best["settings"],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"chosen: {best['settings']}")


def score_test(pool, tasks, fit, coordinator, grader, store, scratch: Path) -> None:
    """The suite's claim as a table: the chosen settings, trained on `fit`, on the test split."""
    test = select_split(tasks, "test")
    settings = chosen_settings()
    trained = train_and_score(
        pool, tasks, fit, test, coordinator, grader, settings, scratch / "test.ckpt", store
    )
    control = train_and_score(
        pool, tasks, fit, test, PermutedCoordinator(coordinator, tasks), grader, settings,
        scratch / "permuted.ckpt", store,
    )
    print("| policy | pass@1 | 95% CI | $/task | mean turns |\n|---|---|---|---|---|")
    rows = [*trained["rows"].values(), control["rows"]["trained"]]
    for name, row in zip([*trained["rows"], "permuted control"], rows):
        lo, hi = row.ci95()
        print(
            f"| `{name}` | {row.pass_at_1:.3f} | {lo:.2f}–{hi:.2f} | {row.usd_per_task:.5f} "
            f"| {row.mean_turns:.2f} |"
        )
    passes = trained["rows"]["trained"].passes
    print(
        f"\ntest tasks {len(test)}; paired margins in SE: "
        f"vs best single ({trained['best_single']}) "
        f"{trained['margin_vs_best_single']:.2f}, vs random {trained['margin_vs_random']:.2f}, "
        f"vs permuted control {paired_margin(passes, control['rows']['trained'].passes):.2f}; "
        "rel_err_reduction_vs_best_single "
        f"{trained['report']['rel_err_reduction_vs_best_single']:.4f}"
    )


if __name__ == "__main__":
    main()
