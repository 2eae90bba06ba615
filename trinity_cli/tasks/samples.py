"""The samples of a stdin/stdout problem, read from its text, and the judge's comparison.

Competitive-programming statements (AtCoder, Codeforces, LiveCodeBench) show their tests as
labelled blocks: "Sample Input 1" / "Sample Output 1" anywhere (Markdown heading or plain line,
numbered or not, bold or not, with or without a colon), or a bare "Input" / "Output" inside an
"Example(s)" / "Sample(s)" section; a bare "Input" elsewhere is the input *format* section.
The text under a label is the fenced block that follows it (``` or ~~~, blank lines kept), an
indented block, or else the plain paragraph up to the next blank line or label. Each input
pairs with the output right after it.

Outputs compare as judges do: line endings, trailing whitespace and trailing blank lines do not
count, and each line's tokens must be equal; when the problem states an error bound
("absolute or relative error at most 10^{-6}", "1e-6"), numbers within it are equal.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    input: str  # what the program reads on stdin
    output: str  # what it must print


_DECOR = r"\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*"  # a Markdown heading mark, bold
_NUMBER = r"\s*(?:#?\s*\d+|\(\d+\))?\s*:?\s*(?:\*\*|__)?\s*:?\s*"  # "1", "#1", "(1)", then ":"
_LABEL = re.compile(
    _DECOR + r"(?P<prefix>(?:sample|example)\s*)?(?P<kind>input|output)" + _NUMBER, re.IGNORECASE
)
_SECTION = re.compile(
    _DECOR + r"(?:sample|example)s?(?:\s+(?:test\s*)?(?:cases?|tests?))?" + _NUMBER, re.IGNORECASE
)
_FENCE = re.compile(r"(?P<indent> *)(?P<mark>`{3,}|~{3,})")
_HEADING = re.compile(r"\s*#{1,6}\s+\S")  # a Markdown heading; a grid row ("#.##") is none
_FLOAT_TOKEN = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

# An error bound: "10^{-6}", "10^-6", "10<sup>-6</sup>", "2 \times 10^{-6}", "1e-6", "1.0E-9".
_MINUS = "[-−–]"
_BOUND = re.compile(
    r"(?:(?P<mantissa>\d+(?:\.\d+)?)\s*(?:[x×*·]|\\times|\\cdot)\s*)?"
    rf"10\s*(?:\^|<sup>)\s*\{{?\s*{_MINUS}\s*(?P<exp>\d+)"
    rf"|(?P<e_mantissa>\d+(?:\.\d+)?)[eE]\s*{_MINUS}\s*(?P<e_exp>\d+)"
)
_BOUND_CONTEXT = re.compile(r"error|tolerance|precision|differ", re.IGNORECASE)
BOUND_LOOKBEHIND = 200  # characters before a bound that must say it bounds an error


def find_samples(text: str) -> tuple[Sample, ...]:
    """The problem's (input, expected output) samples, in order; () when it shows none."""
    lines = normalize_newlines(text).split("\n")
    blocks: list[tuple[str, str]] = []  # (kind, text)
    in_examples, i = False, 0
    while i < len(lines):
        kind = _label(lines[i], in_examples)
        if kind is not None:
            body, i = _block(lines, i + 1, in_examples)
            blocks.append((kind, body))
            continue
        if _SECTION.fullmatch(lines[i]):
            in_examples = True
        elif _HEADING.match(lines[i]):
            in_examples = False
        elif _FENCE.match(lines[i]):
            i = _fenced(lines, i)[1] - 1  # a code block's lines are never labels
        i += 1
    samples = []
    for (kind, body), (next_kind, next_body) in itertools.pairwise(blocks):
        if kind == "input" and next_kind == "output" and next_body.strip():
            samples.append(Sample(body + "\n" if body else "", next_body + "\n"))
    return tuple(samples)


