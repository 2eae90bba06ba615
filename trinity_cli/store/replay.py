"""A logged solve run rebuilt from its stored turns and checks: the events its display saw (for
`trinity logs show`) and, for a run that never stored one, its `solve --json` object."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode_json import episode_json
from trinity_cli.core.events import (
    CheckFinished,
    EpisodeFinished,
    Event,
    TurnFinished,
    TurnStarted,
)
from trinity_cli.core.records import CheckOutcome, Decision, EpisodeResult, Truncation, TurnRecord
from trinity_cli.core.roles import Role
from trinity_cli.store.runlog import StoredRun


@dataclass(frozen=True)
class StoredSuite:
    """What episode_json needs of a run's execution check."""

    source: str
    count: int


def replay(stored: StoredRun) -> tuple[list[Event], EpisodeResult]:
    """The events the run's display saw, rebuilt from its stored turns and checks, and the
    result (for a run that never finished: its turns so far, verdict interrupted)."""
    events: list[Event] = []
    records: list[TurnRecord] = []
    last_check: CheckFinished | None = None
    for t in stored.turns:
        decision = Decision(
            t["turn"], t["agent_index"], t["agent"], Role(t["role"]), t["role_source"],
            tuple(t["agent_probs"]), tuple(t["role_probs"]), t["coordinator_seconds"],
            t["coordinator_tokens"],
        )
        cut = (
            None if t["input_truncated"] is None else Truncation(**json.loads(t["input_truncated"]))
        )
        record = TurnRecord(
            decision, t["text"], t["answer"], t["verdict"], t["tokens_in"], t["tokens_out"],
            t["usd"], bool(t["usd_estimated"]), t["seconds"], bool(t["truncated"]), cut,
        )
        records.append(record)
        events += [TurnStarted(decision), TurnFinished(record)]
        for c in stored.checks:
            if c["turn"] == t["turn"]:
                last_check = CheckFinished(
                    t["turn"], CheckOutcome(bool(c["passed"]), c["summary"], c["source"])
                )
                events.append(last_check)
    row = stored.row
    answers = [r for r in records if r.answer is not None]
    answer = row["answer"] if row["finished"] else (answers[-1].answer if answers else None)
    # the final answer's check is one made after the turn that wrote it
    check = (
        last_check.outcome
        if last_check and answers and last_check.turn >= answers[-1].decision.turn
        else None
    )
    usd = row["usd"] if row["usd"] is not None else sum(r.usd for r in records)
    result = EpisodeResult(stored.verdict, answer, tuple(records), usd, row["error"], check)
    events.append(EpisodeFinished(result))
    return events, result


def rebuilt_json(stored: StoredRun) -> dict[str, Any]:
    """The `solve --json` object of a run that never stored one (it was killed)."""
    _, result = replay(stored)
    tests = stored.row["tests"]
    suite = None if tests is None else StoredSuite(tests["source"], tests["count"])
    names = [a["name"] for a in stored.row["pool"]["agents"]]
    budget = Budget(stored.row["settings"].get("budget_usd"), spent_usd=result.usd)
    return episode_json(result, names, suite, budget)
