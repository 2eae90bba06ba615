"""The three roles, their prompts, and the parsers for what agents write back.

Thinker plans and may name the next role with ``<next_role>worker</next_role>``; Worker writes
code in a fenced block; Verifier ends with ``<verdict>ACCEPT</verdict>`` or
``<verdict>REJECT</verdict>``. Anything the parsers cannot read is treated conservatively: a
malformed verdict is a rejection, an unreadable tag is ignored.
"""

from __future__ import annotations

import ast
import enum
import re


class Role(str, enum.Enum):
    THINKER = "thinker"
    WORKER = "worker"
    VERIFIER = "verifier"


# The head's last 3 logits are in this order; it is recorded in every head's metadata.
ROLE_ORDER: tuple[Role, ...] = (Role.THINKER, Role.WORKER, Role.VERIFIER)

SYSTEM_PROMPTS: dict[Role, str] = {
    Role.THINKER: (
        "You are the Thinker in a team that solves a coding task. Do not write the full "
        "solution. Give a short strategy: the key idea, edge cases, and a critique of any "
        "earlier attempt. If you know which role should act next, end with "
        "<next_role>worker</next_role>, <next_role>thinker</next_role> or "
        "<next_role>verifier</next_role>."
    ),
    Role.WORKER: (
        "You are the Worker in a team that solves a coding task. Write the complete solution "
        "as one Python code block (```python ... ```) that defines everything the task asks "
        "for. Use the plan and fix the problems earlier turns found. No explanation is needed."
    ),
    Role.VERIFIER: (
        "You are the Verifier in a team that solves a coding task. Check the latest solution "
        "for correctness and completeness against the task. Explain briefly, then end with "
        "exactly <verdict>ACCEPT</verdict> or <verdict>REJECT</verdict>."
    ),
}

# Added to the Worker's prompt when the answer is judged as a program on stdin/stdout samples:
# a Worker told to define "everything the task asks for" would otherwise write a function.
STDIN_PROGRAM_NOTE = (
    " This task is a program: write a complete script that reads the input from stdin and "
    "prints the answer to stdout, not just a function."
)


def system_prompt(role: Role, stdin_program: bool = False) -> str:
    """The role's system prompt; a Worker on a stdin/stdout problem is told to write a program."""
    return SYSTEM_PROMPTS[role] + (
        STDIN_PROGRAM_NOTE if stdin_program and role is Role.WORKER else ""
    )


# What a completion-mode (base) model is asked to continue after the transcript.
COMPLETION_LEADS: dict[Role, str] = {
    Role.THINKER: "Plan:\n", Role.WORKER: "```python\n", Role.VERIFIER: "Verdict:",
}

_VERDICT_TAG = re.compile(r"<verdict>\s*(accept|reject)\s*</verdict>", re.IGNORECASE)
_VERDICT_LINE = re.compile(
    r"^\s*verdict\s*:\s*\**\s*(accept|reject)\b", re.IGNORECASE | re.MULTILINE
)
_NEXT_ROLE = re.compile(r"<next_role>\s*(thinker|worker|verifier)\s*</next_role>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def parse_verdict(text: str) -> str:
    """'accept', 'reject', or 'malformed' (which the loop counts as a rejection).

    The last tag wins, so a Verifier that quotes the format before deciding is read right.
    """
    tags = _VERDICT_TAG.findall(text) or _VERDICT_LINE.findall(text)
    if not tags:
        return "malformed"
    return tags[-1].lower()


def parse_next_role(text: str) -> Role | None:
    """The role a Thinker named for the next turn, if it named exactly one kind."""
    names = {m.lower() for m in _NEXT_ROLE.findall(text)}
    return Role(names.pop()) if len(names) == 1 else None


def extract_code(text: str) -> str | None:
    """The answer in a Worker reply: the last Python (or unlabelled) fenced block, or else the
    whole reply. It is not parsed here: an answer that does not parse fails `syntax_error`, so
    a Worker's prose or broken code is an answer that can never be accepted, not no answer.
    An empty reply gives None.
    """
    blocks = [
        body
        for lang, body in _FENCE.findall(text)
        if lang.lower() in ("", "python", "py", "python3")
    ]
    blocks = [b.strip("\n") for b in blocks if b.strip()]
    if blocks:
        return blocks[-1] + "\n"
    stripped = text.strip()
    return stripped + "\n" if stripped else None


def syntax_error(code: str) -> str | None:
    """Why `code` is not Python (`ast.parse`, nothing executed), or None when it parses."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except ValueError as exc:  # null bytes
        return f"SyntaxError: {exc}"
    return None
