"""The run log, like `llm logs`: every `solve`, turn by turn, and every `eval` / `train` as one
summary row, in SQLite under the user data dir.

- Each finished turn is its own short transaction, written as it happens: a run killed mid-way
  (Ctrl-C, a crash, kill -9) keeps every turn it finished.
- WAL and a busy timeout let several trinity processes log at once.
- The schema's version lives in PRAGMA user_version; `migrate` moves an older log forward in
  one transaction, and a log written by a newer trinity is left alone (`RunLogError`).
- Nothing secret is stored: agent specs lose their key variable, and every stored string goes
  through `errors.redact`.
- Logging never fails a run: `RunLogSink` and `summary_row` turn the first database error
  into one warning and go on unlogged.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trinity_cli import paths
from trinity_cli.core.events import CheckFinished, EpisodeFinished, Event, TurnFinished
from trinity_cli.core.verdicts import INTERRUPTED
from trinity_cli.errors import ConfigError, TrinityError, redact

if TYPE_CHECKING:
    from trinity_cli.core.records import EpisodeResult, TurnRecord
    from trinity_cli.pool.spec import Pool

FILE_NAME = "runs.sqlite"
BUSY_TIMEOUT_S = 5.0  # a writer waits this long for another one's lock before giving up
UNFINISHED = INTERRUPTED  # the verdict of a run that never finished (killed, or still running)

# MIGRATIONS[v] takes the schema from version v to v + 1; len(MIGRATIONS) is the current version.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        (
            """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            time TEXT NOT NULL,             -- start, ISO 8601 UTC
            finished TEXT,                  -- NULL: killed, or still running
            command TEXT NOT NULL,          -- solve | eval | train
            problem TEXT NOT NULL,          -- the problem text; eval/train: the task set
            problem_sha256 TEXT NOT NULL,
            pool TEXT NOT NULL,             -- JSON {source, agents}: specs without keys
            head TEXT NOT NULL,             -- the policy's source
            tests TEXT,                     -- JSON {source, count}: the execution check, if any
            settings TEXT NOT NULL,         -- JSON: the flags that shape the run
            verdict TEXT,
            answer TEXT,
            usd REAL,
            error TEXT,
            result TEXT                     -- JSON: what `solve --json` printed; """
            """eval/train: a summary
        )"""
        ),
        "CREATE INDEX runs_by_time ON runs (time)",
        """CREATE TABLE turns (
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            turn INTEGER NOT NULL,
            time TEXT NOT NULL,             -- when it finished
            agent_index INTEGER NOT NULL,
            agent TEXT NOT NULL,
            role TEXT NOT NULL,
            role_source TEXT NOT NULL,      -- head | thinker
            agent_probs TEXT NOT NULL,      -- JSON list, pool order
            role_probs TEXT NOT NULL,       -- JSON list: thinker, worker, verifier
            coordinator_seconds REAL NOT NULL,
            coordinator_tokens INTEGER NOT NULL,
            text TEXT NOT NULL,
            answer TEXT,
            verdict TEXT,
            tokens_in INTEGER NOT NULL,
            tokens_out INTEGER NOT NULL,
            usd REAL NOT NULL,
            usd_estimated INTEGER NOT NULL,
            seconds REAL NOT NULL,
            PRIMARY KEY (run_id, turn)
        )""",
        """CREATE TABLE checks (
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            turn INTEGER NOT NULL,          -- the answer standing after this turn
            passed INTEGER NOT NULL,
            summary TEXT NOT NULL
        )""",
        "CREATE INDEX checks_by_run ON checks (run_id, turn)",
    ),
    # 2: which check it was ("syntax": the answer did not parse), so a replay draws it as shown
    ("ALTER TABLE checks ADD COLUMN source TEXT NOT NULL DEFAULT 'tests'",),
    # 3: what was cut: the reply at max_tokens, and the turn's largest input cut
    # (JSON {kept_tokens, dropped_tokens})
    (
        "ALTER TABLE turns ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE turns ADD COLUMN input_truncated TEXT",
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)

_AGENT_SECRET_FIELDS = {"api_key_env"}


class RunLogError(ConfigError):
    """The log cannot be used (written by a newer trinity); `logs` exits 3 on it."""


def default_path() -> Path:
    return paths.data_dir() / FILE_NAME


def disabled(no_log: bool) -> bool:
    """`--no-log`, or TRINITY_NO_LOG set to anything but empty or 0."""
    return no_log or os.environ.get("TRINITY_NO_LOG", "") not in ("", "0")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def utc(moment: datetime) -> str:
    """`moment` (naive: local time) in the stored format, so strings compare as times."""
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


def pool_json(pool: Pool) -> dict[str, Any]:
    agents = [
        {k: v for k, v in asdict(spec).items() if k not in _AGENT_SECRET_FIELDS}
        for spec in pool.agents
    ]
    return {"source": pool.source, "agents": agents}


def _json(value: Any) -> str | None:
    return None if value is None else redact(json.dumps(value))


def _text(value: str | None) -> str | None:
    return None if value is None else redact(value)


def migrate(db: sqlite3.Connection, migrations: Sequence[tuple[str, ...]] = MIGRATIONS) -> None:
    """Bring the schema to len(migrations). Two processes may race here: the version is read
    again inside the write transaction, so the second finds the work done."""
    target = len(migrations)
    version = _version(db)
    if version < target:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = _version(db)
            if version < target:
                for step in migrations[version:]:
                    for statement in step:
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {target}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    if version > target:
        raise RunLogError(
            f"written by a newer trinity (schema {version}; this one reads up to {target}): "
            "upgrade trinity, or move the file aside to start a new log"
        )


def _version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


@dataclass
class StoredRun:
    """One run as stored: the row's columns (JSON decoded), its turns and checks as dicts."""

    row: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return self.row["verdict"] or UNFINISHED


