"""Sinks of the episode's events: the Rich progress display (stderr) and the --jsonl writer.

The display prints one permanent line per finished turn and keeps a transient `Live` region for
the turn in flight, only on a terminal: its head line and the last lines of the reply as it
streams. On a pipe or CI log it prints plain lines. With `verbose` every finished turn's whole
text follows its line (terminal or not). Streamed and printed text is redacted like errors.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from trinity_cli.core.budget import Budget
from trinity_cli.core.events import (
    CheckFinished,
    EpisodeFinished,
    Event,
    TextDelta,
    TurnFinished,
    TurnStarted,
)
from trinity_cli.core.records import Decision, EpisodeResult, Truncation, TurnRecord
from trinity_cli.core.roles import ROLE_ORDER
from trinity_cli.errors import redact

SCHEMA_VERSION = 1


def fan_out(sinks: Sequence[Callable[[Event], None]]) -> Callable[[Event], None]:
    def send(event: Event) -> None:
        for sink in sinks:
            sink(event)

    return send


def decision_json(decision: Decision, agent_names: Sequence[str]) -> dict[str, Any]:
    return {
        "turn": decision.turn,
        "agent": decision.agent,
        "role": decision.role.value,
        "role_source": decision.role_source,
        "agent_probs": {n: round(p, 6) for n, p in zip(agent_names, decision.agent_probs)},
        "role_probs": {r.value: round(p, 6) for r, p in zip(ROLE_ORDER, decision.role_probs)},
        "coordinator_seconds": round(decision.coordinator_seconds, 4),
        "coordinator_tokens": decision.coordinator_tokens,
    }


def turn_json(record: TurnRecord, agent_names: Sequence[str]) -> dict[str, Any]:
    return {
        **decision_json(record.decision, agent_names),
        "verdict": record.verdict,
        "tokens_in": record.tokens_in,
        "tokens_out": record.tokens_out,
        "usd": record.usd,
        "usd_estimated": record.usd_estimated,
        "seconds": round(record.seconds, 3),
        "truncated": record.truncated,
        "input_truncated": _cut_json(record.input_truncated),
        "text": record.text,
    }


def _cut_json(cut: Truncation | None) -> dict[str, int] | None:
    return None if cut is None else cut.as_json()


def episode_json(
    result: EpisodeResult,
    agent_names: Sequence[str],
    suite: Any = None,
    budget: Budget | None = None,
) -> dict[str, Any]:
    """`verdict` is the episode's; `verifier_verdict` the last Verifier's own; `tests` the final
    answer's execution check (null without one; `passed` null when the answer was never run;
    source "syntax" when the answer does not parse, tests or not);
    `budget` the run's accounting, failed attempts that may have been billed included;
    `input_truncated` the largest cut any reader made of its input (null: nothing was cut)."""
    check, tests = result.check, None
    if check is not None and check.source == "syntax":  # the answer did not parse: no test ran
        tests = {"source": "syntax", "count": 1, "passed": False, "summary": check.summary}
    elif suite is not None:
        tests = {
            "source": suite.source,
            "count": suite.count,
            "passed": None if check is None else check.passed,
            "summary": None if check is None else check.summary,
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": result.verdict,
        "verifier_verdict": result.verifier_verdict,
        "tests": tests,
        "answer": result.answer,
        "usd": result.usd,
        "error": result.error,
        "input_truncated": _cut_json(result.input_truncated),
        "turns": [turn_json(r, agent_names) for r in result.turns],
        **({} if budget is None else {"budget": budget.as_json()}),
    }


class JsonlWriter:
    """--jsonl: one event per line as it happens; the `final` event is the --json object."""

    def __init__(
        self,
        stream: IO[str],
        agent_names: Sequence[str],
        suite: Any = None,
        budget: Budget | None = None,
    ) -> None:
        self.stream = stream
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
                    "event": "check",
                    "turn": event.turn,
                    "source": event.outcome.source,
                    "passed": event.outcome.passed,
                    "summary": event.outcome.summary,
                }
            )
        elif isinstance(event, EpisodeFinished):
            final = episode_json(event.result, self.names, self.suite, self.budget)
            self._write({"event": "final", **final})

    def _write(self, obj: dict[str, Any]) -> None:
        self.stream.write(json.dumps(obj) + "\n")
        self.stream.flush()


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


ROLE_STYLES = {"thinker": "magenta", "worker": "cyan", "verifier": "yellow"}
VERDICT_STYLES = {"accept": "bold green", "reject": "red", "malformed": "red"}


STREAM_LINES = 6  # of the reply in flight, under its turn's line
STREAM_TAIL = 4000  # characters of the reply the live lines are cut from


def tail_lines(text: str, lines: int) -> str:
    """The last `lines` lines of `text`, redacted (a key cut by the tail's start is dropped with
    the partial first line)."""
    tail = text[-STREAM_TAIL:]
    rows = redact(tail).splitlines()
    if len(tail) < len(text):
        rows = rows[1:]
    return "\n".join(rows[-lines:])


def indented(text: str) -> str:
    """Turn text under its turn's line (the width of "turn  1  "), its own indentation kept
    relative to its least indented line."""
    return "\n".join(
        " " * 9 + line if line.strip() else "" for line in textwrap.dedent(text).splitlines()
    )


class TurnDisplay:
    def __init__(self, console: Console, header: str = "", verbose: bool = False) -> None:
        self.console = console
        self.verbose = verbose
        self.live: Live | None = None
        self.spent = 0.0
        self.streamed = 0
        self.text = ""
        self.started = 0.0
        self.decision: Decision | None = None
        if header:
            console.print(Text(header, style="dim"))

    def __call__(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self.decision, self.streamed, self.text, self.started = (
                event.decision,
                0,
                "",
                time.perf_counter(),
            )
            if (
                self.console.is_terminal
            ):  # Live's thread draws `_in_flight` 8 times a second: no work per piece
                self.live = Live(
                    console=self.console,
                    transient=True,
                    refresh_per_second=8,
                    get_renderable=self._in_flight,
                )
                self.live.start()
        elif isinstance(event, TextDelta):
            self.streamed += 1
            self.text += event.text
        elif isinstance(event, TurnFinished):
            self._stop_live()
            self.spent += event.record.usd
            self.console.print(self._finished(event.record))
            if self.verbose and event.record.text.strip():
                self.console.print(Text(indented(redact(event.record.text).strip("\n"))))
        elif isinstance(event, CheckFinished):
            line = Text(f"         {event.outcome.source} ", style="bold")
            passed = event.outcome.passed
            line.append(
                "passed" if passed else "FAILED", style="bold green" if passed else "bold red"
            )
            if not passed:
                last = event.outcome.summary.strip().splitlines()
                line.append(f"  {last[-1] if last else ''}", style="dim")
            self.console.print(line)
        elif isinstance(event, EpisodeFinished):
            self._stop_live()
            result = event.result
            style = "bold green" if result.verdict == "accepted" else "bold red"
            line = Text("verdict ", style="bold")
            line.append(result.verdict, style=style)
            estimated = "~" if any(t.usd_estimated for t in result.turns) else ""
            line.append(
                f" · {len(result.turns)} turn{'s' * (len(result.turns) != 1)} · {estimated}${result.usd:.4f}"
            )
            self.console.print(line)

    def _stop_live(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _head(self, decision: Decision) -> Text:
        line = Text(f"turn {decision.turn:>2}  ", style="bold")
        line.append(f"{decision.agent:<14} ")
        line.append(f"{decision.role.value:<8}", style=ROLE_STYLES[decision.role.value])
        source = " (thinker)" if decision.role_source == "thinker" else ""
        line.append(f" p={decision.probability:.2f}{source}", style="dim")
        return line

    def _in_flight(self) -> Group:
        assert self.decision is not None
        line = self._head(self.decision)
        line.append(
            f"  … {self.streamed} tokens, {time.perf_counter() - self.started:.1f}s", style="dim"
        )
        text = Text(
            indented(tail_lines(self.text, STREAM_LINES)),
            style="dim",
            no_wrap=True,
            overflow="ellipsis",
        )
        return Group(line, text) if self.text else Group(line)

    def _finished(self, record: TurnRecord) -> Text:
        line = self._head(record.decision)
        estimated = "~" if record.usd_estimated else ""
        line.append(
            f"  {record.tokens_in}→{record.tokens_out} tok  {record.seconds:.1f}s"
            f" (+{record.decision.coordinator_seconds:.2f}s coord)  {estimated}${self.spent:.4f}"
        )
        if record.verdict is not None:
            line.append("  verdict: ")
            line.append(record.verdict, style=VERDICT_STYLES[record.verdict])
        if record.truncated:
            line.append("  cut at max_tokens", style="yellow")
        return line
