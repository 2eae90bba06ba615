"""Training end to end on the example sim pool with the real Gemma coordinator.

One session-scoped training run (and one hidden-state memo) is shared by the tests, so the
suite stays within the CI budget.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from trinity_cli.config import parse_pool
from trinity_cli.coordinator.base import Encoding
from trinity_cli.coordinator.memo import MemoCoordinator
from trinity_cli.providers.cache import ResponseStore
from trinity_cli.providers.registry import build_agents
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import load_humaneval, select_split
from trinity_cli.train.baselines import evaluate
from trinity_cli.train.checkpoint import load
from trinity_cli.train.es import TrainSettings, train

SIM_POOL = Path(__file__).resolve().parent.parent / "examples" / "sim-pool.toml"
SETTINGS = TrainSettings(generations=120, popsize=16, sigma0=0.3, batch_size=48, seed=0, max_turns=1, project=10)


@pytest.fixture(scope="session")
def sim(tmp_path_factory, coordinator, gguf_path):
    from trinity_cli.coordinator.embedded import gguf_sha256

    root = tmp_path_factory.mktemp("sim")
    pool = parse_pool(SIM_POOL.read_text(), str(SIM_POOL))
    tasks = load_humaneval()
    memo = MemoCoordinator(coordinator, gguf_sha256(gguf_path), root / "hidden.sqlite")
    return {
        "root": root, "pool": pool, "tasks": tasks, "coordinator": memo,
        "train": select_split(tasks, "train"), "test": select_split(tasks, "test"),
        "grader": Grader(root / "grades.sqlite"),
    }


def agents_for(sim, store_name="responses.sqlite"):
    store = ResponseStore(sim["root"] / store_name)
    return build_agents(sim["pool"].agents, sim["tasks"], store), store


class ConstantCoordinator:
    """The control: every hidden state replaced by one constant vector."""

    def __init__(self, inner):
        self.inner = inner
        self.hidden_size = inner.hidden_size
        self.vector = None

    def encode(self, transcript):
        if self.vector is None:
            self.vector = self.inner.encode(transcript).hidden
        return Encoding(self.vector, 0.0, 0)


def paired_margin(a, b):
    """Mean of a − b over tasks, in standard errors of that mean."""
    d = np.asarray(a) - np.asarray(b)
    se = d.std(ddof=1) / np.sqrt(len(d))
    return d.mean() / se if se > 0 else (np.inf if d.mean() > 0 else 0.0)


def train_and_evaluate(sim, coordinator, ckpt):
    agents, _ = agents_for(sim)
    result = train(sim["train"], agents, coordinator, sim["grader"], SETTINGS, ckpt)
    report = evaluate(sim["test"], agents, coordinator, result.head, sim["grader"], max_turns=SETTINGS.max_turns)
    rows = {r.policy: r for r in report.pop("_rows")}
    return result, report, rows


@pytest.fixture(scope="session")
def trained(sim):
    return train_and_evaluate(sim, sim["coordinator"], sim["root"] / "trained.ckpt")


def test_trained_head_beats_random_and_every_single_agent_on_held_out_tasks(trained, sim):
    result, report, rows = trained
    assert report["tasks"] == len(sim["test"]) >= 40
    trained_row = rows["trained"]
    best = rows[report["best_single"]]
    assert paired_margin(trained_row.passes, rows["random"].passes) >= 2
    assert paired_margin(trained_row.passes, best.passes) >= 2, (trained_row.pass_at_1, best.policy, best.pass_at_1)
    assert rows["oracle"].pass_at_1 >= trained_row.pass_at_1
    assert report["rel_err_reduction_vs_best_single"] > 0
    assert result.history[-1]["mean"] > result.history[0]["mean"]


def test_control_with_a_constant_hidden_state_does_not_reach_the_margin(sim):
    _, report, rows = train_and_evaluate(sim, ConstantCoordinator(sim["coordinator"]), sim["root"] / "control.ckpt")
    best = rows[report["best_single"]]
    assert paired_margin(rows["trained"].passes, best.passes) < 2


def test_tags_can_be_read_from_hidden_states_with_a_linear_probe(sim):
    from trinity_cli.core.transcript import Transcript

    def states(tasks):
        return np.asarray([sim["coordinator"].encode(Transcript(t.problem)).hidden for t in tasks], dtype=np.float64)

    labels = sorted({t.tags[0] for t in sim["tasks"]})
    xtr, xte = states(sim["train"]), states(sim["test"])
    mean, std = xtr.mean(0), xtr.std(0) + 1e-6
    xtr, xte = (xtr - mean) / std, (xte - mean) / std
    ytr = np.eye(len(labels))[[labels.index(t.tags[0]) for t in sim["train"]]]
    w = np.linalg.solve(xtr.T @ xtr + 100.0 * np.eye(xtr.shape[1]), xtr.T @ ytr)
    predicted = (xte @ w).argmax(1)
    truth = np.array([labels.index(t.tags[0]) for t in sim["test"]])
    majority = np.bincount(truth).max() / len(truth)
    assert (predicted == truth).mean() > majority + 0.1


SMALL = TrainSettings(generations=6, popsize=6, sigma0=0.3, batch_size=8, seed=3, max_turns=2, project=8)


def test_resume_reaches_the_same_head_as_an_uninterrupted_run(sim):
    agents, _ = agents_for(sim)
    whole = train(sim["train"], agents, sim["coordinator"], sim["grader"], SMALL, sim["root"] / "whole.ckpt")
    ckpt = sim["root"] / "parts.ckpt"
    first = train(sim["train"], agents, sim["coordinator"], sim["grader"], SMALL, ckpt, stop_after=3)
    assert len(first.history) == 3
    resumed = train(sim["train"], agents, sim["coordinator"], sim["grader"], SMALL, ckpt, resume=True)
    assert resumed.history == whole.history
    assert np.array_equal(resumed.head.weights, whole.head.weights)  # exact: same floats, same order


def test_a_second_run_makes_no_provider_calls_and_reaches_the_same_head(sim):
    agents, store = agents_for(sim, "fresh-responses.sqlite")
    first = train(sim["train"], agents, sim["coordinator"], sim["grader"], SMALL, sim["root"] / "c1.ckpt")
    assert store.stats.misses > 0
    agents, store = agents_for(sim, "fresh-responses.sqlite")
    second = train(sim["train"], agents, sim["coordinator"], sim["grader"], SMALL, sim["root"] / "c2.ckpt")
    assert store.stats.misses == 0 and store.stats.hits > 0
    assert np.array_equal(first.head.weights, second.head.weights)
    assert second.spent_usd == pytest.approx(first.spent_usd)  # fitness uses the recorded cost


def test_budget_stops_between_generations_without_a_partial_tell(sim):
    agents, _ = agents_for(sim)
    settings = replace(SMALL, budget_usd=0.01)
    ckpt = sim["root"] / "budget.ckpt"
    result = train(sim["train"], agents, sim["coordinator"], sim["grader"], settings, ckpt)
    assert result.stopped_for_budget
    assert result.spent_usd <= 0.01
    assert len(result.history) < settings.generations
    if ckpt.exists():
        state = load(ckpt, {**asdict(settings), "tasks": [t.task_id for t in sim["train"]]})
        assert state["generation"] == len(result.history) == state["optimizer"].generation


def test_workers_overlap_remote_calls_and_leave_the_result_unchanged(sim, tmp_path):
    """Through the real OpenAI SDK against a slow loopback server: 4 workers keep several calls
    in flight, 1 worker keeps one, and both runs reach the same head."""
    from wire.server import WireServer, openai_stream

    from trinity_cli.config import AgentSpec

    settings = TrainSettings(generations=1, popsize=4, batch_size=2, seed=0, max_turns=1)
    reply = "```python\ndef f():\n    return None\n```"
    heads, in_flight = {}, {}
    for workers in (1, 4):
        server = WireServer()
        try:
            server.responses += [replace(openai_stream(reply), delay_s=0.3) for _ in range(24)]
            specs = [AgentSpec(name, "openai", "m", base_url=server.url + "/v1") for name in ("a", "b")]
            agents = build_agents(specs, sim["tasks"])
            result = train(sim["train"][:3], agents, sim["coordinator"], sim["grader"], settings,
                           tmp_path / f"w{workers}.ckpt", workers=workers)
        finally:
            server.close()
        heads[workers], in_flight[workers] = result.head.weights, server.max_in_flight
    assert in_flight[1] == 1 and in_flight[4] >= 2
    assert np.array_equal(heads[1], heads[4])
