"""Property-based tests (hypothesis) of what reads agents' replies: the verdict parser and the
code extractor never raise, and find what is there whatever text surrounds it."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from trinity_cli.core.roles import extract_code, parse_next_role, parse_verdict

# prose that cannot itself contain a verdict tag, a verdict line or a code fence
prose = st.text(
    st.characters(blacklist_characters="<`", blacklist_categories=("Cs",)), max_size=300
).filter(lambda t: "verdict" not in t.lower())
identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True).filter(
    lambda name: (
        name not in {"if", "in", "is", "or", "and", "def", "for", "not", "as", "del", "try", "else"}
    )
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=500))
def test_any_text_gets_one_of_three_verdicts_and_code_or_none(text):
    assert parse_verdict(text) in ("accept", "reject", "malformed")
    code = extract_code(text)
    assert code is None or code.endswith("\n")
    assert parse_next_role(text) is None or parse_next_role(text).value in (
        "thinker", "worker", "verifier",
    )


@settings(max_examples=200, deadline=None)
@given(
    prose, prose,
    st.lists(st.sampled_from(["ACCEPT", "REJECT", "accept", "Reject"]), min_size=1, max_size=4),
    st.sampled_from(["", " ", "\n"]),
)
def test_the_last_verdict_tag_wins(before, after, verdicts, pad):
    text = before + "".join(f"<verdict>{pad}{v}{pad}</verdict> {before}" for v in verdicts) + after
    assert parse_verdict(text) == verdicts[-1].lower()


@settings(max_examples=200, deadline=None)
@given(prose)
def test_prose_without_a_tag_is_malformed(text):
    assert parse_verdict(text) == "malformed"


@settings(max_examples=200, deadline=None)
@given(
    prose, prose, identifiers, st.integers(-(10**6), 10**6), st.sampled_from(["python", "py", ""])
)
def test_the_fenced_block_is_extracted_exactly(before, after, name, value, lang):
    body = f"def {name}(x):\n    return x + {value}\n"
    code = extract_code(f"{before}\n```{lang}\n{body}```\n{after}")
    assert code == body
    ast.parse(code)


@settings(max_examples=100, deadline=None)
@given(identifiers, identifiers)
def test_the_last_of_several_blocks_wins_and_an_unclosed_fence_still_counts(first, second):
    text = (
        f"```python\ndef {first}():\n    pass\n```\n"
        f"then\n```python\ndef {second}():\n    return 1\n"
    )
    assert extract_code(text) == f"def {second}():\n    return 1\n"
