"""The pool file: which agents exist, how to reach them, what they cost.

Lookup order: `--pool`, then `$TRINITY_POOL` (each a path or a bundled pool's name: an existing
path wins), then `./trinity.toml`, then `<user config dir>/pool.toml`, then the built-in offline
default (two agents on the embedded model, greedy and T=0.8, so routing has a real choice even
offline). Keys are strict: an unknown key is an error naming the file and the key.
"""

from __future__ import annotations

import difflib
import math
import os
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import ConfigError
from trinity_cli.pool.providers import KINDS, REPLAY_ROLES, ROLES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MODES = ("chat", "completion")
TOKEN_PARAMS = ("max_completion_tokens", "max_tokens")  # the request key that carries max_tokens
EMBEDDED = "embedded"
BUILTIN_POOL = "built-in offline default"


@dataclass(frozen=True)
class AgentSpec:
    name: str
    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    price_in: float | None = None  # USD per million input tokens
    price_out: float | None = None  # USD per million output tokens
    temperature: float | None = None  # None: the provider's default
    max_tokens: int = 512
    mode: str | None = None  # local: "completion" (base models) or "chat"
    token_param: str | None = (
        None  # openai: one of TOKEN_PARAMS; None: by endpoint (default_token_param)
    )
    stop: tuple[str, ...] = ()
    roles: tuple[str, ...] = ROLES  # the roles the coordinator may give this agent
    # the context in tokens: local default 4096; remote, when given, prompts are fitted to it
    n_ctx: int | None = None
    timeout_s: float = 120.0  # per attempt
    retries: int = 3  # extra attempts after a rate-limit, server or network error
    deadline_s: float = 300.0  # all attempts of one call together
    max_concurrency: int = 4  # calls in flight at once to this agent
    # provider "sim" only (a simulation, see providers/sim.py):
    skills: dict[str, float] | None = None  # Worker success probability per task tag
    default_skill: float = 0.3  # ... for tags not listed
    thinker_boost: float = 0.0  # added when a Thinker turn came before
    verifier_accuracy: float = 0.8  # probability that a sim Verifier's verdict is right
    seed: int = 0  # sim and replay: varies the agent's seeded draws
    # provider "replay" only (see providers/replay.py): the record file, resolved at load
    record: str | None = None


@dataclass(frozen=True)
class CoordinatorSpec:
    model: str = EMBEDDED  # a GGUF path, or "embedded"
    n_ctx: int = 8192
    n_threads: int | None = None
    token_position: int = -2
    weights: str | None = None  # the head solve uses: a path (relative to the pool file) or a name


@dataclass(frozen=True)
class Pool:
    agents: tuple[AgentSpec, ...]
    coordinator: CoordinatorSpec = field(default_factory=CoordinatorSpec)
    source: str = BUILTIN_POOL

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.agents)

    @property
    def warnings(self) -> list[str]:
        """What a valid pool cannot do, for `trinity pool` and every run to say."""
        if any("verifier" in a.roles for a in self.agents):
            return []
        return [NO_VERIFIER]


NO_VERIFIER = (
    "no agent may play verifier (see the agents' roles): no answer can be accepted, so every "
    "episode runs to --max-turns"
)
_AGENT_KEYS = {f.name for f in fields(AgentSpec)}
_REQUIRED_KEYS = ("name", "provider", "model")
_DEFAULT_KEYS = _AGENT_KEYS - {"name"}
_COORDINATOR_KEYS = {f.name for f in fields(CoordinatorSpec)}


