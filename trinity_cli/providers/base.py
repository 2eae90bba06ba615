"""Helpers the providers share: offline token estimates, loopback detection, timing.

The interface itself (`Provider`, `Request`, `Reply`, `Prices`) lives in
`trinity_cli.core.provider`. Providers import their SDKs lazily, so a missing key or package
breaks only that provider.
"""

from __future__ import annotations

import ipaddress
import time
from urllib.parse import urlparse


def estimate_tokens(text: str) -> int:
    """A rough token count for servers that report no usage (about 4 bytes a token)."""
    return max(1, len(text.encode("utf-8")) // 4) if text else 0


def is_loopback(url: str | None) -> bool:
    if not url:
        return False
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start
