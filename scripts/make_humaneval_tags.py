"""Write trinity_cli/tasks/humaneval_tags.json: a crude topic tag per HumanEval task.

    python scripts/make_humaneval_tags.py

The tag is read off the task's own signature and docstring (no model): "string" when the
function takes or returns text, else "list" when it takes or returns a sequence, else "math".
It exists so that the simulated pool can make agents specialise by task type.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from trinity_cli.tasks.taskset import load_humaneval

OUT = Path(__file__).resolve().parent.parent / "trinity_cli" / "tasks" / "humaneval_tags.json"


def tag_of(prompt: str, entry_point: str) -> str:
    signature = re.search(
        rf"def {re.escape(entry_point)}\((.*?)\)\s*(->\s*([^:]+))?:", prompt, re.DOTALL
    )
    types = signature.group(0) if signature else ""
    text = prompt.lower()
    if "str" in types or "string" in text[:400]:
        return "string"
    if "list" in types.lower() or "array" in text or "list" in text:
        return "list"
    return "math"


def main() -> None:
    tags = {t.task_id: [tag_of(t.prompt, t.entry_point)] for t in load_humaneval()}
    OUT.write_text(json.dumps(tags, indent=1, sort_keys=True) + "\n")
    counts: dict[str, int] = {}
    for (tag,) in tags.values():
        counts[tag] = counts.get(tag, 0) + 1
    print(f"wrote {OUT}: {counts}")


if __name__ == "__main__":
    main()
