"""The one console for humans: stderr. stdout carries only the answer (or JSON)."""

from rich.console import Console

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
