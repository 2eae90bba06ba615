"""`trinity bench`: what the coordinator costs, as ratios measured in one run on this machine.

Keys (scripts depend on them):
- prefix_reuse_speedup_4k: decision time for a ~4k-token transcript by full re-encode ÷ the
  time when only the newest ~200-token turn is new (plus the curve at 256, 1k, 2k, 4k);
- reencode_time_vs_raw: the coordinator's full re-encode ÷ llama.cpp's cheapest raw prompt
  evaluation of the same tokens and threads (logits for the last token only; the fastest of
  RAW_CONFIGS that runs here), and reencode_time_vs_raw_no_flash_attention against the raw
  evaluation with the coordinator's attention kernels and KV cache (SAME_KERNELS);
- coordinator_share_2s_call: coordinator seconds after the agent's last token ÷ the turn's wall
  time, for a 2 s streamed reply of ~300 tokens encoded while it streams (and
  coordinator_share_2s_call_non_overlapped: the same reply encoded after it ends;
  coordinator_share_2s_call_displayed: overlapped, with solve's live display drawing the
  reply's last lines on a terminal as it streams);
- train_episodes_per_hour: a real `train` run on the example sim pool with cold caches;
- train_concurrency_speedup: training episodes whose agent calls each wait 1 s on a simulated
  network, 1 worker ÷ 4 workers (wall time);
- ray_speedup_1s_agent: episodes per hour on 4 Ray workers ÷ on 1, the agents a loopback
  OpenAI-compatible server that answers after 1 s (null without the ray extra);
- ray_overhead_1_worker: the same sim-pool episodes on 1 Ray worker ÷ here (cold caches both;
  the cluster's start and the workers' model load not counted);
- peak_rss_mb: peak RSS of `trinity solve` on the default pool;
- help_time_vs_bare_typer: `trinity --help` wall time ÷ a bare Typer app's `--help`;
- tuning_reencode_seconds_1k: the full re-encode of a ~1k-token transcript per thread count and
  batch size, the measurement behind the defaults.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trinity_cli.core.events import TextDelta, TurnFinished, TurnStarted
from trinity_cli.core.records import Decision, TurnRecord
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem, Transcript, Turn

SIZES = (256, 1024, 2048, 4096)
NEW_TURN_TOKENS = 200
REPLY_TOKENS = 300
REPLY_SECONDS = 2.0


def _median(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def _transcript_of(coordinator: Any, tokens: int) -> Transcript:
    """A transcript of about `tokens` tokens whose last turn is ~NEW_TURN_TOKENS long."""
    sentence = "Check each index, keep a running total, and return early when the sum exceeds k. "
    transcript = Transcript(Problem("Write `window_sum(xs, k)` for a list of integers.\n"))
    i = 0
    while len(coordinator.transcript_tokens(transcript)) < tokens - NEW_TURN_TOKENS:
        transcript = transcript.with_turn(
            Turn(f"agent{i % 2}", (Role.THINKER, Role.WORKER)[i % 2], sentence * 8)
        )
        i += 1
    return transcript.with_turn(Turn("agent9", Role.VERIFIER, sentence * 12))


def prefix_reuse(coordinator: Any, repeats: int) -> dict[str, float]:
    """Full re-encode ÷ incremental decision time per size: the median of paired ratios. Each
    repeat times a full re-encode and right after it the step with only the newest turn new,
    so a burst of load on a shared machine falls on both sides of one ratio."""
    curve = {}
    for size in SIZES:
        full_t = _transcript_of(coordinator, size)
        prefix = Transcript(full_t.problem, full_t.turns[:-1])
        ratios = []
        for _ in range(repeats):
            coordinator.reset()
            full = coordinator.encode(full_t).seconds
            # the cache now holds the prefix and its cue, as in a turn loop
            coordinator.encode(
                prefix
            )
            ratios.append(full / coordinator.encode(full_t).seconds)
        curve[str(size)] = statistics.median(ratios)
    return curve


# llama.cpp prompt evaluations the raw side tries: (its default weight layout, flash attention,
# full-size sliding-window cache, batch size). The first is llama.cpp's context defaults.
RAW_CONFIGS = {
    "default weights, flash attention auto": (True, "auto", True, 512),
    "plain weights, flash attention auto": (False, "auto", True, 512),
    "plain weights, flash attention off": (False, "off", True, 512),
    "plain weights, flash attention auto, small SWA cache": (False, "auto", False, 512),
    "plain weights, flash attention off, small SWA cache, batch 512": (False, "off", False, 512),
    "plain weights, flash attention off, small SWA cache, batch 256": (False, "off", False, 256),
}
# The raw evaluation with the coordinator's kernels and cache.
SAME_KERNELS = "plain weights, flash attention off, small SWA cache, batch 256"


def raw_eval_seconds(
    model_path: Path, tokens: list[int], threads: int, repeats: int
) -> dict[str, float | None]:
    """llama.cpp's plain prompt evaluation of `tokens` (default context, logits for the last
    token only) per RAW_CONFIGS entry: the median seconds, or None where it crashed. Each runs
    in a child process: on CPUs with AMX, llama.cpp's default weight layout puts the weights in
    its AMX kernels, which crash on batches of more than one token (ggml-org/llama.cpp#20824)."""
    seconds: dict[str, float | None] = {}
    for name, (extra_bufts, flash_attn, swa_full, n_batch) in RAW_CONFIGS.items():
        child = subprocess.run(
            [
                sys.executable, "-c",
                "from trinity_cli.bench.measure import raw_eval_child; raw_eval_child()",
            ],
            input=json.dumps(
                {
                    "model": str(model_path), "tokens": tokens, "threads": threads,
                    "repeats": repeats, "extra_bufts": extra_bufts, "flash_attn": flash_attn,
                    "swa_full": swa_full, "n_batch": n_batch,
                }
            ),
            capture_output=True, text=True, check=False,
        )
        seconds[name] = float(child.stdout) if child.returncode == 0 else None
    if not any(seconds.values()):
        raise RuntimeError("llama.cpp's raw prompt evaluation failed in every configuration")
    return seconds


def raw_eval_child() -> None:
    """The child side of raw_eval_seconds: reads its job as JSON on stdin, prints seconds."""
    import llama_cpp as ll

    from trinity_cli.llama.capi import decode, quiet_llama_logs, spans

    job = json.load(sys.stdin)
    quiet_llama_logs()
    ll.llama_backend_init()
    model_params = ll.llama_model_default_params()
    model_params.use_extra_bufts = job["extra_bufts"]
    model = ll.llama_model_load_from_file(job["model"].encode(), model_params)
    params = ll.llama_context_default_params()
    params.n_ctx, params.n_batch = 8192, job["n_batch"]
    params.n_ubatch = min(params.n_ubatch, job["n_batch"])
    params.swa_full = job["swa_full"]
    params.n_threads = params.n_threads_batch = job["threads"]
    if job["flash_attn"] == "off":
        params.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = ll.llama_init_from_model(model, params)
    tokens, size = job["tokens"], job["n_batch"]
    batch = ll.llama_batch_init(size, 0, 1)

    def once() -> float:
        ll.llama_memory_clear(ll.llama_get_memory(ctx), True)
        started = time.perf_counter()
        for begin, stop in spans(0, len(tokens), size):
            decode(ctx, batch, tokens[begin:stop], begin, len(tokens) - 1 - begin)
        return time.perf_counter() - started

    once()
    print(_median(once, job["repeats"]))


def _reply_of(coordinator: Any, tokens: int) -> str:
    """A Worker-style code reply of about `tokens` tokens."""
    line = "    total = total + xs[i] * weights[i]  # running sum\n"
    body = "```python\ndef window_sum(xs, weights):\n    total = 0\n"
    while len(coordinator.tokenize(body + line, bos=False)) < tokens - 8:
        body += line
    return body + "    return total\n```"


def streamed_call_share(
    coordinator: Any, repeats: int, make_display: Callable[[Any], Callable[[Any], None]]
) -> dict[str, float]:
    """Coordinator seconds after a streamed ~300-token reply's last piece ÷ the turn's wall time.

    The reply arrives in word-sized pieces at even intervals over REPLY_SECONDS; overlapped,
    `stream_turn` encodes them as they come (as `solve` does for remote agents); not
    overlapped, the whole reply is encoded after it ends. `make_display` builds solve's live
    display on a Rich console (the caller's: the bench sits below the CLI)."""
    before = _transcript_of(coordinator, 1024)
    reply = _reply_of(coordinator, REPLY_TOKENS)
    pieces = re.findall(r"\s*\S+", reply)
    after = before.with_turn(Turn("agent1", Role.WORKER, reply))

    final_encodes = []

    def overlapped(display: Callable[[Any], None] = lambda event: None) -> float:
        coordinator.reset()
        coordinator.encode(before)
        decision = Decision(1, 0, "agent1", Role.WORKER, "head", (1.0,), (0.0, 1.0, 0.0), 0.0, 0)
        display(TurnStarted(decision))
        stream = coordinator.stream_turn(before, "agent1", Role.WORKER)
        began = time.perf_counter()
        for i, piece in enumerate(pieces, start=1):
            time.sleep(max(0.0, began + REPLY_SECONDS * i / len(pieces) - time.perf_counter()))
            display(TextDelta(1, piece))
            stream.feed(piece)
        last = time.perf_counter()
        stream.finish()
        final_encodes.append(coordinator.encode(after))
        seconds = time.perf_counter() - last
        display(
            TurnFinished(TurnRecord(decision, reply, None, None, 0, 0, 0.0, False, REPLY_SECONDS))
        )
        return seconds

    def displayed() -> float:
        """Overlapped, with solve's live display drawing the reply on a (virtual) terminal."""
        from rich.console import Console

        with open(os.devnull, "w") as sink:
            return overlapped(make_display(Console(file=sink, force_terminal=True, width=120)))

    def not_overlapped() -> float:
        coordinator.reset()
        coordinator.encode(before)
        return coordinator.encode(after).seconds

    after_last = _median(overlapped, repeats)
    after_end = _median(not_overlapped, repeats)
    after_displayed = _median(displayed, repeats)
    return {
        "overlapped": after_last / (REPLY_SECONDS + after_last),
        "displayed": after_displayed / (REPLY_SECONDS + after_displayed),
        "non_overlapped": after_end / (REPLY_SECONDS + after_end),
        "seconds_after_last_token": after_last,
        "final_encode_seconds": statistics.median(e.seconds for e in final_encodes),
        "final_encode_tokens": statistics.median(e.tokens for e in final_encodes),
        "reply_tokens": len(coordinator.tokenize(reply, bos=False)), "pieces": len(pieces),
    }


TUNING_TOKENS = 1024
TUNING_BATCHES = (64, 128, 256, 512)


def tuning(coordinator: Any) -> dict[str, float]:
    """Full re-encode seconds of a ~1k-token transcript per (threads, batch size). A batch size
    is a context setting (it also sizes the sliding-window ring), so each gets its own
    coordinator on the same loaded model."""
    from trinity_cli.coordinator.llama import LlamaCoordinator

    transcript = _transcript_of(coordinator, TUNING_TOKENS)
    seconds = {}
    for n_batch in TUNING_BATCHES:
        trial = LlamaCoordinator(coordinator.model_path, n_ctx=coordinator.n_ctx, n_batch=n_batch)
        try:
            for threads in sorted({1, 2, coordinator.n_threads}):
                trial.configure(n_threads=threads, n_batch=n_batch)
                trial.reset()
                seconds[f"n_batch={n_batch} threads={threads}"] = round(
                    trial.encode(transcript).seconds, 3
                )
        finally:
            trial.close()
    return seconds


def trinity_command() -> list[str]:
    return [sys.executable, "-m", "trinity_cli"]


def timed_run(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def help_ratio(repeats: int) -> float:
    bare = [
        sys.executable, "-c",
        "import typer\napp = typer.Typer()\n@app.command()\ndef main(x: int = 0):\n    pass\napp()",
        "--help",
    ]
    timed_run(bare)
    timed_run(trinity_command() + ["--help"])
    return _median(lambda: timed_run(trinity_command() + ["--help"]), repeats) / _median(
        lambda: timed_run(bare), repeats
    )


# Runs a command and prints its peak RSS: a child's ru_maxrss also counts the image it was
# forked from, so the measurement must fork from this small process, not from the bench.
_RSS_PROBE = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def peak_rss_mb(command: list[str]) -> float:
    """Peak RSS of one process run to completion (and of what it runs), in MB."""
    probe = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE, *command], capture_output=True, text=True, check=True
    )
    return int(probe.stdout) / 1024.0  # Linux reports KiB


