"""llama.cpp through its C API: model load, batch fill and the decode loop, one module for the
coordinator and the local agents. One load per GGUF file per process, always plain weights.

Plain weights means no extra CPU buffer types (`use_extra_bufts = False`), for two measured
reasons:

- repacked weights make a token's state depend on its row within the batch, and the
  coordinator's prefix reuse needs batch-exact states;
- on CPUs with AMX (Intel Xeon since Sapphire Rapids) a native build of llama.cpp stores the
  weights for its AMX kernels, which crash on every batch of more than one token
  (ggml-org/llama.cpp#20824). llama-cpp-python's `Llama` cannot turn them off, so trinity
  drives llama.cpp through its C API only.

The same numerics everywhere is also what lets one load serve both roles: the coordinator's
contexts and the agents' contexts sit on the same weights.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli.errors import ConfigError

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
    """The cores this process may run on (a CPU affinity mask or container limit can leave
    fewer than the machine has: more threads than cores make llama.cpp's spinning threads wait
    on each other), at most 8."""
    usable = (
        os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    )
    return max(1, min(8, len(usable)))


def numerics(*, n_batch: int, swa_ring: int | None) -> dict[str, Any]:
    """What decides the bits of a hidden state besides the GGUF and the tokens: llama.cpp's
    version, the ggml CPU kernels it picked here (AVX2 and AVX-512 round sums differently), the
    batch size, the sliding-window ring and flash attention (always off: see `context_params`).
    Memoized states and each head's metadata carry it, so states made otherwise are never mixed."""
    info = _ll().llama_print_system_info().decode("utf-8", "replace")
    features = sorted(set(re.findall(r"(\w+) = 1\b", info)))
    return {
        "llama_cpp": str(_ll().__version__), "cpu_features": ",".join(features), "n_batch": n_batch,
        "swa_ring": swa_ring or 0, "flash_attention": False,
    }


