"""Parsers of what agents write: verdicts, next-role tags, code blocks (incl. property tests)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trinity_cli.core.roles import Role, extract_code, parse_next_role, parse_verdict


def test_verdict_tags_last_one_wins_and_case_is_ignored():
    assert parse_verdict("<verdict>ACCEPT</verdict>") == "accept"
    assert (
        parse_verdict("format: <verdict>ACCEPT</verdict> ... <verdict> reject </verdict>")
        == "reject"
    )
    assert parse_verdict("Verdict: **ACCEPT**") == "accept"
    assert parse_verdict("I think it is fine") == "malformed"
    assert parse_verdict("") == "malformed"


def test_next_role_needs_exactly_one_kind():
    assert parse_next_role("do it <next_role>worker</next_role>") is Role.WORKER
    assert parse_next_role("<next_role>Verifier</next_role>") is Role.VERIFIER
    assert parse_next_role("<next_role>worker</next_role><next_role>thinker</next_role>") is None
    assert parse_next_role("<next_role>boss</next_role>") is None


def test_code_extraction_prefers_the_last_python_block():
    text = (
        "first\n```python\nx = 1\n```\nthen\n```bash\nls\n```\n```py\ndef f():\n    return 2\n```"
    )
    assert extract_code(text) == "def f():\n    return 2\n"
    assert extract_code("```\ndef g(): pass\n```") == "def g(): pass\n"
    assert extract_code("def h(x):\n    return x\n") == "def h(x):\n    return x\n"
    # an answer, that will not parse
    assert (
        extract_code("Just use a loop.") == "Just use a loop.\n"
    )
    # no Python block: the reply
    assert (
        extract_code("```js\nlet x = 1;\n```") == "```js\nlet x = 1;\n```\n"
    )
    assert extract_code(" \n") is None
    assert (
        extract_code("```python\ndef unterminated():\n    return 1")
        == "def unterminated():\n    return 1\n"
    )


@given(st.text())
def test_verdict_parser_never_crashes(text):
    assert parse_verdict(text) in {"accept", "reject", "malformed"}


@given(st.text())
def test_code_extractor_never_crashes_and_returns_text_or_none(text):
    code = extract_code(text)
    assert code is None or (isinstance(code, str) and code.endswith("\n"))


@given(st.text(alphabet=st.characters(blacklist_characters="`"), max_size=200))
def test_a_fenced_block_round_trips(body):
    body = body.strip("\n")
    if body.strip():
        assert extract_code(f"```python\n{body}\n```") == body + "\n"
