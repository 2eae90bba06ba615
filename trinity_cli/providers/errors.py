"""Turn any SDK's exception into one ProviderError with a kind and a one-line message."""

from __future__ import annotations

import email.utils
from datetime import datetime, timezone

from trinity_cli.errors import ProviderError, redact
from trinity_cli.pool.spec import AgentSpec

MESSAGE_CHARS = 400


def _interrupted(exc: BaseException | None) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _status(exc: BaseException) -> int | None:
    for attr in ("status_code", "code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _retry_after(exc: BaseException) -> float | None:
    """The Retry-After header of the error's HTTP response: seconds, or an HTTP date."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def classify(exc: BaseException, spec: AgentSpec) -> ProviderError:
    """auth | rate_limit | bad_request | server | network, from the HTTP status or the type.

    A Ctrl-C that an SDK's cleanup masked (closing a half-read stream raises its own error, with
    the KeyboardInterrupt as its context) is raised again as what it was: an interruption, not
    a provider error."""
    if _interrupted(exc):
        raise KeyboardInterrupt from exc
    if isinstance(exc, ProviderError):
        return exc
    status = _status(exc)
    name = type(exc).__name__.lower()
    if status in (401, 403):
        kind = "auth"
    elif status == 429:
        kind = "rate_limit"
    elif status is not None and 400 <= status < 500:
        kind = "bad_request"
    elif status is not None and status >= 500:
        kind = "server"
    elif "timeout" in name or "connect" in name or "connection" in name or isinstance(exc, OSError):
        kind = "network"
    else:
        kind = "server"
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return agent_error(
        spec, f"{kind.replace('_', ' ')} error: {detail}", kind, status, _retry_after(exc)
    )


def agent_error(
    spec: AgentSpec, what: str, kind: str, status: int | None, retry_after: float | None = None
) -> ProviderError:
    """`agent 'name' (provider at base_url): what`, redacted and cut to one short line."""
    where = f" at {spec.base_url}" if spec.base_url else ""
    message = f"agent {spec.name!r} ({spec.provider}{where}): {what}"
    # redact before cutting: a key that crossed the cut would leave its prefix behind
    return ProviderError(
        redact(message)[:MESSAGE_CHARS], agent=spec.name, kind=kind, retry_after=retry_after,
        status=status,
    )