def train_throughput(sim_pool: Path, generations: int) -> dict[str, float]:
    """A real training run on the sim pool with cold caches (a fresh TRINITY_HOME)."""
    from trinity_cli.pool.spec import load_pool
    from trinity_cli.providers.registry import build_agents
    from trinity_cli.runtime import memo_coordinator, open_caches
    from trinity_cli.tasks.taskset import load_humaneval, select_split
    from trinity_cli.train.es import TrainSettings, train

    saved_home = os.environ.get("TRINITY_HOME")
    with tempfile.TemporaryDirectory(prefix="trinity-bench-") as home:
        os.environ["TRINITY_HOME"] = home
        try:
            started = time.perf_counter()
            pool = load_pool(str(sim_pool))
            tasks = load_humaneval()
            caches = open_caches(no_cache=False)
            agents = build_agents(pool.agents, tasks, caches.responses)
            coordinator = memo_coordinator(pool, caches)
            settings = TrainSettings(generations=generations, popsize=8, batch_size=16, max_turns=3)
            result = train(
                select_split(tasks, "train"), agents, coordinator, caches.grader, settings,
                Path(home) / "bench.ckpt",
            )
            seconds = time.perf_counter() - started
        finally:
            if saved_home is None:
                os.environ.pop("TRINITY_HOME", None)
            else:
                os.environ["TRINITY_HOME"] = saved_home
    episodes = result.episodes
    return {
        "episodes": episodes, "seconds": round(seconds, 2),
        "episodes_per_hour": round(episodes / seconds * 3600, 1),
        "coordinator_passes_per_episode": round(coordinator.misses / episodes, 3),
        "memo_hit_rate": round(coordinator.saved_fraction, 3),
        "response_cache_hit_rate": round(caches.responses.stats.hit_rate, 3),
    }


