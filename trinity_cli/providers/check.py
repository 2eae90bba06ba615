"""Is an agent usable now? Checked without importing any SDK or loading any model:
the key's environment variable, a TCP connect to the server, the model file on disk, the
record file of a replay agent (it loads and holds the agent's model)."""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlparse

from trinity_cli.llama.gguf import model_problem
from trinity_cli.pool.providers import kind_of
from trinity_cli.pool.spec import EMBEDDED, AgentSpec


@dataclass(frozen=True)
class AgentCheck:
    name: str
    provider: str
    model: str
    usable: bool
    detail: str

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def check_agent(spec: AgentSpec) -> AgentCheck:
    usable, detail = _check(spec)
    return AgentCheck(spec.name, spec.provider, spec.model, usable, detail)


def _check(spec: AgentSpec) -> tuple[bool, str]:
    kind = kind_of(spec.provider)
    if kind.network:
        return _check_remote(spec)
    if spec.provider == "sim":
        return True, "SIMULATED agent (no model): for offline training experiments"
    if spec.provider == "replay":
        return _check_record(spec)
    if spec.provider == "local":
        problem = model_problem(spec.model)
        if problem is not None:
            return False, problem
        if spec.model == EMBEDDED:
            return True, "embedded model package installed"
        return True, f"model file present: {Path(spec.model).expanduser()}"
    return True, "runs here: no network, no key"


def _check_remote(spec: AgentSpec) -> tuple[bool, str]:
    """A key in the environment (none needed on loopback) and the server reachable."""
    from trinity_cli.providers.base import is_loopback
    from trinity_cli.providers.keys import key_envs

    envs = key_envs(spec)
    has_key = any(os.environ.get(e) for e in envs)
    if not has_key and not is_loopback(spec.base_url):
        return False, f"no API key: set {' or '.join(envs)}"
    key_note = "key present" if has_key else "loopback, no key needed"
    if not spec.base_url:
        return True, f"{key_note}; default endpoint (not probed)"
    reachable, why = _reachable(spec.base_url)
    return reachable, f"{key_note}; server {spec.base_url} {why}"


def _check_record(spec: AgentSpec) -> tuple[bool, str]:
    """A replay agent is usable when its record loads and holds its model."""
    from trinity_cli.errors import ConfigError
    from trinity_cli.providers.record_file import load_record

    try:
        record = load_record(Path(spec.record or ""))
    except ConfigError as exc:
        return False, exc.message
    if spec.model not in record.models:
        return (
            False,
            (
                f"record {record.path.name} has no model {spec.model!r} "
                f"(it has: {', '.join(record.models)})"
            ),
        )
    return (
        True,
        (
            f"recorded answers of {len(record.task_ids(spec.model))} tasks "
            f"({record.path.name}): no model is called"
        ),
    )


def _reachable(url: str, timeout: float = 2.0) -> tuple[bool, str]:
    parsed = urlparse(url)
    host = parsed.hostname
    if not host:
        return False, "is not a valid URL"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, "reachable"
    except OSError as exc:
        return False, f"unreachable ({exc.strerror or exc})"
