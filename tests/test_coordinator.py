"""The coordinator on the real embedded Gemma-3-270M GGUF through llama.cpp."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem, Transcript, Turn
from trinity_cli.errors import ConfigError

# The incremental and full encodes evaluate the same ids with the same kernels; with flash
# attention and weight repacking off (see coordinator/llama.py) they agree to float rounding.
TOLERANCE = 1e-4


def long_transcript(n_turns: int, repeats: int = 6) -> Transcript:
    """`n_turns` turns, each a sentence of about 20 tokens said `repeats` times."""
    transcript = Transcript(Problem("Write `is_prime(n)` that returns True when n is prime.\n"))
    for i in range(n_turns):
        role = (Role.THINKER, Role.WORKER, Role.VERIFIER)[i % 3]
        sentence = f"Attempt {i}: check divisors up to sqrt(n); handle n < 2 and even numbers. "
        text = sentence * repeats
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
        assert np.abs(inc.hidden - full.hidden).max() <= TOLERANCE * max(
            1.0, np.abs(full.hidden).max()
        )
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
    assert ids[-len(newest) :] == newest
    encoding = small.encode(transcript)  # no crash, a real vector
    assert np.isfinite(encoding.hidden).all()
    total = sum(
        len(small.tokenize(s, bos=i == 0)) for i, s in enumerate(transcript.coordinator_segments())
    )
    cut = encoding.input_truncated  # what was cut comes back with the state
    assert cut is not None and (cut.kept_tokens, cut.dropped_tokens) == (len(ids), total - len(ids))
    assert cut.note.startswith(
        f"the transcript is {total:,} tokens; the coordinator reads {len(ids):,}"
    )
    huge = Transcript(Problem("Count the sheep. " * 400))
    problem_cut = small.fit(huge)[1]
    assert problem_cut is not None and problem_cut.kept_tokens == 256  # half the context
    assert problem_cut.note.startswith(
        f"the problem is {256 + problem_cut.dropped_tokens:,} tokens; the coordinator "
        "reads its first 256"
    )
    short = Transcript(Problem("Add two numbers."))
    assert small.fit(short)[1] is None and small.encode(short).input_truncated is None
    small.close()


def test_token_position_outside_the_cue_is_a_config_error(gguf_path):
    from trinity_cli.coordinator.llama import LlamaCoordinator

    with pytest.raises(ConfigError, match="token_position"):
        LlamaCoordinator(gguf_path, n_ctx=256, token_position=-500)


def test_a_file_that_is_not_gguf_is_a_config_error(tmp_path, gguf_path):
    from trinity_cli.coordinator.llama import LlamaCoordinator

    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ConfigError, match=r"could not be loaded \(not a GGUF file\)"):
        LlamaCoordinator(bad)
    whole = gguf_path.read_bytes()
    bad.write_bytes(whole[: len(whole) // 2])  # a download cut short says so
    with pytest.raises(ConfigError, match=r"could not be loaded \(truncated: its tensors need"):
        LlamaCoordinator(bad)


def test_ctrl_c_while_llama_cpp_loads_a_model_stops_the_run_after_the_load():
    """The load calls Python back for every log line; a KeyboardInterrupt raised there was
    swallowed by ctypes ("Exception ignored") and the run went on. The signal is sent from the
    first log line, so it lands inside the load every time."""
    program = """if True:
        import os, signal, sys
        from trinity_cli.llama import capi
        from trinity_cli.llama.gguf import embedded_model_path

        class Tripwire:  # stderr: TRINITY_DEBUG sends llama.cpp's log lines here
            sent = False
            def write(self, text):
                if not Tripwire.sent:
                    Tripwire.sent = True
                    os.kill(os.getpid(), signal.SIGINT)
            def flush(self):
                pass

        path = embedded_model_path()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal has it
        sys.stderr = Tripwire()
        try:
            capi.load_model(path)
        except KeyboardInterrupt:
            print("stopped after the load:", Tripwire.sent)
        else:
            print("the load went on:", Tripwire.sent)
    """
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
        env={**os.environ, "TRINITY_DEBUG": "1"}, check=False,
    )
    assert done.stdout == "stopped after the load: True\n", done.stdout + done.stderr


def test_the_sliding_window_ring_stays_exact_through_wrapping_cues_and_drops(
    coordinator, gguf_path
):
    """Gemma-3's window layers live in a 768-cell ring. Each step below is compared bit for bit
    with a fresh encode: a cue that would wrap around the ring's end (evaluated in the scratch
    sequence), then appends after it, a drop the ring keeps, a drop past the held window,
    and one that would wrap around the ring's end (both clear the cache and re-evaluate)."""
    from trinity_cli.coordinator.llama import LlamaCoordinator

    ring = coordinator._ring
    assert ring == 768
    cue = len(coordinator.cue_tokens) + coordinator.token_position + 1
    ids = coordinator.transcript_tokens(long_transcript(14))
    wrap_at = 2 * ring - cue + 4  # the cue's last 4 tokens land past the ring's end
    assert len(ids) > wrap_at + 300
    fresh = LlamaCoordinator(gguf_path, n_ctx=4096)
    coordinator.reset()
    coordinator.encode_tokens(ids[:1200])
    try:
        for length, evaluated in [
            # the transcript goes into the cache, the cue into the copy
            (
                wrap_at, wrap_at - 1200 + cue,
            ),
            (wrap_at + 9, 9 + cue), (wrap_at + 200, 191 + cue),
            (wrap_at + 100, cue),  # a drop inside the ring
            (wrap_at + 2, wrap_at + 2 + cue),  # the drop would wrap around the ring's end: cleared
            (wrap_at + 202, 200 + cue),
            (wrap_at - 300, wrap_at - 300 + cue),  # the window before the drop is gone: cleared
        ]:
            step = coordinator.encode_tokens(ids[:length])
            fresh.reset()
            assert step.tokens == evaluated, length
            assert np.array_equal(step.hidden, fresh.encode_tokens(ids[:length]).hidden), length
    finally:
        fresh.close()


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


