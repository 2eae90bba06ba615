"""The Rich progress display of an episode's events, on stderr (cli/sinks.py has the others).

The display prints one permanent line per finished turn and keeps a transient `Live` region for
the turn in flight, only on a terminal: its head line and the last lines of the reply as it
streams. On a pipe or CI log it prints plain lines. With `verbose` every finished turn's whole
text follows its line (terminal or not). Streamed and printed text is redacted like errors.
"""

from __future__ import annotations

import textwrap
import time

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from trinity_cli.core.events import (
    CheckFinished,
    EpisodeFinished,
    Event,
    TextDelta,
    TurnFinished,
    TurnStarted,
)
from trinity_cli.core.records import Decision, TurnRecord
from trinity_cli.errors import redact

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
            self.decision, self.streamed, self.text = event.decision, 0, ""
            self.started = time.perf_counter()
            if self.console.is_terminal:
                # Live's thread draws `_in_flight` 8 times a second: no work per piece
                self.live = Live(
                    console=self.console, transient=True, refresh_per_second=8,
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
            turns = len(result.turns)
            estimated = "~" if any(t.usd_estimated for t in result.turns) else ""
            line.append(f" · {turns} turn{'s' * (turns != 1)} · {estimated}${result.usd:.4f}")
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
            indented(tail_lines(self.text, STREAM_LINES)), style="dim", no_wrap=True,
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
