"""The coordinator on llama.cpp: any GGUF, one hidden state per decision, no text generation.

How a decision is encoded (transcript format in `core.transcript`):

- The transcript's segments are tokenized one by one (cached) and concatenated, then the
  decision cue is appended. The KV cache holds what was evaluated last time; only the tokens
  after the longest common prefix are evaluated, so a turn costs its new segment plus the cue.
  The cue of the previous decision diverges from the next segment and is dropped from the cache
  by the same prefix rule.
- Sliding-window models (Gemma-3: 512-token windows) keep their window layers in llama.cpp's
  small SWA cache, a ring of n_swa + n_batch cells (768 for Gemma-3 at batch 256), so plain
  attention multiplies 768 cells there instead of the whole transcript (a 4k re-encode: 6.9 s
  instead of 9.5). The order of a token's cells in that ring decides how attention sums are
  rounded, so exactness needs the ring kept canonical: position p always in cell p mod ring.
  llama.cpp's slot search keeps it so while tokens are appended; a drop keeps it only when the
  window before the drop point is still held and the search resumes at the right cell
  (`_can_truncate`), and any other drop clears the cache instead. A cue that would wrap around
  the ring's end could not be dropped again, so it is evaluated in sequence 1, a scratch copy
  of the cache (a second KV stream).
- The vector is read from llama.cpp's graph, not from its outputs: an eval callback copies the
  decision token's row of `result_norm` (the last layer after the final RMS norm, what
  embeddings mode returns) and stops the graph there, so the 262k-word vocabulary projection
  never runs. The cue's last 8 tokens up to the decision token are marked as outputs (the same
  graph, so the same bits, as embeddings mode gave the shipped heads); the transcript before
  them has no outputs. The tokens after the decision token are never evaluated (causal
  attention: they cannot change it). A model whose graph has no `result_norm` falls back to
  embeddings mode.
- Exactness needs two llama.cpp settings, both measured here: no weight repacking
  (`use_extra_bufts = False`, as every model trinity loads: `trinity_cli/llama/capi.py`) and no
  flash attention. With either on, the same token's state differs by up to ~5% (relative)
  depending on how the tokens were split into batches (flash attention is exact only when
  every batch has 64 tokens or more, too many for a cheap decision step). Batches of
  fewer than 8 tokens also take an inexact path (measured: chunks of 1 to 7 change the state,
  any split into chunks of 8 or more gives identical bits), so no batch is ever smaller.
- With `sessions = N` (train and eval with several workers) there are N llama.cpp contexts on
  the one loaded model, each with its own KV cache; an encode takes the context where it
  costs least (longest reusable prefix, least to drop), so concurrent episodes keep their own
  prefixes instead of evicting each other's.
- While an agent's reply streams, `stream_turn` evaluates the partial turn on a background
  thread (`prefill`), so the decision after the reply evaluates only its last tokens and the
  cue. The partial turn's last few tokens are held back: more text can change how they split.
- The decision token is `token_position` of the cue (default -2, the penultimate token: the
  paper's choice).

Context overflow policy (never a crash): each turn segment is clipped to its first
`max_turn_tokens` tokens, the problem to its first half of the context, and the oldest turns
are dropped until problem + remaining turns + cue fit in `n_ctx`. What it cut comes back
with the encoding (`Encoding.input_truncated`), so a run can say so.
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.core.coordinator import Encoding
from trinity_cli.core.records import Truncation
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import CURRENT_FORMAT, DECISION_CUE, FORMATS, Transcript, Turn
from trinity_cli.errors import ConfigError
from trinity_cli.llama.capi import decode, default_threads, load_model, numerics, spans

DEFAULT_TOKEN_POSITION = -2


# llama.cpp's CPU kernels give different results (~5% relative, measured) for batches of fewer
# than 8 tokens; such a step re-evaluates a few cached tokens instead.
MIN_EXACT_BATCH = 8
# Tokens at the end of a still-streaming turn that prefill leaves for the final encode.
STREAM_HOLD_BACK = 3
# Prefill evaluates at most this many tokens per call, so a finished reply waits little for it.
STREAM_CHUNK = 64
# The graph node llama.cpp's decoder models name their last hidden state (after the final norm).
READOUT_TENSOR = b"result_norm"


def _ggml() -> Any:
    """ggml's tensor functions that the readout callback needs, typed once."""
    import llama_cpp._ggml

    lib = llama_cpp._ggml.libggml
    lib.ggml_get_name.restype, lib.ggml_get_name.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    lib.ggml_nrows.restype, lib.ggml_nrows.argtypes = ctypes.c_int64, [ctypes.c_void_p]
    lib.ggml_backend_tensor_get.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
    ]
    return lib