@dataclass(frozen=True, eq=False)
class Model:
    """A loaded GGUF (llama_model *) and its vocabulary."""

    path: Path
    handle: Any
    vocab: Any

    @property
    def hidden_size(self) -> int:
        return int(_ll().llama_model_n_embd(self.handle))

    @property
    def n_vocab(self) -> int:
        return int(_ll().llama_vocab_n_tokens(self.vocab))

    def tokenize(self, text: str, *, bos: bool, special: bool = False) -> list[int]:
        """Token ids of `text`; `special` parses control tokens such as <start_of_turn>."""
        ll = _ll()
        data = text.encode("utf-8")
        capacity = len(data) + 8  # a token is at least one byte, plus BOS
        buffer = (ll.llama_token * capacity)()
        n = ll.llama_tokenize(self.vocab, data, len(data), buffer, capacity, bos, special)
        if n < 0:  # cannot happen with one slot per byte, but never trust a C API blindly
            raise RuntimeError(f"tokenizer needed {-n} slots")
        return list(buffer[:n])

    def piece(self, token: int) -> bytes:
        """The bytes a generated token stands for (control tokens render as nothing)."""
        ll = _ll()
        buffer = ctypes.create_string_buffer(64)
        n = ll.llama_token_to_piece(self.vocab, token, buffer, len(buffer), 0, False)
        if n < 0:
            buffer = ctypes.create_string_buffer(-n)
            n = ll.llama_token_to_piece(self.vocab, token, buffer, len(buffer), 0, False)
        return buffer.raw[:n]

    def is_end(self, token: int) -> bool:
        return bool(_ll().llama_vocab_is_eog(self.vocab, token))

    def token_text(self, token: int) -> str:
        return (_ll().llama_vocab_get_text(self.vocab, token) or b"").decode("utf-8", "replace")

    def architecture(self) -> str:
        buffer = ctypes.create_string_buffer(128)
        n = _ll().llama_model_meta_val_str(
            self.handle, b"general.architecture", buffer, len(buffer)
        )
        return buffer.value.decode("utf-8", "replace") if n > 0 else ""

    def sliding_window_ring(self, *, n_ctx: int, n_ubatch: int) -> int | None:
        """The cells of llama.cpp's small sliding-window KV cache (`swa_full` off) when it is
        smaller than the context, so that it wraps around; None for models without one.

        Only architectures whose window is llama.cpp's standard one (a token sees the previous
        n_swa - 1 positions) qualify: the coordinator's ring bookkeeping assumes that mask. The
        size is llama.cpp's rule for one stream: n_swa + n_ubatch, padded to 256 cells."""
        if self.sliding_window <= 0 or self.architecture() not in STANDARD_SWA_ARCHITECTURES:
            return None
        cells = -(-min(n_ctx, self.sliding_window + n_ubatch) // 256) * 256
        return cells if cells < n_ctx else None

    @property
    def sliding_window(self) -> int:
        return int(_ll().llama_model_n_swa(self.handle))

    def chat_template(self) -> str | None:
        raw = _ll().llama_model_chat_template(self.handle, None)
        return raw.decode("utf-8") if raw else None

    def context_params(self, *, n_ctx: int, n_batch: int, n_threads: int) -> Any:
        """llama.cpp's context defaults with trinity's sizes; flash attention off, because
        llama.cpp's CPU flash attention makes a token's state depend on how the tokens were
        split into batches (measured: batches under 64 tokens take a per-row kernel that
        accumulates in half precision, larger ones a tiled kernel in single precision)."""
        ll = _ll()
        params = ll.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_threads = params.n_threads_batch = n_threads
        params.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
        return params

    def new_context(self, params: Any) -> Any:
        with _interrupts_after():  # it logs through the Python callback too
            ctx = _ll().llama_init_from_model(self.handle, params)
        if not ctx:
            raise ConfigError(
                f"could not create a llama.cpp context (n_ctx={params.n_ctx}) for {self.path}"
            )
        return ctx


def spans(begin: int, end: int, size: int, min_last: int = 1) -> list[tuple[int, int]]:
    """Cut [begin, end) into batches of at most `size` tokens; none after the first is shorter
    than `min_last` when the span allows (small batches change llama.cpp's numerics)."""
    cuts, chunk = [], begin
    while chunk < end:
        stop = min(end, chunk + size)
        if 0 < end - stop < min_last:
            stop = end - min_last
        cuts.append((chunk, stop))
        chunk = stop
    return cuts


def decode(
    ctx: Any, batch: Any, tokens: Sequence[int], first_position: int, outputs_from: int,
    seq: int = 0,
) -> None:
    """One llama_decode of `tokens` (at most the batch's size) at positions first_position...;
    those from index `outputs_from` on are outputs."""
    fill_batch(batch, tokens, first_position, outputs_from, seq)
    with _interrupts_after():
        status = _ll().llama_decode(ctx, batch)
    if status != 0:
        raise RuntimeError(f"llama_decode failed with status {status}")


@contextmanager
def _interrupts_after() -> Iterator[None]:
    """Ctrl-C during a call into llama.cpp (a decode, a model load, a new context) raises when
    it returns. Raised in a Python callback that llama.cpp calls (the coordinator's readout, the
    log callback), KeyboardInterrupt would be swallowed by ctypes, printed as "Exception
    ignored", and the run would go on. Only the main thread gets signals, and only
    Python's own handler is deferred (a handler someone installed is left alone)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    pressed: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt


def fill_batch(
    batch: Any, tokens: Sequence[int], first_position: int, outputs_from: int, seq: int = 0
) -> None:
    """Load `tokens` into a llama_batch at positions first_position..., all in sequence `seq`;
    those from index `outputs_from` on are outputs."""
    for i, token in enumerate(tokens):
        batch.token[i] = token
        batch.pos[i] = first_position + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq
        batch.logits[i] = i >= outputs_from
    batch.n_tokens = len(tokens)


# Sliding-window architectures with llama.cpp's standard window mask whose ring bookkeeping
# is tested (tests/test_coordinator.py); others keep a full-size SWA cache.
STANDARD_SWA_ARCHITECTURES = frozenset({"gemma3"})

_MODELS: dict[Path, Model] = {}
_LOADING = threading.Lock()


def load_model(path: Path) -> Model:
    """The process's one load of this GGUF (kept until the process ends)."""
    key = Path(path).expanduser().resolve()
    with _LOADING:
        if key not in _MODELS:
            if not key.is_file():
                raise ConfigError(f"GGUF model file not found: {key}")
            quiet_llama_logs()
            ll = _ll()
            ll.llama_backend_init()
            params = ll.llama_model_default_params()
            params.use_extra_bufts = False  # plain weights: see the module docstring
            with _interrupts_after():  # a load logs hundreds of lines through the callback
                handle = ll.llama_model_load_from_file(str(key).encode(), params)
            if not handle:
                from trinity_cli.llama.gguf import gguf_problem

                why = gguf_problem(key) or "llama.cpp refused it"
                raise ConfigError(f"model could not be loaded ({why}): {key}")
            _MODELS[key] = Model(key, handle, ll.llama_model_get_vocab(handle))
        return _MODELS[key]


def _ll() -> Any:
    import llama_cpp

    return llama_cpp