# the recorded pool's training run: its first train-split tasks
RECORDED_POOL, RECORDED_TASKS = (
    "ldb-humaneval", 32,
)
# the paper's 30,720 episodes
PAPER_SCALE: dict[str, Any] = {
    "generations": 60, "popsize": 32, "batch_size": 16,
}


def recorded_train_throughput() -> dict[str, Any]:
    """Training at paper scale on the bundled recorded pool (5 turns): once with cold caches (a
    fresh TRINITY_HOME: every turn replayed, graded and encoded for the first time), then again
    in the same home (warm: the states, grades and verdicts on disk). Episodes are the search's."""
    from trinity_cli.pool.spec import load_pool
    from trinity_cli.providers.registry import build_agents
    from trinity_cli.runtime import memo_coordinator, open_caches
    from trinity_cli.tasks.taskset import load_tasks, select_split
    from trinity_cli.train.es import TrainSettings, new_forest, train

    figures: dict[str, Any] = {}
    saved_home = os.environ.get("TRINITY_HOME")
    with tempfile.TemporaryDirectory(prefix="trinity-bench-") as home:
        os.environ["TRINITY_HOME"] = home
        try:
            for caches_were in ("cold", "warm"):
                started = time.perf_counter()
                pool = load_pool(RECORDED_POOL)
                tasks = load_tasks("humaneval")
                caches = open_caches(no_cache=False)
                agents = build_agents(
                    pool.agents, tasks, caches.responses, coordinator_model=pool.coordinator.model
                )
                coordinator = memo_coordinator(pool, caches)
                settings = TrainSettings(**PAPER_SCALE, max_turns=5, project=8, sigma0=0.2)
                forest = new_forest(agents, coordinator, caches.grader, settings.max_turns)
                result = train(
                    select_split(tasks, "train")[:RECORDED_TASKS], agents, coordinator,
                    caches.grader, settings, None, forest=forest,
                )
                seconds = time.perf_counter() - started
                figures[caches_were] = {
                    "episodes": result.episodes, "seconds": round(seconds, 2),
                    "episodes_per_hour": round(result.episodes / seconds * 3600, 1),
                    "states_encoded": coordinator.misses, "turns_made": forest.grown,
                }
        finally:
            if saved_home is None:
                os.environ.pop("TRINITY_HOME", None)
            else:
                os.environ["TRINITY_HOME"] = saved_home
    return figures


