"""What train and eval write beside their results: the training curve (best and mean fitness
per generation) and the quality/cost curve of several heads. CSV always; PNG when matplotlib
(the `plot` extra) is installed."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from trinity_cli.paths import numbered


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, or None without the `plot` extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def write_training_curve(path: Path, history: list[dict[str, float]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=["generation", "best", "mean", "std", "spent_usd"]
        )
        writer.writeheader()
        writer.writerows(history)


def plot_training_curve(path: Path, history: list[dict[str, float]]) -> bool:
    """A PNG of best / mean fitness per generation, when the `plot` extra is installed."""
    plt = pyplot()
    if plt is None:
        return False
    figure, axes = plt.subplots(figsize=(6, 3.5))
    generations = [row["generation"] for row in history]
    axes.plot(generations, [row["best"] for row in history], label="best")
    axes.plot(generations, [row["mean"] for row in history], label="mean")
    axes.set_xlabel("generation")
    axes.set_ylabel("fitness")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def write_quality_cost_curve(
    out_dir: Path, rows: list[Any], curve: list[dict[str, Any]]
) -> list[Path]:
    """The heads' (usd per task, pass@1) beside every other row's point: CSV, and PNG when
    matplotlib (the `plot` extra) is installed; named eval-curve[-N], the first N whose files
    do not exist, so an earlier eval's curve is never replaced."""
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = {point["head"]: point["cost_weight"] for point in curve}
    path, picture = next(
        (csv_path, csv_path.with_suffix(".png"))
        for csv_path in (out_dir / f"{stem}.csv" for stem in numbered("eval-curve"))
        if not csv_path.exists() and not csv_path.with_suffix(".png").exists()
    )
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["policy", "kind", "cost_weight", "pass_at_1", "usd_per_task"])
        for row in rows:
            kind = "head" if row.policy in weights else "baseline"
            writer.writerow(
                [
                    row.policy, kind, weights.get(row.policy, ""), round(row.pass_at_1, 4),
                    row.usd_per_task,
                ]
            )
    plt = pyplot()
    if plt is None:
        return [path]
    figure, axes = plt.subplots(figsize=(6, 4))
    heads = sorted((r for r in rows if r.policy in weights), key=lambda r: r.usd_per_task)
    axes.plot([r.usd_per_task for r in heads], [r.pass_at_1 for r in heads], "o-", label="heads")
    for row in rows:
        if row.policy not in weights:
            axes.plot(row.usd_per_task, row.pass_at_1, "x", color="grey")
            axes.annotate(row.policy, (row.usd_per_task, row.pass_at_1), fontsize=7)
    axes.set_xlabel("$ per task")
    axes.set_ylabel("pass@1")
    axes.legend()
    figure.tight_layout()
    figure.savefig(picture, dpi=120)
    plt.close(figure)
    return [path, picture]
