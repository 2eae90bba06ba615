"""An in-process GGUF model through llama.cpp's C API (via llama-cpp-python's bindings).

`mode = "completion"` is for base models (the embedded Gemma-3-270M has no chat template and
writes garbage in chat form): the role prompt and transcript become plain text, followed by the
role's lead ("Plan:", a code fence plus the task's signature, "Verdict:"). A completion-mode
Worker's reply is the signature plus its completion, returned as one fenced block. A base model
rarely writes a clean verdict, so a completion-mode Verifier compares the log-probabilities of
the continuations " ACCEPT" and " REJECT" and reports the likelier one.

`mode = "chat"` is for instruction-tuned GGUFs and renders the model's own chat template
(`tokenizer.chat_template`, with llama-cpp-python's Jinja2 formatter); a GGUF without one is a
configuration error.

The weights are the process's one load of the file (`trinity_cli/llama/capi.py`), shared with the
coordinator when it runs on the same GGUF. Agents on the same file and context size share one
llama.cpp context, one call at a time (a lock: concurrent episodes in train and eval take
turns). Each call evaluates its prompt from scratch, so a call's reply depends only on the call
(sampling is seeded by the prompt): the same call gives the same reply.

A prompt longer than the context less `max_tokens` keeps its first token and its end (the
role's lead and, for a Worker, the signature it continues), and the reply reports the cut
(`Reply.input_truncated`); when even the end does not fit, the call is a usage error (exit 2).
A reply is `truncated` when generation stopped at `max_tokens` before a stop string or the
model's end (a completion-mode Worker's answer also ends at its first unindented line).

Sampling is llama-cpp-python's default chain: greedy at temperature 0, else top-k 40,
top-p 0.95, min-p 0.05, then the temperature.
"""

from __future__ import annotations

import codecs
import hashlib
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli.core.provider import Prices, Reply, Request, RetryHook, TextCallback
from trinity_cli.core.records import Truncation
from trinity_cli.core.roles import Role
from trinity_cli.errors import ConfigError, UsageError
from trinity_cli.llama.capi import Model, decode, default_threads, load_model, spans
from trinity_cli.llama.gguf import resolve_model
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.base import Stopwatch

# HumanEval's stop sequences: a completed function ends where top-level code starts.
WORKER_STOPS = ("\n```", "\nclass", "\ndef", "\n#", "\nif", "\nprint")
PROSE_STOPS = ("\n## ", "\n\n\n", "```")
# The completion of a function body ends at the first unindented line (HumanEval practice).
_TOP_LEVEL = re.compile(r"\n(?=\S)")
VERDICT_WORDS = {"accept": " ACCEPT", "reject": " REJECT"}
N_BATCH = 512
DEFAULT_N_CTX = 4096  # an agent's context when the pool gives no n_ctx
MIN_PROMPT_TOKENS = 16  # a clipped prompt keeps at least this much, and at least its lead


class _Runtime:
    """One llama.cpp context on a loaded model: a KV cache that calls use one at a time."""

    def __init__(self, model: Model, n_ctx: int) -> None:
        import llama_cpp as ll

        self._ll = ll
        self.model = model
        self.ctx = model.new_context(
            model.context_params(n_ctx=n_ctx, n_batch=N_BATCH, n_threads=default_threads())
        )
        self.n_ctx = int(ll.llama_n_ctx(self.ctx))
        self._memory = ll.llama_get_memory(self.ctx)
        self._batch = ll.llama_batch_init(N_BATCH, 0, 1)
        self.lock = threading.Lock()

    def evaluate(self, tokens: Sequence[int], position: int) -> None:
        """Evaluate `tokens` from `position` on (dropping the cache there), logits for the last."""
        self._ll.llama_memory_seq_rm(self._memory, 0, position, -1)
        for start, stop in spans(0, len(tokens), N_BATCH):
            decode(
                self.ctx, self._batch, tokens[start:stop], position + start, len(tokens) - 1 - start
            )

    def logprobs(self) -> Any:
        """Log-softmax of the logits of the last evaluated token."""
        import numpy as np

        pointer = self._ll.llama_get_logits_ith(self.ctx, -1)
        logits = np.ctypeslib.as_array(pointer, shape=(self.model.n_vocab,)).astype(np.float64)
        peak = logits.max()
        return logits - peak - np.log(np.exp(logits - peak).sum())

    def generate(
        self, prompt: list[int], *, max_tokens: int, temperature: float, stops: Sequence[str],
        on_text: TextCallback | None,
    ) -> tuple[str, int, bool]:
        """Sample up to `max_tokens` after `prompt`; the text ends before the first stop string.
        Returns the text, the number of tokens generated, and whether the limit (not a stop
        string or the model's end) ended it."""
        ll = self._ll
        self.evaluate(prompt, 0)
        sampler = _sampler(ll, temperature, seed=_seed(prompt))
        text = _StopAt(stops, on_text)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        generated, ended = 0, False
        try:
            position = len(prompt)
            while generated < max_tokens and position < self.n_ctx:
                token = ll.llama_sampler_sample(sampler, self.ctx, -1)
                if self.model.is_end(token):
                    ended = True
                    break
                generated += 1
                if text.add(decoder.decode(self.model.piece(token))):
                    break
                self.evaluate([token], position)
                position += 1
        finally:
            ll.llama_sampler_free(sampler)
        text.add(decoder.decode(b"", final=True))
        return text.finish(), generated, not (ended or text.stopped)