NETWORK_LATENCY_S = 1.0  # remote LLM calls take seconds; this is the short end
CONCURRENT_WORKERS = 4


class _OverTheNetwork:
    """A sim agent behind a simulated network round trip (what concurrency overlaps)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def complete(self, request: Any, on_text: Any = None, on_retry: Any = None) -> Any:
        time.sleep(NETWORK_LATENCY_S)
        return self.inner.complete(request, on_text, on_retry)


# tasks × random heads, `--max-turns 3`: what the concurrency and Ray ratios time
BENCH_EPISODES = (
    4, 8,
)


def bench_episodes(tasks: list[Any], n_agents: int, hidden_size: int) -> list[Any]:
    """The timed episodes: BENCH_EPISODES[1] random heads on the first train tasks, task-major."""
    import numpy as np

    from trinity_cli.core.head import N_ROLES, LinearHead
    from trinity_cli.core.transcript import CURRENT_FORMAT
    from trinity_cli.tasks.taskset import select_split
    from trinity_cli.train.runner import Episode

    rng = np.random.default_rng(0)
    d = hidden_size
    heads = [
        LinearHead(rng.normal(0.0, 0.05, (n_agents + N_ROLES, d)), np.zeros(d), np.ones(d))
        for _ in range(BENCH_EPISODES[1])
    ]
    return [
        Episode(task, head, 3, None, CURRENT_FORMAT.id, (0, c, i))
        for i, task in enumerate(select_split(tasks, "train")[: BENCH_EPISODES[0]])
        for c, head in enumerate(heads)
    ]


def concurrency_speedup(sim_pool: Path) -> dict[str, float]:
    """Wall time of the bench episodes with 1 worker ÷ with CONCURRENT_WORKERS, each agent call
    taking NETWORK_LATENCY_S more."""
    from dataclasses import replace

    from trinity_cli.coordinator.memo import MemoCoordinator
    from trinity_cli.core.transcript import CURRENT_FORMAT
    from trinity_cli.pool.spec import load_pool
    from trinity_cli.providers.registry import build_agents
    from trinity_cli.runtime import backbone_of, build_coordinator
    from trinity_cli.tasks.grading import Grader
    from trinity_cli.tasks.taskset import load_humaneval
    from trinity_cli.train.runner import LocalRunner, Players

    pool = load_pool(str(sim_pool))
    tasks = load_humaneval()
    agents = [
        replace(a, provider=_OverTheNetwork(a.provider)) for a in build_agents(pool.agents, tasks)
    ]
    coordinator = build_coordinator(pool, sessions=CONCURRENT_WORKERS)
    episodes = bench_episodes(tasks, len(agents), coordinator.hidden_size)
    seconds = {}
    for workers in (1, CONCURRENT_WORKERS):
        coordinator.reset()
        memo, grader = MemoCoordinator(coordinator, backbone_of(pool).sha256), Grader()  # cold
        started = time.perf_counter()
        LocalRunner(Players(agents, grader, {CURRENT_FORMAT.id: memo}), workers).map(episodes, None)
        seconds[workers] = time.perf_counter() - started
    coordinator.close()
    return {
        "speedup": seconds[1] / seconds[CONCURRENT_WORKERS], "workers": CONCURRENT_WORKERS,
        "network_latency_s": NETWORK_LATENCY_S, "episodes": len(episodes),
        "seconds_1_worker": round(seconds[1], 2),
        f"seconds_{CONCURRENT_WORKERS}_workers": round(seconds[CONCURRENT_WORKERS], 2),
    }


class LoopbackAgent:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers every request with `answer`
    after `latency_s`: a network-bound agent with no model behind it."""

    def __init__(
        self, latency_s: float,
        answer: str = "```python\ndef solution():\n    return None\n```\nVERDICT: ACCEPT",
    ) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                time.sleep(latency_s)
                # trinity streams its agent calls: one chunk of text, then the usage
                chunk = {"id": "loopback", "object": "chat.completion.chunk", "created": 0,
                         "model": "loopback"}
                events = [
                    {**chunk, "choices": [{
                        "index": 0, "finish_reason": "stop",
                        "delta": {"role": "assistant", "content": answer},
                    }]},
                    {**chunk, "choices": [], "usage": {
                        "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                    }},
                ]
                body = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)
                body += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def pool_toml(self, names: tuple[str, ...], key_env: str, price: float = 1.0) -> str:
        return "".join(
            f'[[agents]]\nname = "{name}"\nprovider = "openai"\nmodel = "loopback"\n'
            f'base_url = "{self.base_url}"\napi_key_env = "{key_env}"\n'
            f"price_in = {price}\nprice_out = {price}\nmax_tokens = 64\nretries = 0\n\n"
            for name in names
        )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def ray_ratios(sim_pool: Path) -> dict[str, Any]:
    """ray_speedup_1s_agent (4 Ray workers ÷ 1, loopback agents answering after 1 s) and
    ray_overhead_1_worker (1 Ray worker ÷ here, sim pool): the same episodes, cold caches each
    time, timed from the first episode handed out to the last result; the private cluster's
    start and each worker's model load come before."""
    try:
        import ray
    except ImportError:
        return {
            "ray_speedup_1s_agent": None, "ray_overhead_1_worker": None,
            "ray": "not installed (the ray extra)",
        }
    from trinity_cli.core.transcript import CURRENT_FORMAT
    from trinity_cli.pool.spec import load_pool
    from trinity_cli.providers.registry import build_agents
    from trinity_cli.runtime import backbone_of, memo_coordinator, open_caches
    from trinity_cli.tasks.taskset import load_humaneval
    from trinity_cli.train.ray_runner import connect, ray_runner
    from trinity_cli.train.runner import LocalRunner, Players

    tasks = load_humaneval()
    key_env = "TRINITY_BENCH_LOOPBACK_KEY"
    os.environ[key_env] = "loopback"  # before the cluster starts: its workers inherit it
    loopback = LoopbackAgent(NETWORK_LATENCY_S)
    scratch = Path(tempfile.mkdtemp(prefix="trinity-bench-"))
    network_pool = scratch / "loopback.toml"
    network_pool.write_text(loopback.pool_toml(("fast", "slow", "steady"), key_env))
    connect("local")
    try:

        def timed(pool_file: Path, workers: int | None) -> float:
            """Seconds for the episodes on `workers` Ray workers (None: here), cold caches."""
            pool = load_pool(str(pool_file))
            caches = open_caches(no_cache=True)
            agents = build_agents(
                pool.agents, tasks, caches.responses, coordinator_model=pool.coordinator.model
            )
            threads = CONCURRENT_WORKERS if any(a.remote for a in agents) else 1
            coordinator = memo_coordinator(pool, caches, sessions=threads)
            episodes = bench_episodes(tasks, len(agents), coordinator.hidden_size)
            if workers is None:
                started = time.perf_counter()
                LocalRunner(
                    Players(agents, caches.grader, {CURRENT_FORMAT.id: coordinator}), threads
                ).map(episodes, None)
                return time.perf_counter() - started
            with ray_runner(
                "local", workers, pool, tasks, threads=threads,
                coordinators={CURRENT_FORMAT.id: coordinator},
                backbone_sha256=backbone_of(pool).sha256, caches=caches, warn=lambda msg: None,
            ) as runner:
                started = time.perf_counter()
                runner.map(episodes, None)
                return time.perf_counter() - started

        one, four = timed(network_pool, 1), timed(network_pool, 4)
        here, on_ray = timed(sim_pool, None), timed(sim_pool, 1)
    finally:
        ray.shutdown()
        loopback.close()
    episodes = BENCH_EPISODES[0] * BENCH_EPISODES[1]
    return {
        "ray_speedup_1s_agent": round(one / four, 2),
        "ray_overhead_1_worker": round(on_ray / here, 3),
        "ray": {
            "episodes": episodes, "network_latency_s": NETWORK_LATENCY_S,
            "episodes_per_hour_1_worker": round(episodes * 3600 / one),
            "episodes_per_hour_4_workers": round(episodes * 3600 / four),
            "seconds_sim_here": round(here, 2), "seconds_sim_1_ray_worker": round(on_ray, 2),
        },
    }


def run_all(
    problem: Path, sim_pool: Path, repeats: int, generations: int,
    make_display: Callable[[Any], Callable[[Any], None]],
) -> dict[str, Any]:
    from trinity_cli.pool.spec import load_pool
    from trinity_cli.runtime import build_coordinator, coordinator_path

    pool = load_pool(None)
    coordinator = build_coordinator(pool)
    curve = prefix_reuse(coordinator, repeats)
    four_k = _transcript_of(coordinator, 4096)
    ids = coordinator.transcript_tokens(four_k) + coordinator.cue_tokens

    def full() -> float:
        coordinator.reset()
        return coordinator.encode(four_k).seconds

    reencode = _median(full, repeats)
    raw_by_config = raw_eval_seconds(coordinator_path(pool), ids, coordinator.n_threads, repeats)
    raw = min(t for t in raw_by_config.values() if t is not None)
    same_attention = raw_by_config[SAME_KERNELS]
    stream = streamed_call_share(coordinator, repeats, make_display)
    settings = tuning(coordinator)
    coordinator.close()
    training = train_throughput(sim_pool, generations)
    recorded = recorded_train_throughput()
    concurrency = concurrency_speedup(sim_pool)
    on_ray = ray_ratios(sim_pool)
    return {
        "prefix_reuse_speedup_4k": round(curve["4096"], 2),
        "prefix_reuse_curve": {k: round(v, 2) for k, v in curve.items()},
        "reencode_time_vs_raw": round(reencode / raw, 3), "reencode_seconds_4k": round(reencode, 3),
        "raw_eval_seconds_4k": round(raw, 3),
        "reencode_time_vs_raw_no_flash_attention": round(reencode / same_attention, 3)
        if same_attention
        else None,
        "raw_eval_seconds_4k_by_config": {
            k: None if v is None else round(v, 3) for k, v in raw_by_config.items()
        },
        "coordinator_share_2s_call": round(stream["overlapped"], 3),
        "coordinator_share_2s_call_non_overlapped": round(stream["non_overlapped"], 3),
        "coordinator_share_2s_call_displayed": round(stream["displayed"], 3),
        "reply": {
            "tokens": stream["reply_tokens"], "pieces": stream["pieces"], "seconds": REPLY_SECONDS,
            "coordinator_seconds_after_last_token": round(stream["seconds_after_last_token"], 3),
            "final_encode_seconds": round(stream["final_encode_seconds"], 3),
            "final_encode_tokens": stream["final_encode_tokens"],
        },
        "train_episodes_per_hour": training["episodes_per_hour"], "train": training,
        "recorded_train_episodes_per_hour_cold": recorded["cold"]["episodes_per_hour"],
        "recorded_train_episodes_per_hour_warm": recorded["warm"]["episodes_per_hour"],
        "recorded_train": {
            "pool": RECORDED_POOL, "tasks": RECORDED_TASKS, **PAPER_SCALE, "max_turns": 5,
            **recorded,
        },
        "train_concurrency_speedup": round(concurrency.pop("speedup"), 2),
        "train_concurrency": concurrency, **on_ray,
        "peak_rss_mb": round(
            peak_rss_mb(trinity_command() + ["solve", str(problem), "--max-turns", "2", "--quiet"]),
            1,
        ),
        "help_time_vs_bare_typer": round(help_ratio(repeats), 3), "threads": coordinator.n_threads,
        "n_batch": coordinator.n_batch, "tuning_reencode_seconds_1k": settings,
        "tokens_4k": len(ids),
    }