class RunLog:
    """The log's one connection. Methods raise sqlite3.Error; callers decide what that costs."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db = db
        self.path = path

    @classmethod
    def open(cls, path: Path | None = None) -> RunLog:
        path = path or default_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit: each statement is its own short transaction unless we BEGIN one
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA foreign_keys = ON")
            migrate(db)
        except BaseException:
            db.close()
            raise
        return cls(db, path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    def start_run(
        self, command: str, problem: str, pool: Pool, head: str, *,
        tests: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
        started: str | None = None,
    ) -> int:
        cursor = self.db.execute(
            "INSERT INTO runs "
            "(time, command, problem, problem_sha256, pool, head, tests, settings) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                started or now(), command, redact(problem),
                hashlib.sha256(problem.encode()).hexdigest(), _json(pool_json(pool)), redact(head),
                _json(tests), _json(settings or {}),
            ),
        )
        return int(cursor.lastrowid or 0)

    def add_turn(self, run_id: int, record: TurnRecord) -> None:
        d = record.decision
        cut = None if record.input_truncated is None else _json(record.input_truncated.as_json())
        self.db.execute(
            "INSERT INTO turns VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id, d.turn, now(), d.agent_index, d.agent, d.role.value, d.role_source,
                json.dumps(d.agent_probs), json.dumps(d.role_probs), d.coordinator_seconds,
                d.coordinator_tokens, redact(record.text), _text(record.answer), record.verdict,
                record.tokens_in, record.tokens_out, record.usd, int(record.usd_estimated),
                record.seconds, int(record.truncated), cut,
            ),
        )

    def add_check(
        self, run_id: int, turn: int, passed: bool, summary: str, source: str = "tests"
    ) -> None:
        self.db.execute(
            "INSERT INTO checks (run_id, turn, passed, summary, source) VALUES (?, ?, ?, ?, ?)",
            (run_id, turn, int(passed), redact(summary), source),
        )

    def finish_run(
        self, run_id: int, verdict: str, *, answer: str | None = None, usd: float = 0.0,
        error: str | None = None, result: dict[str, Any] | None = None,
    ) -> None:
        self.db.execute(
            "UPDATE runs SET finished = ?, verdict = ?, answer = ?, usd = ?, error = ?, result = ? "
            "WHERE id = ?",
            (now(), verdict, _text(answer), usd, _text(error), _json(result), run_id),
        )

    # -- reading ---------------------------------------------------------------------------

    def list_runs(
        self, limit: int, *, verdict: str | None = None, agent: str | None = None,
        since: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """Newest first: {id, time, command, problem, problem_sha256, verdict, turns, usd, agents}.
        `agents`: who took turns (solve), the pool (eval/train, which keep no turns)."""
        where, args = ["time >= ?"], [utc(since) if since else ""]
        if verdict is not None:
            where.append(f"COALESCE(verdict, '{UNFINISHED}') = ?")
            args.append(verdict)
        found: list[dict[str, Any]] = []
        for row in self.db.execute(
            f"SELECT * FROM runs WHERE {' AND '.join(where)} ORDER BY id DESC", args
        ):
            if len(found) >= limit:
                break
            turns = self.db.execute(
                "SELECT agent, usd FROM turns WHERE run_id = ? ORDER BY turn", (row["id"],)
            ).fetchall()
            if row["command"] == "solve":
                agents = list(dict.fromkeys(t["agent"] for t in turns))
            else:
                agents = [a["name"] for a in json.loads(row["pool"])["agents"]]
            if agent is not None and agent not in agents:
                continue
            found.append(
                {
                    "id": row["id"], "time": row["time"], "command": row["command"],
                    "problem": problem_title(row["problem"] or ""),
                    "problem_sha256": row["problem_sha256"],
                    "verdict": row["verdict"] or UNFINISHED, "turns": len(turns),
                    "usd": row["usd"] if row["usd"] is not None else sum(t["usd"] for t in turns),
                    "agents": agents,
                }
            )
        return found

    def get_run(self, ref: int | None) -> StoredRun | None:
        """Run `ref`, or the newest with None."""
        if ref is None:
            row = self.db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        else:
            row = self.db.execute("SELECT * FROM runs WHERE id = ?", (ref,)).fetchone()
        if row is None:
            return None
        run = dict(row)
        for column in ("pool", "tests", "settings", "result"):
            run[column] = None if run[column] is None else json.loads(run[column])
        turns = [
            dict(t)
            for t in self.db.execute(
                "SELECT * FROM turns WHERE run_id = ? ORDER BY turn", (run["id"],)
            )
        ]
        for t in turns:
            t["agent_probs"], t["role_probs"] = (
                json.loads(t["agent_probs"]), json.loads(t["role_probs"]),
            )
        checks = [
            dict(c)
            for c in self.db.execute(
                "SELECT * FROM checks WHERE run_id = ? ORDER BY rowid", (run["id"],)
            )
        ]
        return StoredRun(run, turns, checks)

    def stats(self, since: datetime | None = None) -> list[dict[str, Any]]:
        """Per local day and agent: calls, tokens, $, and accept_rate = accepted / answers, where
        `answers` counts the agent's Worker answers and `accepted` the runs accepted with one
        of them as the final answer."""
        rows = self.db.execute(
            """SELECT date(t.time, 'localtime') AS day, t.agent AS agent, COUNT(*) AS calls,
                      SUM(t.tokens_in) AS tokens_in, SUM(t.tokens_out) AS tokens_out, """
            """TOTAL(t.usd) AS usd,
                      SUM(t.answer IS NOT NULL) AS answers,
                      TOTAL(r.verdict IS 'accepted' AND t.turn = (SELECT MAX(u.turn) FROM turns u
                          WHERE u.run_id = t.run_id AND u.answer IS NOT NULL)) AS accepted
               FROM turns t JOIN runs r ON r.id = t.run_id
               WHERE t.time >= ?
               GROUP BY day, t.agent ORDER BY day DESC, t.agent""",
            (utc(since) if since else "",),
        )
        return [
            {
                **dict(r), "accepted": int(r["accepted"]),
                "accept_rate": r["accepted"] / r["answers"] if r["answers"] else None,
            }
            for r in rows
        ]

    def prune(self, before: datetime) -> int:
        """Delete the runs started before `before`, with their turns and checks."""
        return int(self.db.execute("DELETE FROM runs WHERE time < ?", (utc(before),)).rowcount)


# -- logging that never fails a run -------------------------------------------------------------

LOG_ERRORS = (sqlite3.Error, OSError, RunLogError)


class RunLogSink:
    """A solve's events into the log as they happen. The first error (corrupt, locked, newer
    log) costs one warning; the run goes on unlogged."""

    def __init__(
        self, final: Callable[[EpisodeResult], dict[str, Any]], warn: Callable[[str], None]
    ) -> None:
        self.final = final  # the object `solve --json` prints, stored at the end
        self.warn = warn
        self.log: RunLog | None = None
        self.run_id = 0

    @classmethod
    def start(
        cls, problem: str, pool: Pool, head: str, *,
        final: Callable[[EpisodeResult], dict[str, Any]], warn: Callable[[str], None],
        tests: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
    ) -> RunLogSink:
        sink = cls(final, warn)

        def begin() -> None:
            sink.log = RunLog.open()
            sink.run_id = sink.log.start_run(
                "solve", problem, pool, head, tests=tests, settings=settings
            )

        sink._guard(begin)
        return sink

    def __call__(self, event: Event) -> None:
        if self.log is not None:
            self._guard(lambda: self._write(event))

    def _write(self, event: Event) -> None:
        assert self.log is not None
        if isinstance(event, TurnFinished):
            self.log.add_turn(self.run_id, event.record)
        elif isinstance(event, CheckFinished):
            outcome = event.outcome
            self.log.add_check(
                self.run_id, event.turn, outcome.passed, outcome.summary, outcome.source
            )
        elif isinstance(event, EpisodeFinished):
            result = event.result
            self.log.finish_run(
                self.run_id, result.verdict, answer=result.answer, usd=result.usd,
                error=result.error, result=self.final(result),
            )
            self._close()

    def _guard(self, action: Callable[[], None]) -> None:
        try:
            action()
        except LOG_ERRORS as exc:
            self._close()
            self.warn(_warning(exc))

    def _close(self) -> None:
        if self.log is not None:
            log, self.log = self.log, None
            try:
                log.close()
            except sqlite3.Error:
                pass


def _warning(exc: BaseException) -> str:
    reason = exc.message if isinstance(exc, TrinityError) else redact(str(exc))
    return f"run log {default_path()}: {reason}; this run is not logged (trinity logs --help)"


@dataclass
class Summary:
    """What an eval / train run fills in for its one log row."""

    verdict: str | None = None
    usd: float = 0.0
    error: str | None = None
    result: dict[str, Any] | None = None

    def done(
        self, verdict: str, usd: float, result: dict[str, Any], error: str | None = None
    ) -> None:
        self.verdict, self.usd, self.result, self.error = verdict, usd, result, error


@contextmanager
def summary_row(
    command: str, tasks: str, pool: Pool, head: str, settings: dict[str, Any], *, enabled: bool,
    warn: Callable[[str], None], spent: Callable[[], float] = lambda: 0.0,
) -> Iterator[Summary]:
    """One row for a whole eval / train run, written when it ends however it ends: an
    exception leaves verdict `interrupted` (Ctrl-C) or `error`, with what was `spent` by then."""
    summary, started = Summary(), now()
    try:
        yield summary
    except BaseException as exc:
        if summary.verdict is None:
            summary.verdict = UNFINISHED if isinstance(exc, KeyboardInterrupt) else "error"
            summary.error = exc.message if isinstance(exc, TrinityError) else type(exc).__name__
            summary.usd = spent()
        raise
    finally:
        if enabled:
            try:
                with RunLog.open() as log:
                    run_id = log.start_run(
                        command, tasks, pool, head, settings=settings, started=started
                    )
                    log.finish_run(
                        run_id, summary.verdict or UNFINISHED, usd=summary.usd, error=summary.error,
                        result=summary.result,
                    )
            except LOG_ERRORS as exc:
                warn(_warning(exc))


TITLE_CHARS = 48


def problem_title(problem: str) -> str:
    """Which problem a run was, in a few words: its first non-blank line, without Markdown's
    heading marks (eval and train store `tasks:split` there)."""
    first = next(
        (line.strip().lstrip("#").strip() for line in problem.splitlines() if line.strip()), ""
    )
    return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1] + "…"