class _StopAt:
    """Generated text, cut before the first stop string. What could still turn into a stop
    string is held back from `on_text` until it cannot."""

    def __init__(self, stops: Sequence[str], on_text: TextCallback | None) -> None:
        self.stops = [s for s in stops if s]
        self.on_text = on_text
        self.text = ""
        self.sent = 0
        self.stopped = False

    def add(self, piece: str) -> bool:
        """Append a piece; True once a stop string has appeared."""
        if self.stopped or not piece:
            return self.stopped
        self.text += piece
        found = [i for i in (self.text.find(s, self.sent) for s in self.stops) if i >= 0]
        if found:
            self.text, self.stopped = self.text[: min(found)], True
            self._send(len(self.text))
        else:
            self._send(len(self.text) - self._stop_prefix())
        return self.stopped

    def finish(self) -> str:
        self._send(len(self.text))
        return self.text

    def _stop_prefix(self) -> int:
        """Length of the longest end of the text that begins a stop string."""
        return max(
            (
                k
                for s in self.stops
                for k in range(min(len(s) - 1, len(self.text)), 0, -1)
                if s.startswith(self.text[-k:])
            ),
            default=0,
        )

    def _send(self, upto: int) -> None:
        if upto > self.sent and self.on_text:
            self.on_text(self.text[self.sent : upto])
        self.sent = max(self.sent, upto)


def _seed(tokens: list[int]) -> int:
    """Sampling is seeded by the prompt, so the same call gives the same reply."""
    return int.from_bytes(hashlib.sha256(str(tokens).encode()).digest()[:4], "little")


def _sampler(ll: Any, temperature: float, seed: int) -> Any:
    chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    if temperature <= 0:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
        return chain
    for stage in (
        ll.llama_sampler_init_top_k(40), ll.llama_sampler_init_top_p(0.95, 1),
        ll.llama_sampler_init_min_p(0.05, 1), ll.llama_sampler_init_temp(temperature),
        ll.llama_sampler_init_dist(seed),
    ):
        ll.llama_sampler_chain_add(chain, stage)
    return chain