@dataclass
class _Session:
    """One llama.cpp context: a KV cache and the token ids it holds, in order."""

    ctx: Any
    memory: Any
    cached: list[int] = field(default_factory=list)
    last_used: int = 0

    def clear(self, ll: Any) -> None:
        ll.llama_memory_clear(self.memory, True)
        self.cached = []

    def common_prefix(self, ids: list[int]) -> int:
        common, limit = 0, min(len(self.cached), len(ids))
        while common < limit and self.cached[common] == ids[common]:
            common += 1
        return common


class LlamaCoordinator:
    def __init__(
        self, model_path: str | Path, *, n_ctx: int = 8192,
        n_batch: int = 256,  # with 512 the fastest in `trinity bench`'s tuning_reencode_seconds_1k
        n_threads: int | None = None, token_position: int = DEFAULT_TOKEN_POSITION,
        max_turn_tokens: int = 1024, sessions: int = 1, transcript_format: str = CURRENT_FORMAT.id,
    ) -> None:
        import llama_cpp as ll

        self._ll = ll
        self.model_path = Path(model_path)
        self._model = load_model(self.model_path)  # plain weights: batch-exact states
        threads = n_threads or default_threads()
        params = self._model.context_params(n_ctx=n_ctx, n_batch=n_batch, n_threads=threads)
        # See "Sliding-window models" in the module docstring.
        self._ring = self._model.sliding_window_ring(n_ctx=n_ctx, n_ubatch=n_batch)
        self._window = self._model.sliding_window
        if self._ring is not None:
            params.swa_full = False
            # sequence 1: a scratch copy for wrapping cues
            params.n_seq_max, params.kv_unified = (
                2, False,
            )
            params.n_ctx = 2 * n_ctx  # per sequence: n_ctx
        params.embeddings = False  # see _read_embeddings
        params.pooling_type = ll.LLAMA_POOLING_TYPE_NONE
        self.hidden_size = self._model.hidden_size
        self._capturing = False  # the readout callback is armed (the decision's decode)
        self._captured: np.ndarray | None = None
        self._read_embeddings = False  # the model's graph has no READOUT_TENSOR
        self._on_tensor = ll.ggml_backend_sched_eval_callback(self._make_readout(_ggml()))
        params.cb_eval = self._on_tensor  # kept referenced: C holds only the pointer
        self._params = params
        self._sessions: list[_Session] = []
        self.max_sessions = max(1, sessions)
        self._session = self._new_session()
        self.n_ctx = ll.llama_n_ctx_seq(self._session.ctx)
        self.n_batch = self._context_batch = n_batch
        self.numerics = numerics(n_batch=n_batch, swa_ring=self._ring)
        self.n_threads = threads
        self.token_position = token_position
        self.max_turn_tokens = max_turn_tokens
        self._batch = ll.llama_batch_init(n_batch, 0, 1)
        # One decode at a time: the sessions share the batch, and the cores.
        self._lock = threading.Lock()
        self._uses = 0
        self._segment_tokens: dict[tuple[str, bool], list[int]] = {}
        self.transcript_format = transcript_format
        self._format = FORMATS[transcript_format]
        self.cue_tokens = self.tokenize(DECISION_CUE, bos=False)
        if not -len(self.cue_tokens) <= token_position < 0:
            raise ConfigError(
                f"token_position {token_position} is outside the "
                f"{len(self.cue_tokens)}-token decision cue"
            )

    def tokenize(self, text: str, *, bos: bool) -> list[int]:
        key = (text, bos)
        cached = self._segment_tokens.get(key)
        if cached is not None:
            return cached
        tokens = self._model.tokenize(text, bos=bos)
        if len(self._segment_tokens) > 20_000:
            self._segment_tokens.clear()
        self._segment_tokens[key] = tokens
        return tokens

    def transcript_tokens(self, transcript: Transcript, *, last_open: bool = False) -> list[int]:
        """The token ids of a transcript under the overflow policy, cue excluded."""
        return self.fit(transcript, last_open=last_open)[0]

    def fit(
        self, transcript: Transcript, *, last_open: bool = False
    ) -> tuple[list[int], Truncation | None]:
        """The transcript's token ids under the overflow policy, and what the policy cut."""
        segments = [
            self.tokenize(s, bos=i == 0)
            for i, s in enumerate(
                transcript.coordinator_segments(self._format, last_open=last_open)
            )
        ]
        problem = segments[0][: self.n_ctx // 2]
        turns = [s[: self.max_turn_tokens] for s in segments[1:]]
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
        total = sum(map(len, segments))
        return ids, None if len(ids) == total else self._cut(
            len(segments[0]), len(problem), len(ids), total
        )

    def _cut(self, problem_total: int, problem_kept: int, kept: int, total: int) -> Truncation:
        """The overflow policy's cut, in words: the problem's, else the turns'."""
        if problem_kept < problem_total:
            what = (
                f"the problem is {problem_total:,} tokens; the coordinator reads its first "
                f"{problem_kept:,} (half its n_ctx {self.n_ctx})"
            )
        else:
            what = (
                f"the transcript is {total:,} tokens; the coordinator reads {kept:,} "
                "(the oldest turns or turn ends cut)"
            )
        return Truncation(kept, total - kept, "coordinator", f"{what}, {total - kept:,} dropped")

    def encode(self, transcript: Transcript) -> Encoding:
        ids, cut = self.fit(transcript)
        return replace(self.encode_tokens(ids), input_truncated=cut)

    def encode_tokens(self, ids: list[int]) -> Encoding:
        """The hidden state at the cue after `ids`, evaluating only what the cache lacks.

        The cue is evaluated up to the decision token; its last MIN_EXACT_BATCH tokens are
        marked as outputs, and the readout callback takes the decision token's row."""
        started = time.perf_counter()
        wanted = (ids + self.cue_tokens)[
            : len(ids) + len(self.cue_tokens) + self.token_position + 1
        ]
        with self._lock:
            hidden, evaluated = self._encode_locked(ids, wanted)
        return Encoding(hidden, time.perf_counter() - started, evaluated)

    def _encode_locked(self, ids: list[int], wanted: list[int]) -> tuple[np.ndarray, int]:
        outputs_from = max(0, len(wanted) - MIN_EXACT_BATCH)
        # the cue is always evaluated
        start = min(
            self._pick_session(wanted), len(ids), outputs_from
        )
        if self._read_embeddings and 0 < outputs_from - start < MIN_EXACT_BATCH:
            # the batch before the outputs is exact too
            start = max(
                0, outputs_from - MIN_EXACT_BATCH
            )
        start = self._truncate(start)
        evaluated, seq = len(wanted) - start, 0
        if self._ring is not None and len(ids) % self._ring + len(wanted) - len(ids) > self._ring:
            # The cue, dropped again by the next decision, would wrap around the ring's end:
            # the transcript goes into the cache, the cue into a scratch copy of it.
            kept = min(len(ids), outputs_from)
            if not self._read_embeddings and kept - start >= MIN_EXACT_BATCH:
                self._decode(wanted, start, kept, outputs_from=kept)
                start = kept
            self._ll.llama_memory_seq_cp(self._session.memory, 0, 1, -1, -1)
            seq = 1
        if self._read_embeddings:
            return self._decode_embeddings(wanted, start, outputs_from, seq), evaluated
        hidden = self._decode_readout(wanted, start, outputs_from, seq)
        if hidden is None:  # no readout tensor in this model's graph: embeddings mode from now on
            self._read_embeddings = True
            return self._encode_locked(ids, wanted)
        return hidden, evaluated

    def _decode_readout(
        self, wanted: list[int], start: int, outputs_from: int, seq: int
    ) -> np.ndarray | None:
        """Evaluate wanted[start:] with the callback armed; None if it never saw READOUT_TENSOR."""
        self._capturing, self._captured = True, None
        try:
            self._decode(wanted, start, len(wanted), outputs_from=outputs_from, seq=seq)
        finally:
            self._capturing = False
        if self._captured is None and seq == 0:
            self._truncate(start)
        return self._captured

    def _decode_embeddings(
        self, wanted: list[int], start: int, outputs_from: int, seq: int
    ) -> np.ndarray:
        """The fallback readout: llama.cpp's embeddings mode, which projects every output too."""
        self._decode(wanted, start, outputs_from, outputs_from=outputs_from, seq=seq)
        self._ll.llama_set_embeddings(self._session.ctx, True)
        try:
            self._decode(wanted, outputs_from, len(wanted), outputs_from=outputs_from, seq=seq)
        finally:
            self._ll.llama_set_embeddings(self._session.ctx, False)
        pointer = self._ll.llama_get_embeddings_ith(self._session.ctx, -1)
        if not pointer:
            raise RuntimeError("llama.cpp returned no embedding for the decision token")
        return np.ctypeslib.as_array(pointer, shape=(self.hidden_size,)).astype(np.float32)

    def _make_readout(self, ggml: Any) -> Any:
        """The eval callback: while a decision batch runs, copy READOUT_TENSOR's last row (the
        decision token) and stop the graph, which skips the vocabulary projection after it."""
        row_bytes = self.hidden_size * 4

        def on_tensor(tensor: int, ask: bool, user_data: int) -> bool:
            if not self._capturing:
                return not ask  # observe nothing, stop nothing
            if ask:
                return ggml.ggml_get_name(tensor) == READOUT_TENSOR
            rows = ggml.ggml_nrows(tensor)
            if rows < 1:  # a batch before the outputs
                return True
            row = np.empty(self.hidden_size, dtype=np.float32)
            ggml.ggml_backend_tensor_get(tensor, row.ctypes.data, (rows - 1) * row_bytes, row_bytes)
            self._captured = row
            return False

        return on_tensor

    def prefill(self, transcript: Transcript, max_tokens: int = STREAM_CHUNK) -> int:
        """Evaluate a transcript whose last turn is still being written, cue excluded.

        Only whole batches of at least MIN_EXACT_BATCH stable tokens are evaluated, so the state
        the next `encode` reads is bit-identical to a full re-encode. Returns tokens evaluated."""
        ids = self.transcript_tokens(transcript, last_open=True)[:-STREAM_HOLD_BACK]
        with self._lock:
            start = self._pick_session(ids)
            if len(ids) - start < MIN_EXACT_BATCH:
                return 0
            start = self._truncate(start)
            end = min(len(ids), start + max(max_tokens, MIN_EXACT_BATCH))
            self._decode(ids, start, end, outputs_from=end)
        return end - start

    def stream_turn(self, transcript: Transcript, agent: str, role: Role) -> StreamingPrefill:
        """Start encoding the next turn (by `agent` as `role`) while its text streams in."""
        return StreamingPrefill(self, transcript, agent, role)

    def _new_session(self) -> _Session:
        ctx = self._model.new_context(self._params)
        session = _Session(ctx, self._ll.llama_get_memory(ctx))
        self._sessions.append(session)
        return session

    def _pick_session(self, ids: list[int]) -> int:
        """Make the session that costs least for `ids` current (most reused, least dropped;
        ties: least recently used); returns how many of `ids` it already holds."""
        scored = []
        for session in self._sessions:
            common = session.common_prefix(ids)
            if not self._can_truncate(session, common):
                common = 0
            scored.append(
                (common - (len(session.cached) - common), -session.last_used, common, session)
            )
        gain, _, common, best = max(scored, key=lambda row: row[:2])
        if best.cached and gain <= 0 and len(self._sessions) < self.max_sessions:
            best, common = self._new_session(), 0
        self._uses += 1
        best.last_used = self._uses
        self._session = best
        return common

    def _truncate(self, start: int) -> int:
        """Drop the current session's cached tokens from `start` on; returns where evaluation
        resumes: `start`, or 0 when the cache had to be cleared instead."""
        session = self._session
        if start < len(session.cached):
            if not self._can_truncate(session, start) or not self._ll.llama_memory_seq_rm(
                session.memory, 0, start, -1
            ):
                session.clear(self._ll)
                return 0
            session.cached = session.cached[:start]
        return start

    def _can_truncate(self, session: _Session, start: int) -> bool:
        """Whether dropping `session`'s tokens from `start` on keeps the sliding-window ring
        exact (see the module docstring). The window before `start` must still be held, and
        llama.cpp's slot search must resume at cell start mod ring: it resumes at the first
        freed cell, or at cell 0 when that lies past the cells in use (which is also what a
        drop wrapping around the ring's end does), so that cell must not lie past them."""
        ring = self._ring
        if ring is None or start >= len(session.cached):
            return True
        oldest = int(self._ll.llama_memory_seq_pos_min(session.memory, 0))
        return oldest <= max(0, start - self._window + 1) and start % ring <= start - oldest

    def _decode(
        self, tokens: list[int], begin: int, end: int, *, outputs_from: int, seq: int = 0
    ) -> None:
        """Evaluate tokens[begin:end] at their positions, marking those from `outputs_from` on
        as outputs. Batches are cut so that none is smaller than MIN_EXACT_BATCH (when the span
        allows), and the last one holds every output. Sequence 1 is scratch: not recorded."""
        if begin >= end:
            return
        session = self._session
        for chunk, stop in spans(begin, end, self.n_batch, MIN_EXACT_BATCH):
            try:
                decode(
                    session.ctx, self._batch, tokens[chunk:stop], chunk, outputs_from - chunk, seq
                )
            except RuntimeError:
                self.reset()
                raise
            if seq == 0:
                session.cached.extend(tokens[chunk:stop])

    def configure(self, *, n_threads: int, n_batch: int) -> None:
        """Change threads and batch size (at most the context's) for what follows: `trinity bench`
        measures the choices. Any batch split of 8+ tokens gives the same states, so neither
        changes a decision."""
        for session in self._sessions:
            self._ll.llama_set_n_threads(session.ctx, n_threads, n_threads)
        self.n_threads = n_threads
        self.n_batch = max(MIN_EXACT_BATCH, min(n_batch, self._context_batch))

    def reset(self) -> None:
        """Forget every KV cache (the next decision re-encodes from scratch)."""
        for session in self._sessions:
            session.clear(self._ll)

    def close(self) -> None:
        if getattr(self, "_sessions", None):
            self._ll.llama_batch_free(self._batch)
            for session in self._sessions:
                self._ll.llama_free(session.ctx)
            # the model stays loaded for the process (trinity_cli/llama/capi.py)
            self._sessions = []

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - nothing to report to at interpreter shutdown
            pass


class StreamingPrefill:
    """A turn being streamed: its text so far is prefilled on a background thread.

    `feed` only appends (the agent's stream is never slowed); the thread evaluates whatever has
    arrived in chunks of at most STREAM_CHUNK tokens. `finish` stops it after the chunk in
    flight. A failure here only costs speed: the next `encode` evaluates what is missing."""

    def __init__(
        self, coordinator: LlamaCoordinator, transcript: Transcript, agent: str, role: Role
    ) -> None:
        self._coordinator = coordinator
        self._partial = lambda text: transcript.with_turn(Turn(agent, role, text))
        self._pieces: list[str] = []
        self._arrived = threading.Event()
        self._stopping = False
        self.tokens = 0  # evaluated while streaming
        self._thread = threading.Thread(target=self._run, name="trinity-prefill", daemon=True)
        self._thread.start()

    def feed(self, piece: str) -> None:
        self._pieces.append(piece)
        self._arrived.set()

    def finish(self) -> None:
        self._stopping = True
        self._arrived.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._arrived.wait()
                self._arrived.clear()
                while not self._stopping:  # catch up with everything that has arrived
                    evaluated = self._coordinator.prefill(self._partial("".join(self._pieces)))
                    self.tokens += evaluated
                    if not evaluated:
                        break
        except Exception:  # noqa: BLE001, S110  # pragma: no cover - llama.cpp failures resurface in the next encode
            pass
