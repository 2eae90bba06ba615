"""Sinks of an episode's events besides the display (cli/display.py): the --jsonl writer, the
warnings of inputs cut to fit a context, and `solve_sinks`, which gathers a solve run's sinks
(those, the display and the run log)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode_json import decision_json, episode_json, turn_json
from trinity_cli.core.events import CheckFinished, EpisodeFinished, Event, TurnFinished, TurnStarted

if TYPE_CHECKING:
    from trinity_cli.runtime import Solver


def fan_out(sinks: Sequence[Callable[[Event], None]]) -> Callable[[Event], None]:
    def send(event: Event) -> None:
        for sink in sinks:
            sink(event)

    return send


class JsonlWriter:
    """--jsonl: one event per line as it happens; the `final` event is the --json object."""

    def __init__(
        self, write: Callable[[str], None], agent_names: Sequence[str], suite: Any = None,
        budget: Budget | None = None,
    ) -> None:
        self.write = write  # console.to_stdout, flushed line by line
        self.names = agent_names
        self.suite = suite
        self.budget = budget

    def __call__(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self._write({"event": "turn_start", **decision_json(event.decision, self.names)})
        elif isinstance(event, TurnFinished):
            self._write({"event": "turn_end", **turn_json(event.record, self.names)})
        elif isinstance(event, CheckFinished):
            self._write(
                {
                    "event": "check", "turn": event.turn, "source": event.outcome.source,
                    "passed": event.outcome.passed, "summary": event.outcome.summary,
                }
            )
        elif isinstance(event, EpisodeFinished):
            final = episode_json(event.result, self.names, self.suite, self.budget)
            self._write({"event": "final", **final})

    def _write(self, obj: dict[str, Any]) -> None:
        self.write(json.dumps(obj) + "\n")


class CutWarnings:
    """One warning per reader (the coordinator, each agent) the first time it cuts its input."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self.warn = warn
        self.warned: set[str] = set()

    def __call__(self, event: Event) -> None:
        cut = (
            event.decision.input_truncated
            if isinstance(event, TurnStarted)
            else event.record.prompt_truncated
            if isinstance(event, TurnFinished)
            else None
        )
        if cut is not None and cut.reader not in self.warned:
            self.warned.add(cut.reader)
            self.warn(cut.note)


def solve_sinks(
    solver: Solver, suite: Any, budget: Budget, settings: dict[str, Any],
    warn: Callable[[str], None], *, show: bool, verbose: bool, searched: bool, jsonl: bool,
    log: bool,
) -> Callable[[Event], None]:
    """Where a solve run's events go: the warnings of cut inputs (never silent), the display
    (`show`; `searched`: the run looked for tests, so finding none is news), the --jsonl writer
    and the run log (`log`, unless TRINITY_NO_LOG; `settings`: what the log keeps besides the
    turn limit and the budget)."""
    from trinity_cli.cli.console import stderr, to_stdout
    from trinity_cli.cli.display import TurnDisplay
    from trinity_cli.cli.problem import display_header
    from trinity_cli.store.runlog import RunLogSink, disabled

    head, names = solver.head, solver.pool.names
    sinks: list[Callable[[Event], None]] = [CutWarnings(warn)]
    tests = None if suite is None else {"source": suite.source, "count": suite.count}
    if show:
        source = head.source if verbose or head.meta is None else Path(head.source).name
        header = display_header(solver.pool.source, source, tests, searched=searched)
        sinks.append(TurnDisplay(stderr, header, verbose))
    if jsonl:
        sinks.append(JsonlWriter(to_stdout, names, suite, budget))
    if not disabled(not log):
        sinks.append(
            RunLogSink.start(
                solver.problem, solver.pool, head.source, tests=tests,
                settings={
                    "max_turns": solver.max_turns, "budget_usd": budget.limit_usd, **settings,
                },
                warn=warn, final=lambda r: episode_json(r, names, suite, budget),
            )
        )
    return fan_out(sinks)