_RUNTIMES: dict[tuple[Path, int], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def runtime_for(path: Path, n_ctx: int) -> _Runtime:
    """The shared context for agents on this file and context size."""
    model = load_model(path)
    with _RUNTIMES_LOCK:
        key = (model.path, n_ctx)
        if key not in _RUNTIMES:
            _RUNTIMES[key] = _Runtime(model, n_ctx)
        return _RUNTIMES[key]


class LocalProvider:
    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.prices = Prices(0.0, 0.0)
        self.mode = spec.mode or "completion"
        self.temperature = 0.0 if spec.temperature is None else spec.temperature
        self._runtime = runtime_for(resolve_model(spec.model), spec.n_ctx or DEFAULT_N_CTX)
        self._render: Callable[..., Any] | None = None
        if self.mode == "chat":
            self._render = _chat_formatter(self._runtime.model, spec.name)

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        watch = Stopwatch()
        with self._runtime.lock:
            if request.role is Role.VERIFIER and self.mode == "completion":
                text, prompt, tokens_out = self._judge(request)
                truncated = False  # two fixed words, never cut
                if on_text:
                    on_text(text)
            else:
                text, prompt, tokens_out, truncated = self._generate(request, on_text)
        return Reply(
            text, len(prompt), tokens_out, 0.0, watch.seconds, truncated=truncated,
            input_truncated=prompt.cut,
        )

    def _clip(self, request: Request, tokens: list[int], reserve: int) -> _Prompt:
        """The prompt clipped from the front (its first token kept) to leave `reserve` tokens.

        The end must stay: the role's lead and the signature a completion continues (in chat
        mode, the template's last tokens); when not even that fits, exit 2 naming the fix."""
        n_ctx, room, total = self._runtime.n_ctx, self._runtime.n_ctx - reserve, len(tokens)
        if total <= room:
            return _Prompt(tokens)
        end = request.lead + request.answer_prefix if self._render is None else ""
        need = max(MIN_PROMPT_TOKENS, len(self._runtime.model.tokenize(end, bos=False)) + 1)
        if room < need:
            raise UsageError(
                f"agent {self.spec.name!r} cannot read this problem: its {request.role.value} "
                f"prompt is {total:,} tokens, and n_ctx {n_ctx} less {reserve} for the reply "
                f"leaves {max(room, 0):,}, fewer than the {need:,} its end needs (the lead and "
                "signature it continues); raise the agent's n_ctx, lower its max_tokens, or "
                "shorten the problem"
            )
        note = (
            f"agent {self.spec.name!r} ({request.role.value}): the prompt is {total:,} tokens; "
            f"n_ctx {n_ctx} less {reserve} for the reply holds its first token and last "
            f"{room - 1:,} ({total - room:,} dropped)"
        )
        return _Prompt(
            tokens[:1] + tokens[-(room - 1) :], Truncation(room, total - room, self.spec.name, note)
        )

    def _generate(
        self, request: Request, on_text: TextCallback | None
    ) -> tuple[str, _Prompt, int, bool]:
        model, stops = self._runtime.model, list(self.spec.stop)
        if self._render is not None:
            rendered = self._render(
                messages=[
                    {"role": "system", "content": request.system},
                    {"role": "user", "content": request.user},
                ]
            )
            tokens = model.tokenize(rendered.prompt, bos=not rendered.added_special, special=True)
        else:
            worker = request.role is Role.WORKER
            stops += WORKER_STOPS if worker else PROSE_STOPS
            tokens = model.tokenize(request.completion_prompt(), bos=True)
        prompt = self._clip(request, tokens, self.spec.max_tokens)
        text, count, truncated = self._runtime.generate(
            prompt.tokens, max_tokens=self.spec.max_tokens, temperature=self.temperature,
            stops=stops, on_text=on_text,
        )
        if self._render is None and request.role is Role.WORKER:
            parts = _TOP_LEVEL.split(text, maxsplit=1) if request.answer_prefix else [text]
            # an unindented line ended the answer before the limit
            truncated = (
                truncated and len(parts) == 1
            )
            text = f"```python\n{request.answer_prefix}{parts[0].rstrip()}\n```"
        return text, prompt, count, truncated

    def _judge(self, request: Request) -> tuple[str, _Prompt, int]:
        """ACCEPT vs REJECT by the log-probability of each continuation after the prompt."""
        runtime = self._runtime
        prompt = self._clip(
            request, runtime.model.tokenize(request.completion_prompt(), bos=True), reserve=8
        )
        runtime.evaluate(prompt.tokens, 0)
        after_prompt = runtime.logprobs()
        scores = {}
        n_out = 0
        for verdict, word in VERDICT_WORDS.items():
            tokens = runtime.model.tokenize(word, bos=False)
            total = float(after_prompt[tokens[0]])
            for i, token in enumerate(tokens[1:]):
                # the KV past the prompt is replaced
                runtime.evaluate(
                    [tokens[i]], len(prompt.tokens) + i
                )
                total += float(runtime.logprobs()[token])
            scores[verdict] = total
            n_out += len(tokens)
        best = max(scores, key=scores.__getitem__)
        text = (
            f"<verdict>{best.upper()}</verdict> (log-probability of ACCEPT "
            f"{scores['accept']:.2f}, of REJECT {scores['reject']:.2f})"
        )
        return text, prompt, n_out


@dataclass(frozen=True)
class _Prompt:
    """The prompt's tokens as evaluated, and what clipping cut, if anything."""

    tokens: list[int]
    cut: Truncation | None = None

    def __len__(self) -> int:
        return len(self.tokens)


def _chat_formatter(model: Model, agent: str) -> Callable[..., Any]:
    """The GGUF's chat template, rendered as llama-cpp-python renders it for `Llama`."""
    template = model.chat_template()
    if template is None:
        raise ConfigError(
            f'agent {agent!r}: mode = "chat" needs a GGUF with a chat template, and '
            f'{model.path.name} has none (use mode = "completion" for base models)'
        )
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    vocab = model.vocab
    return Jinja2ChatFormatter(
        template=template, eos_token=model.token_text(llama_cpp.llama_vocab_eos(vocab)),
        bos_token=model.token_text(llama_cpp.llama_vocab_bos(vocab)),
    )
