"""An in-process GGUF model through llama-cpp-python.

`mode = "completion"` is for base models (the embedded Gemma-3-270M has no chat template and
writes garbage in chat form): the role prompt and transcript become plain text, followed by the
role's lead ("Plan:", a code fence plus the task's signature, "Verdict:"). A completion-mode
Worker's reply is the signature plus its completion, returned as one fenced block. A base model
rarely writes a clean verdict, so a completion-mode Verifier compares the log-probabilities of
the continuations " ACCEPT" and " REJECT" and reports the likelier one.

`mode = "chat"` is for instruction-tuned GGUFs and uses the model's own chat template.
Agents on the same file and context size share one loaded model, one call at a time (a lock:
concurrent episodes in train and eval take turns). Each call evaluates its
prompt from scratch: llama-cpp-python's default CPU kernels make logits depend on how tokens
were split into batches, so reusing a cached prefix would make "the same call gives the same
reply" (sampling is seeded by the prompt) only approximately true.
"""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path
from typing import Any

from trinity_cli.config import AgentSpec
from trinity_cli.coordinator.embedded import resolve_model
from trinity_cli.coordinator.llama import default_threads, quiet_llama_logs
from trinity_cli.core.roles import Role
from trinity_cli.providers.base import Prices, Reply, Request, Stopwatch, TextCallback

# HumanEval's stop sequences: a completed function ends where top-level code starts.
WORKER_STOPS = ("\n```", "\nclass", "\ndef", "\n#", "\nif", "\nprint")
PROSE_STOPS = ("\n## ", "\n\n\n", "```")
# The completion of a function body ends at the first unindented line (HumanEval practice).
_TOP_LEVEL = re.compile(r"\n(?=\S)")
VERDICT_WORDS = {"accept": " ACCEPT", "reject": " REJECT"}

_LOADED: dict[tuple[Path, int], tuple[Any, threading.Lock]] = {}
_LOADING = threading.Lock()


def load_llama(path: Path, n_ctx: int) -> tuple[Any, threading.Lock]:
    """The loaded model for (file, context size), and the lock its calls take."""
    key = (path, n_ctx)
    with _LOADING:
        if key not in _LOADED:
            quiet_llama_logs()
            from llama_cpp import Llama

            llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=default_threads(), verbose=False)
            _LOADED[key] = (llm, threading.Lock())
    return _LOADED[key]


class LocalProvider:
    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.prices = Prices(0.0, 0.0)
        self.mode = spec.mode or "completion"
        self.temperature = 0.0 if spec.temperature is None else spec.temperature
        self._llm, self._lock = load_llama(resolve_model(spec.model), spec.n_ctx)

    def complete(self, request: Request, on_text: TextCallback | None = None) -> Reply:
        watch = Stopwatch()
        with self._lock:
            if self.mode == "chat":
                text, tokens_in, tokens_out = self._chat(request, on_text)
            elif request.role is Role.VERIFIER:
                text, tokens_in, tokens_out = self._judge(request)
                if on_text:
                    on_text(text)
            else:
                text, tokens_in, tokens_out = self._complete(request, on_text)
        return Reply(text, tokens_in, tokens_out, 0.0, watch.seconds)

    def _prompt_tokens(self, request: Request, reserve: int) -> list[int]:
        """The completion prompt, clipped from the front (BOS kept) to leave `reserve` tokens."""
        tokens = self._llm.tokenize(request.completion_prompt().encode("utf-8"), add_bos=True)
        room = max(16, self._llm.n_ctx() - reserve)
        return tokens if len(tokens) <= room else tokens[:1] + tokens[-(room - 1) :]

    def _seed(self, tokens: list[int]) -> int:
        """Sampling is seeded by the prompt, so the same call gives the same reply."""
        return int.from_bytes(hashlib.sha256(str(tokens).encode()).digest()[:4], "little")

    def _complete(self, request: Request, on_text: TextCallback | None) -> tuple[str, int, int]:
        worker = request.role is Role.WORKER
        stops = list(self.spec.stop) + list(WORKER_STOPS if worker else PROSE_STOPS)
        prompt = self._prompt_tokens(request, self.spec.max_tokens)
        pieces: list[str] = []
        count = 0
        self._llm.reset()  # see the module docstring: reuse would make replies batch-dependent
        for chunk in self._llm.create_completion(
            prompt, max_tokens=self.spec.max_tokens, temperature=self.temperature,
            stop=stops, stream=True, seed=self._seed(prompt),
        ):
            piece = chunk["choices"][0]["text"]
            if piece:
                count += 1
                pieces.append(piece)
                if on_text:
                    on_text(piece)
        text = "".join(pieces)
        if worker:
            body = _TOP_LEVEL.split(text, maxsplit=1)[0] if request.answer_prefix else text
            text = f"```python\n{request.answer_prefix}{body.rstrip()}\n```"
        return text, len(prompt), count

    def _judge(self, request: Request) -> tuple[str, int, int]:
        """ACCEPT vs REJECT by the log-probability of each continuation after the prompt."""
        llm = self._llm
        prompt = self._prompt_tokens(request, reserve=8)
        llm.reset()
        llm.eval(prompt)
        after_prompt = self._last_logprobs()
        scores = {}
        n_out = 0
        for verdict, word in VERDICT_WORDS.items():
            tokens = llm.tokenize(word.encode(), add_bos=False, special=False)
            llm.n_tokens = len(prompt)  # rewind to the prompt (the KV past it is overwritten)
            total = float(after_prompt[tokens[0]])
            for previous, token in zip(tokens, tokens[1:]):
                llm.eval([previous])
                total += float(self._last_logprobs()[token])
            scores[verdict] = total
            n_out += len(tokens)
        llm.n_tokens = len(prompt)
        best = max(scores, key=scores.__getitem__)
        text = (
            f"<verdict>{best.upper()}</verdict> (log-probability of ACCEPT "
            f"{scores['accept']:.2f}, of REJECT {scores['reject']:.2f})"
        )
        return text, len(prompt), n_out

    def _last_logprobs(self) -> Any:
        """Log-softmax of the logits of the last evaluated token."""
        import llama_cpp
        import numpy as np

        pointer = llama_cpp.llama_get_logits_ith(self._llm.ctx, -1)
        logits = np.ctypeslib.as_array(pointer, shape=(self._llm.n_vocab(),)).astype(np.float64)
        peak = logits.max()
        return logits - peak - np.log(np.exp(logits - peak).sum())

    def _chat(self, request: Request, on_text: TextCallback | None) -> tuple[str, int, int]:
        messages = [
            {"role": "system", "content": request.system},
            {"role": "user", "content": request.user},
        ]
        pieces: list[str] = []
        count = 0
        for chunk in self._llm.create_chat_completion(
            messages, max_tokens=self.spec.max_tokens, temperature=self.temperature,
            stop=list(self.spec.stop) or None, stream=True,
        ):
            piece = chunk["choices"][0]["delta"].get("content") or ""
            if piece:
                count += 1
                pieces.append(piece)
                if on_text:
                    on_text(piece)
        tokens_in = len(self._llm.tokenize((request.system + request.user).encode(), add_bos=True))
        return "".join(pieces), tokens_in, count

