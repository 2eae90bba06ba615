"""Agent profiles on disk (`profiles.sqlite` in the user data dir) and how a pool finds them.

A profile (core.profile) holds for one agent configuration, one coordinator and one universal
head's basis. Its key is everything that changes the agent's answers or the profile's meaning:

- the agent: provider, model, base_url, temperature, mode, max_tokens, stop (a replay agent's
  record file's sha256 and seed; a sim agent's skills and seed) — never its name;
- the definition (`core.profile.DEFINITION`), the coordinator GGUF's sha256 and the basis's
  sha256 (the head's mean, std and basis arrays);
- the calibration task ids and n.

Lookups go by everything but the tasks (`agent_key`) and take the newest: `pool` and `solve`
do not know which tasks a profile was measured on. A profile made under another definition,
coordinator or basis is never found for this head (weights.py refuses a head whose profile
definition this version does not make).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.core.profile import DEFINITION, Profile
from trinity_cli.pool.spec import AgentSpec


@dataclass(frozen=True)
class Scale:
    """What a profile's numbers are measured against: the coordinator and the head's basis."""

    coordinator_sha256: str
    basis_sha256: str
    definition: str = DEFINITION


@dataclass(frozen=True)
class StoredProfile:
    profile: Profile
    created: str

    @property
    def age_days(self) -> float:
        then = dt.datetime.fromisoformat(self.created)
        return (dt.datetime.now(dt.timezone.utc) - then).total_seconds() / 86400


def profiles_path() -> Path:
    return paths.data_dir() / "profiles.sqlite"


def agent_fields(spec: AgentSpec) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "provider": spec.provider, "model": spec.model, "base_url": spec.base_url,
        "temperature": spec.temperature, "mode": spec.mode, "max_tokens": spec.max_tokens,
        "stop": list(spec.stop),
    }
    if spec.provider == "replay":
        record = Path(spec.record or "")
        stat = record.stat()
        fields.update(
            record_sha256=_file_sha256(record, stat.st_mtime_ns, stat.st_size), seed=spec.seed
        )
    if spec.provider == "sim":
        fields.update(skills=spec.skills, default_skill=spec.default_skill, seed=spec.seed)
    return fields


@functools.lru_cache(maxsize=64)
def _file_sha256(path: Path, mtime_ns: int, size: int) -> str:
    """A record file's sha256, hashed once per version of the file (lookups repeat per agent)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def agent_key(spec: AgentSpec, scale: Scale) -> str:
    return _digest({"agent": agent_fields(spec), **asdict(scale)})


def full_key(spec: AgentSpec, scale: Scale, task_ids: Sequence[str]) -> str:
    return _digest(
        {"agent": agent_key(spec, scale), "task_ids": list(task_ids), "n": len(task_ids)}
    )


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class ProfileStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or profiles_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        with self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS profiles (key TEXT PRIMARY KEY, agent_key TEXT, "
                "created TEXT, body TEXT)"
            )

    def put(self, spec: AgentSpec, scale: Scale, task_ids: Sequence[str], profile: Profile) -> None:
        created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        body = json.dumps(
            {
                "profile": asdict(profile), "task_ids": list(task_ids), "agent": spec.name,
                "scale": asdict(scale),
            }
        )
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO profiles VALUES (?, ?, ?, ?)",
                (full_key(spec, scale, task_ids), agent_key(spec, scale), created, body),
            )

    def get(
        self, spec: AgentSpec, scale: Scale, task_ids: Sequence[str] | None = None
    ) -> StoredProfile | None:
        """The newest profile of this agent on this scale (on exactly `task_ids`, if given)."""
        if task_ids is None:
            row = self._db.execute(
                "SELECT created, body FROM profiles WHERE agent_key = ? "
                "ORDER BY created DESC, rowid DESC LIMIT 1", (agent_key(spec, scale),),
            ).fetchone()
        else:
            row = self._db.execute(
                "SELECT created, body FROM profiles WHERE key = ?",
                (full_key(spec, scale, task_ids),),
            ).fetchone()
        if row is None:
            return None
        body = json.loads(row[1])
        raw = body["profile"]
        profile = Profile(
            raw["pass_rate"], tuple(raw["skill"]), raw["usd_per_answer"], raw["n"], raw["offset"]
        )
        return StoredProfile(profile, row[0])

    def close(self) -> None:
        self._db.close()
