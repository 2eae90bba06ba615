"""trinity: an evolved LLM coordinator for coding tasks (after Sakana AI's TRINITY, arXiv
2512.04695)."""

__version__ = "0.1.0"
