"""How many tokens the built-in offline pool's Worker needs: the measurement behind its max_tokens.

    taskset -c 1 python scripts/measure_answer_lengths.py [--tasks 40] [--max-tokens 1024]

Each agent of the built-in pool answers the first N tasks of HumanEval's train split as a
Worker on a first turn (the problem alone, the request `solve` sends), through the product's
own provider with a large `max_tokens`. An answer counts when it ended on its own (a stop
string, the model's end, or its first unindented line: `Reply.truncated` false); its length is
the tokens generated until it ended: the reply's count when a stop string or the model's end
ended generation, else the answer re-tokenized up to the first character of that unindented
line (generation is prefix-stable: a smaller max_tokens gives the same first tokens). Prints
the counts and the 95th percentile, the pool's max_tokens.
"""

from __future__ import annotations

import argparse
import math
import re
import time
from dataclasses import replace

from trinity_cli.core.episode import new_state, request_for
from trinity_cli.core.records import Decision
from trinity_cli.core.roles import Role
from trinity_cli.llama.capi import Model, load_model
from trinity_cli.llama.gguf import resolve_model
from trinity_cli.pool.spec import EMBEDDED, load_pool
from trinity_cli.providers.local_gguf import LocalProvider
from trinity_cli.tasks.taskset import load_humaneval, select_split

TOP_LEVEL = re.compile(r"\n(?=\S)")


def percentile(values: list[int], q: float) -> int:
    """The nearest-rank percentile: the smallest value with at least q of the values at or
    below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def answer_tokens(model: Model, raw: str, tokens_out: int) -> int:
    """Tokens generated until the answer ended (see the module docstring)."""
    parts = TOP_LEVEL.split(raw, maxsplit=1)
    if len(parts) == 1:  # a stop string or the model's end ended generation
        return tokens_out
    # through the newline and the unindented line's first character
    ended = raw[
        : len(parts[0]) + 2
    ]
    return len(model.tokenize(ended, bos=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=1024)
    args = parser.parse_args()
    pool = load_pool(None)  # the built-in offline default
    tasks = select_split(load_humaneval(), "train")[: args.tasks]
    lengths: list[int] = []
    cut = 0
    model = load_model(resolve_model(EMBEDDED))
    started = time.perf_counter()
    for index, spec in enumerate(pool.agents):
        provider = LocalProvider(replace(spec, max_tokens=args.max_tokens))
        for task in tasks:
            state = new_state(task.problem, pool.names)
            decision = Decision(1, index, spec.name, Role.WORKER, "head", (), (), 0.0, 0)
            request = request_for(state, decision)
            assert request is not None
            pieces: list[str] = []
            reply = provider.complete(request, on_text=pieces.append)
            if reply.truncated:
                cut += 1
                continue
            lengths.append(answer_tokens(model, "".join(pieces), reply.tokens_out))
        print(
            f"{spec.name}: {len(tasks)} tasks done, {time.perf_counter() - started:.0f}s",
            flush=True,
        )
    print(
        f"answers: {len(lengths) + cut} "
        f"({len(pool.agents)} agents x {len(tasks)} HumanEval train tasks, "
        f"max_tokens {args.max_tokens}); complete: {len(lengths)}; cut at max_tokens: {cut}"
    )
    if lengths:
        print(
            f"tokens of complete answers: median {percentile(lengths, 0.5)}, "
            f"p90 {percentile(lengths, 0.9)}, p95 {percentile(lengths, 0.95)}, max {max(lengths)}"
        )


if __name__ == "__main__":
    main()
