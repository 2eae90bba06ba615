"""The coordinator on the real embedded Gemma-3-270M GGUF through llama.cpp."""

from __future__ import annotations

import numpy as np
import pytest

from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem, Transcript, Turn
from trinity_cli.errors import ConfigError

# The incremental and full encodes evaluate the same ids with the same kernels; with flash
# attention and weight repacking off (see coordinator/llama.py) they agree to float rounding.
TOLERANCE = 1e-4


def long_transcript(n_turns: int) -> Transcript:
    transcript = Transcript(Problem("Write `is_prime(n)` that returns True when n is prime.\n"))
    for i in range(n_turns):
        role = (Role.THINKER, Role.WORKER, Role.VERIFIER)[i % 3]
        text = f"Attempt {i}: check divisors up to sqrt(n); handle n < 2 and even numbers. " * 6
        transcript = transcript.with_turn(Turn(f"agent{i % 2}", role, text))
    return transcript


def test_hidden_state_shape_and_determinism(coordinator):
    transcript = long_transcript(1)
    first = coordinator.encode(transcript)
    coordinator.reset()
    second = coordinator.encode(transcript)
    assert first.hidden.shape == (coordinator.hidden_size,) == (640,)
    assert first.hidden.dtype == np.float32 and np.isfinite(first.hidden).all()
    assert np.array_equal(first.hidden, second.hidden)


def test_incremental_encode_equals_full_reencode_past_the_sliding_window(coordinator):
    coordinator.reset()
    steps = [long_transcript(n) for n in range(9)]
    incremental = [coordinator.encode(t) for t in steps]
    total = len(coordinator.transcript_tokens(steps[-1]))
    assert total > 1024  # well past Gemma-3's 512-token sliding window
    for transcript, inc in zip(steps[1:], incremental[1:]):
        coordinator.reset()
        full = coordinator.encode(transcript)
        assert inc.tokens < full.tokens  # only the new turn and the cue were evaluated
        assert np.abs(inc.hidden - full.hidden).max() <= TOLERANCE * max(1.0, np.abs(full.hidden).max())
    new_turn = len(coordinator.tokenize(steps[-1].coordinator_segments()[-1], bos=False))
    assert incremental[-1].tokens <= new_turn + len(coordinator.cue_tokens)


def test_decisions_differ_when_the_transcript_differs(coordinator):
    a = coordinator.encode(long_transcript(1)).hidden
    b = coordinator.encode(long_transcript(2)).hidden
    assert not np.allclose(a, b)


def test_token_ids_are_segment_concatenations(coordinator):
    transcript = long_transcript(3)
    ids = coordinator.transcript_tokens(transcript)
    segments = transcript.coordinator_segments()
    expected = coordinator.tokenize(segments[0], bos=True)
    for s in segments[1:]:
        expected = expected + coordinator.tokenize(s, bos=False)
    assert ids == expected


def test_overflow_keeps_the_problem_and_the_newest_turns(gguf_path):
    from trinity_cli.coordinator.llama import LlamaCoordinator

    small = LlamaCoordinator(gguf_path, n_ctx=512, max_turn_tokens=64)
    transcript = long_transcript(30)
    ids = small.transcript_tokens(transcript)
    assert len(ids) + len(small.cue_tokens) <= 512
    problem = small.tokenize(transcript.coordinator_segments()[0], bos=True)
    assert ids[: len(problem)] == problem
    newest = small.tokenize(transcript.coordinator_segments()[-1], bos=False)[:64]
    assert ids[-len(newest):] == newest
    encoding = small.encode(transcript)  # no crash, a real vector
    assert np.isfinite(encoding.hidden).all()
    small.close()


def test_token_position_outside_the_cue_is_a_config_error(gguf_path):
    from trinity_cli.coordinator.llama import LlamaCoordinator

    with pytest.raises(ConfigError, match="token_position"):
        LlamaCoordinator(gguf_path, n_ctx=256, token_position=-500)


def test_a_file_that_is_not_gguf_is_a_config_error(tmp_path):
    from trinity_cli.coordinator.llama import LlamaCoordinator

    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ConfigError, match="could not be loaded"):
        LlamaCoordinator(bad)


@pytest.mark.parametrize("gap", [1, 6, 30])
def test_small_steps_are_exact_too(coordinator, gap):
    ids = coordinator.transcript_tokens(long_transcript(5))
    coordinator.reset()
    full = coordinator.encode_tokens(ids)
    coordinator.reset()
    coordinator.encode_tokens(ids[:-gap])
    step = coordinator.encode_tokens(ids)
    assert step.tokens <= max(gap, 8) + len(coordinator.cue_tokens)
    assert np.array_equal(step.hidden, full.hidden)
