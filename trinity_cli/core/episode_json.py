"""The JSON a run reports: `solve --json`, each `--jsonl` event and the run log's replay of a
run all build their objects here, so their keys agree (schema_version counts changes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trinity_cli.core.budget import Budget
from trinity_cli.core.records import Decision, EpisodeResult, Truncation, TurnRecord
from trinity_cli.core.roles import ROLE_ORDER

SCHEMA_VERSION = 1


def decision_json(decision: Decision, agent_names: Sequence[str]) -> dict[str, Any]:
    return {
        "turn": decision.turn, "agent": decision.agent, "role": decision.role.value,
        "role_source": decision.role_source,
        "agent_probs": {n: round(p, 6) for n, p in zip(agent_names, decision.agent_probs)},
        "role_probs": {r.value: round(p, 6) for r, p in zip(ROLE_ORDER, decision.role_probs)},
        "coordinator_seconds": round(decision.coordinator_seconds, 4),
        "coordinator_tokens": decision.coordinator_tokens,
    }


def turn_json(record: TurnRecord, agent_names: Sequence[str]) -> dict[str, Any]:
    return {
        **decision_json(record.decision, agent_names), "verdict": record.verdict,
        "tokens_in": record.tokens_in, "tokens_out": record.tokens_out, "usd": record.usd,
        "usd_estimated": record.usd_estimated, "seconds": round(record.seconds, 3),
        "truncated": record.truncated, "input_truncated": _cut_json(record.input_truncated),
        "text": record.text,
    }


def _cut_json(cut: Truncation | None) -> dict[str, int] | None:
    return None if cut is None else cut.as_json()


def episode_json(
    result: EpisodeResult, agent_names: Sequence[str], suite: Any = None,
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
            "source": suite.source, "count": suite.count,
            "passed": None if check is None else check.passed,
            "summary": None if check is None else check.summary,
        }
    return {
        "schema_version": SCHEMA_VERSION, "verdict": result.verdict,
        "verifier_verdict": result.verifier_verdict, "tests": tests, "answer": result.answer,
        "usd": result.usd, "error": result.error,
        "input_truncated": _cut_json(result.input_truncated),
        "turns": [turn_json(r, agent_names) for r in result.turns],
        **({} if budget is None else {"budget": budget.as_json()}),
    }