def test_graph_readout_equals_embeddings_mode_bit_for_bit(coordinator, gguf_path, monkeypatch):
    """The callback readout (no vocabulary projection) and llama.cpp's embeddings mode, the
    fallback for a graph without the readout tensor, give the same vector."""
    from trinity_cli.coordinator import llama

    transcript = long_transcript(4)
    coordinator.reset()
    read = coordinator.encode(transcript).hidden
    assert not coordinator._read_embeddings

    monkeypatch.setattr(llama, "READOUT_TENSOR", b"no-such-tensor")
    fallback = llama.LlamaCoordinator(gguf_path, n_ctx=1024)
    first = fallback.encode(transcript).hidden
    assert fallback._read_embeddings
    again = fallback.encode(transcript).hidden  # cached prefix, embeddings mode from the start
    fallback.close()
    assert np.array_equal(read, first) and np.array_equal(read, again)


STREAMED_REPLY = (
    "```python\ndef is_prime(n):\n    if n < 2:\n        return False\n"
    + (
        (
            "    for d in range(2, int(n ** 0.5) + 1):\n"
            "        if n % d == 0:\n            return False\n"
        )
        * 6
    )
    + "    return True\n```"
)


def random_pieces(text: str, seed: int) -> list[str]:
    """The text cut at random characters, as a stream may deliver it (mid-word included)."""
    rng = np.random.default_rng(seed)
    cuts = sorted(set(rng.integers(1, len(text), size=len(text) // 5).tolist()))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def tail_budget(coordinator, turn: int) -> int:
    """What the encode after a fully prefilled turn may evaluate: held-back tokens, end tag (tf1),
    cue."""
    from trinity_cli.coordinator.llama import MIN_EXACT_BATCH, STREAM_HOLD_BACK
    from trinity_cli.core.transcript import FORMATS

    end_tag = coordinator.tokenize(f"\n[end of turn {turn} | agent1 | worker]\n", bos=False)
    end_tags = FORMATS[coordinator.transcript_format].end_tags
    return (
        STREAM_HOLD_BACK + len(end_tag) * end_tags + len(coordinator.cue_tokens) + MIN_EXACT_BATCH
    )


@pytest.fixture(scope="module")
def tf1_coordinator(gguf_path):
    """The first heads' transcript format, which users' heads may still be trained on."""
    from trinity_cli.coordinator.llama import LlamaCoordinator

    tf1 = LlamaCoordinator(gguf_path, n_ctx=4096, transcript_format="trinity-tf1")
    yield tf1
    tf1.close()


def test_each_transcript_format_has_its_own_segments(coordinator, tf1_coordinator):
    from trinity_cli.core.transcript import FORMATS

    transcript = long_transcript(2)
    for c in (coordinator, tf1_coordinator):
        fmt = FORMATS[c.transcript_format]
        segments = transcript.coordinator_segments(fmt)
        assert all(("[end of turn" in s) == fmt.end_tags for s in segments[1:])
        ids = c.transcript_tokens(transcript)
        assert ids == c.tokenize(segments[0], bos=True) + [
            t for s in segments[1:] for t in c.tokenize(s, bos=False)
        ]
    assert coordinator.transcript_format == "trinity-tf2"  # what new heads are trained on
    assert not np.allclose(
        coordinator.encode(transcript).hidden, tf1_coordinator.encode(transcript).hidden
    )
    # before the first turn the formats agree, so the states of a first decision are the same
    first = Transcript(transcript.problem)
    assert np.array_equal(coordinator.encode(first).hidden, tf1_coordinator.encode(first).hidden)


@pytest.mark.parametrize("seed,tf1", [(0, False), (1, False), (2, False), (3, True)])
def test_prefill_of_a_streaming_turn_is_bit_exact(coordinator, tf1_coordinator, seed, tf1):
    coordinator = tf1_coordinator if tf1 else coordinator
    before = long_transcript(3)
    after = before.with_turn(Turn("agent1", Role.WORKER, STREAMED_REPLY))
    coordinator.reset()
    coordinator.encode(before)
    text = ""
    for piece in random_pieces(STREAMED_REPLY, seed):
        text += piece
        coordinator.prefill(before.with_turn(Turn("agent1", Role.WORKER, text)))
    tail = coordinator.encode(after)
    coordinator.reset()
    full = coordinator.encode(after)
    assert np.array_equal(tail.hidden, full.hidden)
    assert tail.tokens <= tail_budget(coordinator, 4) < full.tokens // 4


def wait_until_still(stream, quiet_s: float = 0.5, limit_s: float = 60.0) -> None:
    """Until the background prefill has evaluated nothing new for `quiet_s` (it caught up)."""
    import time

    deadline = time.monotonic() + limit_s
    seen, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if stream.tokens != seen:
            seen, since = stream.tokens, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.02)


def test_stream_turn_encodes_the_reply_on_a_background_thread(coordinator):
    before = long_transcript(2)
    after = before.with_turn(Turn("agent1", Role.WORKER, STREAMED_REPLY))
    coordinator.reset()
    coordinator.encode(before)
    stream = coordinator.stream_turn(before, "agent1", Role.WORKER)
    for piece in random_pieces(STREAMED_REPLY, 7):
        stream.feed(piece)  # returns at once: the agent's stream is never held up
    wait_until_still(stream)
    stream.finish()
    reply_tokens = len(coordinator.tokenize(STREAMED_REPLY, bos=False))
    assert stream.tokens >= reply_tokens - 8
    tail = coordinator.encode(after)
    coordinator.reset()
    assert np.array_equal(tail.hidden, coordinator.encode(after).hidden)
    assert tail.tokens <= tail_budget(coordinator, 3)


def test_a_remote_agents_reply_is_encoded_while_it_streams(coordinator):
    """Through the real OpenAI SDK: the decision after a slowly streamed reply evaluates its tail
    only."""
    from support.scripted import ScriptedPolicy
    from support.wire.server import WireServer, openai_stream

    from trinity_cli.core.episode import run_episode
    from trinity_cli.pool.spec import AgentSpec
    from trinity_cli.providers.registry import build_agents

    server = WireServer()
    try:
        server.responses += [
            openai_stream(STREAMED_REPLY, pieces=40, gap_s=0.05),
            openai_stream("<verdict>ACCEPT</verdict>"),
        ]
        spec = AgentSpec("agent1", "openai", "m", base_url=server.url + "/v1")
        agents = build_agents([spec])
        assert agents[0].remote
        coordinator.reset()
        result = run_episode(
            Problem("Write `is_prime(n)`.\n"), agents, coordinator,
            ScriptedPolicy(((0, Role.WORKER), (0, Role.VERIFIER)), n_agents=1), max_turns=2,
        )
    finally:
        server.close()
    assert result.verdict == "accepted"
    worker_turn = len(
        coordinator.tokenize(
            Transcript(Problem("x"))
            .with_turn(Turn("agent1", Role.WORKER, STREAMED_REPLY))
            .coordinator_segments()[1], bos=False,
        )
    )
    after_stream = result.turns[1].decision.coordinator_tokens
    assert after_stream <= worker_turn // 2  # most of the reply was evaluated while it streamed


def test_sessions_keep_each_episodes_prefix_when_episodes_interleave(gguf_path, coordinator):
    """Two episodes of one task, encoded alternately (as concurrent workers do): with two
    sessions each step evaluates only its new turn; with one, each step re-evaluates the other's."""
    from trinity_cli.coordinator.llama import LlamaCoordinator

    a = [long_transcript(n, repeats=2) for n in range(1, 5)]
    b = [
        Transcript(t.problem, tuple(Turn("other", turn.role, turn.text[::-1]) for turn in t.turns))
        for t in a
    ]
    fresh = []  # each transcript encoded alone, from an empty cache
    for transcript in a + b:
        coordinator.reset()
        fresh.append(coordinator.encode(transcript).hidden)
    evaluated = {}
    for sessions in (1, 2):
        pair = LlamaCoordinator(gguf_path, n_ctx=4096, sessions=sessions)
        try:
            steps = [(pair.encode(x), pair.encode(y)) for x, y in zip(a, b)]
        finally:
            pair.close()
        evaluated[sessions] = sum(ea.tokens + eb.tokens for ea, eb in steps[1:])
        interleaved = [e.hidden for e, _ in steps] + [e.hidden for _, e in steps]
        for step, alone in zip(interleaved, fresh, strict=True):
            assert np.array_equal(step, alone)
    new_turns = sum(
        len(coordinator.tokenize(t.coordinator_segments()[-1], bos=False))
        + len(coordinator.cue_tokens)
        for t in a[1:] + b[1:]
    )
    assert evaluated[2] <= new_turns < evaluated[1]


def test_bench_streamed_call_measures_the_overlapped_and_plain_encodes(coordinator):
    from trinity_cli.bench.measure import streamed_call_share
    from trinity_cli.cli.display import TurnDisplay

    result = streamed_call_share(coordinator, repeats=1, make_display=TurnDisplay)
    assert 0 < result["overlapped"] < 1 and 0 < result["non_overlapped"] < 1
    assert 250 <= result["reply_tokens"] <= 350  # "~300 tokens", as the key promises
    # the reply was encoded while it streamed: less than all of it is left after its end. How
    # much less depends on the prefill thread keeping up with the clock, which a loaded machine
    # may not; that only the tail is left once it has is tested without a clock above
    assert result["final_encode_tokens"] < result["reply_tokens"]


def test_memoized_states_are_reused_only_under_the_numerics_that_made_them(
    coordinator, tmp_path, monkeypatch
):
    """A llama.cpp upgrade (or other CPU kernels, batch, ring) re-encodes instead of serving
    states from the disk memo that the new build would not produce."""
    import llama_cpp

    from trinity_cli.coordinator.memo import MemoCoordinator

    numerics = coordinator.numerics
    assert (
        numerics["llama_cpp"] == llama_cpp.__version__
        and numerics["n_batch"] == coordinator.n_batch
    )
    # Gemma-3 at batch 256
    assert (
        numerics["swa_ring"] == 768 and numerics["flash_attention"] is False
    )
    info = llama_cpp.llama_print_system_info().decode()
    assert numerics["cpu_features"] and all(
        f"{name} = 1" in info for name in numerics["cpu_features"].split(",")
    )
    transcript = Transcript(Problem("Write add(a, b).", "def add(a, b):\n"))
    path = tmp_path / "hidden.sqlite"
    first = MemoCoordinator(coordinator, "sha", path)
    first.encode(transcript)
    again = MemoCoordinator(coordinator, "sha", path)
    again.encode(transcript)
    assert (first.misses, again.misses, again.hits) == (1, 0, 1)
    for key, other in [
        ("llama_cpp", "0.0.1"), ("cpu_features", "AVX512F"), ("n_batch", 512), ("swa_ring", 0),
        ("flash_attention", True),
    ]:
        monkeypatch.setattr(coordinator, "numerics", {**coordinator.numerics, key: other})
        upgraded = MemoCoordinator(coordinator, "sha", path)
        upgraded.encode(transcript)
        assert (upgraded.hits, upgraded.misses) == (0, 1), key
        monkeypatch.undo()


def test_the_precomputed_states_are_what_this_coordinator_encodes(coordinator, gguf_path):
    """tests/data/states.npz stands in for encodes in the learning tests (support/states.py):
    where it was made with this GGUF and these numerics, the states looked up there for the
    kinds record's first decisions have the bits a fresh encode gives."""
    from support.learnable_record import kind_tasks
    from support.states import PrecomputedStates, made_with

    from trinity_cli.coordinator.memo import MemoCoordinator
    from trinity_cli.llama.gguf import gguf_sha256

    sha = gguf_sha256(gguf_path)
    table = PrecomputedStates()
    if table.made_with != made_with(coordinator, sha):
        pytest.skip(f"states made with {table.made_with}; nothing in the file applies here")
    warm, cold = (MemoCoordinator(coordinator, sha, table=t) for t in (table, None))
    for task in kind_tasks()[::30]:
        transcript = Transcript(task.problem)
        assert np.array_equal(warm.encode(transcript).hidden, cold.encode(transcript).hidden)
    assert (warm.hits, warm.misses, cold.misses) == (4, 0, 4)