def find_pool_file(flag: str | None) -> Path | None:
    """The pool file to use, by the documented precedence; None means the built-in default."""
    from trinity_cli.pool.bundled import pool_names, pool_path

    for given in (flag, os.environ.get("TRINITY_POOL")):
        if given:
            if Path(given).expanduser().is_dir():
                raise ConfigError(f"pool {given} is a directory, not a pool file")
            try:
                return pool_path(given)  # an existing path wins, else a bundled name
            except ConfigError:
                close = difflib.get_close_matches(given, pool_names(), n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise ConfigError(
                    f"pool file not found: {given} ({hint}no such file, and no bundled pool of "
                    f"that name: {', '.join(pool_names())})"
                ) from None
    for candidate in (Path("trinity.toml"), paths.config_dir() / "pool.toml"):
        if candidate.is_dir():  # not silently skipped: the user meant a pool there
            raise ConfigError(f"{candidate} is a directory, not a pool file")
        if candidate.is_file():
            return candidate
    return None


def load_pool(flag: str | None = None) -> Pool:
    path = find_pool_file(flag)
    if path is None:
        text = resources.files("trinity_cli").joinpath("default_pool.toml").read_text("utf-8")
        return parse_pool(text, BUILTIN_POOL)
    if not path.is_file():
        raise ConfigError(f"pool file not found: {path}")
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read pool file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read pool file {path}: {exc}") from None
    return parse_pool(text, str(path))


def parse_pool(text: str, source: str) -> Pool:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    _check_keys(data, {"agents", "defaults", "coordinator"}, source, "")
    defaults = _table(data.get("defaults", {}), source, "defaults")
    required = set(_REQUIRED_KEYS) - {"name"} - defaults.keys()  # a default name is no key
    _check_keys(defaults, _DEFAULT_KEYS, source, "defaults.", required)
    coordinator = _table(data.get("coordinator", {}), source, "coordinator")
    _check_keys(coordinator, _COORDINATOR_KEYS, source, "coordinator.")
    raw_agents = data.get("agents")
    if not isinstance(raw_agents, list) or not raw_agents:
        raise ConfigError(f"{source}: no agents: add at least one [[agents]] table")
    agents = []
    for i, raw in enumerate(raw_agents, start=1):
        where = f"agents[{i}]"
        raw = _table(raw, source, where)
        missing = set(_REQUIRED_KEYS) - raw.keys() - defaults.keys()
        _check_keys(raw, _AGENT_KEYS, source, f"{where}.", missing)
        agents.append(_agent(source, where, {**defaults, **raw}))
    if not any("worker" in agent.roles for agent in agents):
        raise ConfigError(
            f"{source}: no agent may play worker (see the agents' roles): nobody could answer"
        )
    seen: set[str] = set()
    for agent in agents:
        if agent.name in seen:
            raise ConfigError(f"{source}: duplicate agent name {agent.name!r}")
        seen.add(agent.name)
    return Pool(tuple(agents), _coordinator(source, coordinator), source)


def _table(value: Any, source: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {where} must be a table")
    return value


def _check_keys(
    table: dict[str, Any], allowed: set[str], source: str, prefix: str,
    missing: Collection[str] = (),
) -> None:
    """Unknown keys are errors that name the closest allowed one, a missing required key first
    (`modle` means `model`, not `mode`, when the table has no model)."""
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(missing), n=1) or (
                difflib.get_close_matches(key, sorted(allowed), n=1)
            )
            hint = f"did you mean {prefix}{close[0]}? " if close else ""
            raise ConfigError(
                f"{source}: unknown key {prefix}{key} ({hint}allowed: {', '.join(sorted(allowed))})"
            )


def _agent(source: str, where: str, raw: dict[str, Any]) -> AgentSpec:
    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"{source}: {where}.{key} {why}")

    for key in _REQUIRED_KEYS:
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise bad(key, "is required and must be a non-empty string")
    name = raw["name"]
    where = f"agents[{name}]"
    if raw["provider"] not in KINDS:
        raise bad("provider", f"is {raw['provider']!r}; known providers: {', '.join(KINDS)}")
    kind = KINDS[raw["provider"]]
    for key in ("base_url", "api_key_env"):
        if key in raw and not isinstance(raw[key], str):
            raise bad(key, "must be a string")
    for key in ("price_in", "price_out", "temperature", "timeout_s", "deadline_s"):
        if key in raw:
            value = raw[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
            ):
                raise bad(key, "must be a number")
            positive = key in ("timeout_s", "deadline_s")
            if value < 0 or (positive and value == 0):
                raise bad(key, f"must be {'positive' if positive else 'zero or more'}, not {value}")
            raw[key] = float(value)
    for key in ("max_tokens", "n_ctx", "max_concurrency"):
        if key in raw and (
            isinstance(raw[key], bool) or not isinstance(raw[key], int) or raw[key] < 1
        ):
            raise bad(key, "must be a positive integer")
    if "retries" in raw and (
        isinstance(raw["retries"], bool)
        or not isinstance(raw["retries"], int)
        or raw["retries"] < 0
    ):
        raise bad("retries", "must be an integer, zero or more")
    for key in raw:
        owners = [other.name for other in KINDS.values() if key in other.keys]
        if owners and key not in kind.keys:
            raise bad(key, f'applies to provider "{owners[0]}" only')
    if "mode" in raw and raw["mode"] not in MODES:
        raise bad("mode", f'is {raw["mode"]!r}; use "chat" or "completion"')
    if "token_param" in raw and raw["token_param"] not in TOKEN_PARAMS:
        raise bad(
            "token_param", f'is {raw["token_param"]!r}; use "max_completion_tokens" or "max_tokens"'
        )
    if "roles" in raw:
        roles = raw["roles"]
        if (
            not isinstance(roles, list)
            or not roles
            or not all(r in ROLES for r in roles)
            or len(set(roles)) < len(roles)
        ):
            raise bad(
                "roles", f"must be a non-empty list of distinct roles among {', '.join(ROLES)}"
            )
        raw["roles"] = tuple(r for r in ROLES if r in roles)
    if "stop" in raw:
        stop = raw["stop"]
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
            raise bad("stop", "must be a string or a list of non-empty strings")
        raw["stop"] = tuple(stop)
    if raw["provider"] == "replay":
        _replay(source, raw, bad)
    raw.setdefault("roles", kind.roles)
    if "skills" in raw:
        skills = raw["skills"]
        if not isinstance(skills, dict) or not all(_probability(v) for v in skills.values()):
            raise bad("skills", "must be a table of tag = probability (0 to 1)")
        raw["skills"] = {str(k): float(v) for k, v in skills.items()}
    for key in ("default_skill", "thinker_boost", "verifier_accuracy"):
        if key in raw:
            if not _probability(raw[key]):
                raise bad(key, "must be a number from 0 to 1")
            raw[key] = float(raw[key])
    if "seed" in raw and (isinstance(raw["seed"], bool) or not isinstance(raw["seed"], int)):
        raise bad("seed", "must be an integer")
    if raw["provider"] == "local" and "mode" not in raw:
        raw["mode"] = "completion" if raw["model"] == EMBEDDED else "chat"
    if raw["provider"] == "openai" and "token_param" not in raw:
        raw["token_param"] = default_token_param(raw.get("base_url"))
    return AgentSpec(**raw)


