"""The coordinator on llama.cpp: any GGUF, one hidden state per decision, no text generation.

How a decision is encoded (transcript format in `core.transcript`):

- The transcript's segments are tokenized one by one (cached) and concatenated, then the
  decision cue is appended. The KV cache holds what was evaluated last time; only the tokens
  after the longest common prefix are evaluated, so a turn costs its new segment plus the cue.
  The cue of the previous decision diverges from the next segment and is dropped from the cache
  by the same prefix rule.
- Sliding-window models (Gemma-3: 512-token windows) get a full-size SWA cache (`swa_full`),
  so removing the cue and appending never needs positions the window already evicted: reuse is
  exact, not approximate.
- The transcript tokens are evaluated with embeddings off and no outputs (no lm_head work);
  only the cue is evaluated with embeddings on. llama.cpp outputs every token of an embeddings
  batch, so that batch is kept to the cue alone.
- Exactness needs two llama.cpp settings, both measured here: no weight repacking
  (`use_extra_bufts = False`) and no flash attention. With either on, the same token's state
  differs by ~5% (relative) depending on how the tokens were split into batches. Batches of
  5 to 7 new tokens also take an inexact path; they are widened to 8.
- The vector is llama.cpp's `t_embd`: the last layer's output **after** the final RMS norm,
  at `token_position` of the cue (default -2, the penultimate token: the paper's choice).

Context overflow policy (never a crash): each turn segment is clipped to its first
`max_turn_tokens` tokens, the problem to its first half of the context, and the oldest turns
are dropped until problem + remaining turns + cue fit in `n_ctx`.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path

import numpy as np

from trinity_cli.coordinator.base import Encoding
from trinity_cli.core.transcript import DECISION_CUE, TRANSCRIPT_FORMAT, Transcript
from trinity_cli.errors import ConfigError

DEFAULT_TOKEN_POSITION = -2


_LOG_CALLBACK = None


def quiet_llama_logs() -> None:
    """Silence llama.cpp's load-time chatter on stderr unless TRINITY_DEBUG is set.

    llama-cpp-python's own callback maps ggml's log levels with an outdated table (warnings
    print as errors), so trinity installs its own; failures still surface as return codes.
    """
    global _LOG_CALLBACK
    import llama_cpp as ll
    import llama_cpp.llama

    if _LOG_CALLBACK is None:
        debug = bool(os.environ.get("TRINITY_DEBUG"))

        @ll.llama_log_callback
        def callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            if debug:
                sys.stderr.write(text.decode("utf-8", "replace"))

        _LOG_CALLBACK = callback  # keep a reference: C holds only the pointer
        ll.llama_log_set(callback, ctypes.c_void_p(0))


def default_threads() -> int:
    return max(1, min(8, os.cpu_count() or 1))


# llama.cpp's CPU matmul gives different results (~2% relative, measured) for a batch of 5, 6
# or 7 new tokens after the cached prefix; such a step re-evaluates a few cached tokens instead.
_INEXACT_BATCH_SIZES = (5, 6, 7)


class LlamaCoordinator:
    transcript_format = TRANSCRIPT_FORMAT

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        n_batch: int = 512,
        n_threads: int | None = None,
        token_position: int = DEFAULT_TOKEN_POSITION,
        max_turn_tokens: int = 1024,
    ) -> None:
        quiet_llama_logs()
        import llama_cpp as ll

        self._ll = ll
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ConfigError(f"coordinator model not found: {self.model_path}")
        ll.llama_backend_init()
        model_params = ll.llama_model_default_params()
        # Repacked CPU weights run 4-row kernels with a different tail path, so a token's
        # state would depend on its row within the batch; plain weights make it batch-exact.
        model_params.use_extra_bufts = False
        self._model = ll.llama_model_load_from_file(str(self.model_path).encode(), model_params)
        if not self._model:
            raise ConfigError(f"coordinator model could not be loaded (not a GGUF?): {self.model_path}")
        self._vocab = ll.llama_model_get_vocab(self._model)
        threads = n_threads or default_threads()
        params = ll.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_threads = threads
        params.n_threads_batch = threads
        params.embeddings = False  # switched on for the cue batch only
        params.pooling_type = ll.LLAMA_POOLING_TYPE_NONE
        params.swa_full = True
        # llama.cpp's CPU flash-attention kernel makes a token's state depend on how the
        # tokens were split into batches (5% relative difference measured here), which
        # would break exact prefix reuse; plain attention gives identical states.
        params.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self._ctx = ll.llama_init_from_model(self._model, params)
        if not self._ctx:
            raise ConfigError(f"could not create a llama.cpp context (n_ctx={n_ctx}) for {self.model_path}")
        self._memory = ll.llama_get_memory(self._ctx)
        self.n_ctx = ll.llama_n_ctx(self._ctx)
        self.n_batch = n_batch
        self.n_threads = threads
        self.hidden_size = int(ll.llama_model_n_embd(self._model))
        self.token_position = token_position
        self.max_turn_tokens = max_turn_tokens
        self._batch = ll.llama_batch_init(n_batch, 0, 1)
        self._cached: list[int] = []  # token ids whose KV is in the cache, in order
        self._segment_tokens: dict[tuple[str, bool], list[int]] = {}
        self.cue_tokens = self.tokenize(DECISION_CUE, bos=False)
        if not -len(self.cue_tokens) <= token_position < 0:
            raise ConfigError(
                f"token_position {token_position} is outside the {len(self.cue_tokens)}-token decision cue"
            )

    def tokenize(self, text: str, *, bos: bool) -> list[int]:
        key = (text, bos)
        cached = self._segment_tokens.get(key)
        if cached is not None:
            return cached
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buffer = (self._ll.llama_token * capacity)()
        n = self._ll.llama_tokenize(self._vocab, data, len(data), buffer, capacity, bos, False)
        if n < 0:  # cannot happen with one slot per byte, but never trust a C API blindly
            raise RuntimeError(f"tokenizer needed {-n} slots")
        tokens = list(buffer[:n])
        if len(self._segment_tokens) > 20_000:
            self._segment_tokens.clear()
        self._segment_tokens[key] = tokens
        return tokens

    def transcript_tokens(self, transcript: Transcript) -> list[int]:
        """The token ids of a transcript under the overflow policy, cue excluded."""
        segments = transcript.coordinator_segments()
        problem = self.tokenize(segments[0], bos=True)[: self.n_ctx // 2]
        turns = [self.tokenize(s, bos=False)[: self.max_turn_tokens] for s in segments[1:]]
        room = self.n_ctx - len(problem) - len(self.cue_tokens)
        kept: list[list[int]] = []
        for turn in reversed(turns):  # newest first, until the context is full
            if len(turn) > room:
                break
            kept.append(turn)
            room -= len(turn)
        ids = list(problem)
        for turn in reversed(kept):
            ids.extend(turn)
        return ids

    def encode(self, transcript: Transcript) -> Encoding:
        return self.encode_tokens(self.transcript_tokens(transcript))

    def encode_tokens(self, ids: list[int]) -> Encoding:
        """The hidden state at the cue after `ids`, evaluating only what the cache lacks."""
        started = time.perf_counter()
        wanted = ids + self.cue_tokens
        target = len(wanted) + self.token_position
        common = 0
        limit = min(len(self._cached), len(wanted))
        while common < limit and self._cached[common] == wanted[common]:
            common += 1
        start = min(common, target)  # the target token itself must be evaluated to be read
        if len(ids) - start in _INEXACT_BATCH_SIZES:
            start = max(0, len(ids) - 8)  # re-evaluate a few cached tokens: a batch of 8 is exact
        if start < len(self._cached):
            if not self._ll.llama_memory_seq_rm(self._memory, 0, start, -1):
                self.reset()
                start = 0
            self._cached = self._cached[:start]
        cue_start = max(start, len(ids))
        self._decode(wanted, start, cue_start, embeddings=False)
        self._decode(wanted, cue_start, len(wanted), embeddings=True)
        pointer = self._ll.llama_get_embeddings_ith(self._ctx, target - cue_start)
        if not pointer:
            raise RuntimeError("llama.cpp returned no embedding for the decision token")
        hidden = np.ctypeslib.as_array(pointer, shape=(self.hidden_size,)).astype(np.float32)
        return Encoding(hidden, time.perf_counter() - started, len(wanted) - start)

    def _decode(self, tokens: list[int], begin: int, end: int, *, embeddings: bool) -> None:
        """Evaluate tokens[begin:end] at their positions; with embeddings, output all of them."""
        if begin >= end:
            return
        ll, batch = self._ll, self._batch
        ll.llama_set_embeddings(self._ctx, embeddings)
        for chunk in range(begin, end, self.n_batch):
            stop = min(end, chunk + self.n_batch)
            if embeddings and stop < end:
                raise RuntimeError("the decision cue must fit in one batch")
            for i, pos in enumerate(range(chunk, stop)):
                batch.token[i] = tokens[pos]
                batch.pos[i] = pos
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = embeddings
            batch.n_tokens = stop - chunk
            status = ll.llama_decode(self._ctx, batch)
            if status != 0:
                self.reset()
                raise RuntimeError(f"llama_decode failed with status {status}")
            self._cached.extend(tokens[chunk:stop])

    def reset(self) -> None:
        """Forget the KV cache (the next decision re-encodes from scratch)."""
        self._ll.llama_memory_clear(self._memory, True)
        self._cached = []

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            self._ll.llama_batch_free(self._batch)
            self._ll.llama_free(self._ctx)
            self._ll.llama_model_free(self._model)
            self._ctx = None

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        try:
            self.close()
        except Exception:
            pass
