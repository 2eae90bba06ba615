"""The training display on stderr: a Rich progress bar on a terminal, plain lines elsewhere."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from trinity_cli.train.es import GenerationReport


class GenerationDisplay:
    def __init__(self, console: Console, caches: Any, coordinator: Any, quiet: bool) -> None:
        self.console, self.caches, self.coordinator, self.quiet = (
            console, caches, coordinator, quiet,
        )
        self.progress: Progress | None = None
        self.task_id: Any = None

    def __enter__(self) -> GenerationDisplay:
        if not self.quiet and self.console.is_terminal:
            self.progress = Progress(
                TextColumn("gen {task.completed}/{task.total}"), BarColumn(),
                TextColumn("{task.description}"), TimeRemainingColumn(), console=self.console,
            )
            self.progress.start()
            self.task_id = self.progress.add_task("starting", total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def update(self, report: GenerationReport) -> None:
        line = (
            f"best {report.best:.3f} mean {report.mean:.3f} std {report.std:.3f} · "
            f"${report.spent_usd:.4f} · cache hits {self.caches.responses.stats.hit_rate:.0%} · "
            f"memo {self.coordinator.saved_fraction:.0%} · {report.seconds:.1f}s"
        )
        if self.quiet:
            return
        if self.progress is not None:
            self.progress.update(
                self.task_id, completed=report.generation, total=report.generations,
                description=line,
            )
        else:
            self.console.print(
                f"gen {report.generation}/{report.generations}  {line}", markup=False
            )