def _replay(source: str, raw: dict[str, Any], bad: Callable[[str, str], ConfigError]) -> None:
    """A replay agent: its record found (beside the pool file, as written, or a bundled name)
    and its roles kept to those a recorded model can play."""
    from trinity_cli.pool.bundled import record_path

    if not isinstance(raw.get("record"), str) or not raw["record"].strip():
        raise bad(
            "record",
            "is required for provider \"replay\": a record file's path or a bundled record's name",
        )
    try:
        raw["record"] = str(record_path(_beside(source, raw["record"])))
    except ConfigError as exc:
        raise bad("record", f"cannot be found: {exc.message}") from None
    if "thinker" in raw.get("roles", ()):
        raise bad(
            "roles",
            "includes thinker, but a replay agent only replays recorded programs: "
            f"use a subset of {list(REPLAY_ROLES)}",
        )


def default_token_param(base_url: str | None) -> str:
    """OpenAI's own endpoint wants `max_completion_tokens` (its reasoning models refuse
    `max_tokens`); llama.cpp server, Ollama and vLLM have long known only `max_tokens`."""
    return "max_tokens" if base_url else "max_completion_tokens"


def _probability(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0.0 <= value <= 1.0


def _coordinator(source: str, raw: dict[str, Any]) -> CoordinatorSpec:
    changes: dict[str, Any] = {}
    if "model" in raw:
        if not isinstance(raw["model"], str) or not raw["model"]:
            raise ConfigError(f'{source}: coordinator.model must be a GGUF path or "embedded"')
        changes["model"] = raw["model"]
    if "weights" in raw:
        if not isinstance(raw["weights"], str) or not raw["weights"].strip():
            raise ConfigError(
                f'{source}: coordinator.weights must be a head\'s path or name, or "none"'
            )
        changes["weights"] = _beside(source, raw["weights"])
    for key in ("n_ctx", "n_threads", "token_position"):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{source}: coordinator.{key} must be an integer")
            if key != "token_position" and value < 1:
                raise ConfigError(f"{source}: coordinator.{key} must be positive")
            if key == "token_position" and value >= 0:
                raise ConfigError(
                    f"{source}: coordinator.token_position counts from the cue's end: "
                    "use -1, -2, ..."
                )
            changes[key] = value
    return CoordinatorSpec(**changes)


def _beside(source: str, value: str) -> str:
    """A path in the pool file means a path next to it, when one is there; else it stays as
    written (a path from the working directory, a head's name, or "none")."""
    nearby = Path(source).parent / Path(value).expanduser()
    return str(nearby) if source != BUILTIN_POOL and nearby.exists() else value