def _label(line: str, in_examples: bool) -> str | None:
    """The kind ("input", "output") of the sample block `line` labels, if it labels one; a bare
    "Input" counts only in an examples section."""
    match = _LABEL.fullmatch(line)
    if match is None or not (match.group("prefix") or in_examples):
        return None
    return match.group("kind").lower()


def _block(lines: list[str], start: int, in_examples: bool) -> tuple[str, int]:
    """The text under a label (fenced, indented or a paragraph) and the line after it."""
    i = start
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or _label(lines[i], in_examples) is not None:
        return "", i
    if _FENCE.match(lines[i]):
        return _fenced(lines, i)
    if lines[i].startswith(("    ", "\t")):
        end = i
        while end < len(lines) and (
            not lines[end].strip() or lines[end].startswith(("    ", "\t"))
        ):
            end += 1
        return textwrap.dedent("\n".join(lines[i:end])).strip("\n"), end
    end = i
    while (
        end < len(lines)
        and lines[end].strip()
        and _label(lines[end], in_examples) is None
        and not _HEADING.match(lines[end])
    ):
        end += 1
    return "\n".join(line.rstrip() for line in lines[i:end]), end


def _fenced(lines: list[str], start: int) -> tuple[str, int]:
    """The body of the fenced block opening on `start` (its fence's indent removed) and the
    line after its closing fence (or the end of the text)."""
    opening = _FENCE.match(lines[start])
    assert opening is not None
    indent, mark = len(opening.group("indent")), opening.group("mark")
    closing = re.compile(rf" *{re.escape(mark[0])}{{{len(mark)},}}\s*")
    end = start + 1
    while end < len(lines) and not closing.fullmatch(lines[end]):
        end += 1
    body = [
        line[min(indent, len(line) - len(line.lstrip(" "))) :] for line in lines[start + 1 : end]
    ]
    return "\n".join(body), end + 1


def stated_tolerance(text: str) -> float | None:
    """The error bound the problem states for real-number outputs, if any: the first negative
    power of ten written shortly after "error", "tolerance", "precision" or "differ"."""
    for match in _BOUND.finditer(text):
        if not _BOUND_CONTEXT.search(
            text[max(0, match.start() - BOUND_LOOKBEHIND) : match.start()]
        ):
            continue
        if match.group("exp") is not None:
            return float(match.group("mantissa") or 1) * 10.0 ** -int(match.group("exp"))
        return float(match.group("e_mantissa")) * 10.0 ** -int(match.group("e_exp"))
    return None


def normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def output_difference(actual: str, expected: str, tolerance: float | None = None) -> str | None:
    """Where `actual` first differs from `expected` as a judge reads them, or None when equal:
    whitespace at line ends and blank lines at the end do not count, tokens must be equal
    (numbers within `tolerance`, absolute or relative, when one is given)."""
    got, want = _lines(actual), _lines(expected)
    for number, (line, wanted) in enumerate(itertools.zip_longest(got, want), start=1):
        if wanted is None:
            return f"line {number}: expected nothing more, got {_clip(line)}"
        if line is None:
            return f"line {number}: expected {_clip(wanted)}, got nothing"
        tokens, wanted_tokens = line.split(), wanted.split()
        if len(tokens) != len(wanted_tokens) or not all(
            _tokens_equal(token, other, tolerance) for token, other in zip(tokens, wanted_tokens)
        ):
            return f"line {number}: expected {_clip(wanted)}, got {_clip(line)}"
    return None


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in normalize_newlines(text).split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _tokens_equal(token: str, expected: str, tolerance: float | None) -> bool:
    if token == expected:
        return True
    if tolerance is None or not (
        _FLOAT_TOKEN.fullmatch(token) and _FLOAT_TOKEN.fullmatch(expected)
    ):
        return False
    error, scale = abs(float(token) - float(expected)), max(1.0, abs(float(expected)))
    return error <= tolerance * scale * (1 + 1e-9)  # the slack absorbs the bound's own rounding


def _clip(line: str, chars: int = 80) -> str:
    return repr(line if len(line) <= chars else line[:chars] + "...")
