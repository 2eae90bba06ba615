"""The one console for humans: stderr. stdout carries only the answer (or JSON).

NO_COLOR (no-color.org, any non-empty value) wins over FORCE_COLOR: under NO_COLOR Rich alone
drops only the colours (bold and dim stay), and FORCE_COLOR would still style a pipe.
"""

import os

from rich.console import Console


def _console() -> Console:
    if not os.environ.get("NO_COLOR"):
        return Console(stderr=True, highlight=False, soft_wrap=True)
    environ = {key: value for key, value in os.environ.items() if key != "FORCE_COLOR"}
    return Console(stderr=True, highlight=False, soft_wrap=True, color_system=None, _environ=environ)


stderr = _console()
