"""The pool-agnostic head on the documented synthetic record (`support/learnable_record.py`):
trained on pools drawn from three agents, it must route a pool of three OTHER agents above that
pool's best single agent on held-out tasks, from their profiles alone (≥ 2 SE, fixed seeds);
with the profiles shuffled between those agents (a derangement) it must not. Then the product
path: `trinity profile`, `pool`, `eval --weights` with the saved head, profile keys and
refusals."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from support.cli import assert_clean_failure, trinity
from support.learnable_record import (
    MODELS,
    OTHER_MODELS,
    learnable_tasks,
    program,
    right,
    write_learnable,
)
from support.tasks import write_tasks

from trinity_cli.core.head import UniversalHead
from trinity_cli.core.profile import DEFINITION
from trinity_cli.errors import ConfigError
from trinity_cli.heads.files import load_head, save_head, universal_metadata
from trinity_cli.heads.profile_store import Scale, agent_key, full_key
from trinity_cli.pool.spec import load_pool
from trinity_cli.providers.registry import build_agents
from trinity_cli.runtime import backbone_of
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import load_tasks, select_split
from trinity_cli.train.baselines import HeadUnderTest, evaluate, paired_margin
from trinity_cli.train.es import TrainSettings
from trinity_cli.train.profile import calibration_tasks, problem_states, profile_agent
from trinity_cli.train.runner import LocalRunner, Players
from trinity_cli.train.universal import input_space, measure_profiles, train_universal

# fixed before any run on this record: the recorded pools' starting settings, one Worker pick
SETTINGS = TrainSettings(
    generations=30, popsize=8, sigma0=0.3, batch_size=32, seed=0, max_turns=1, project=4
)
CALIBRATION = 40


@pytest.fixture(scope="module")
def universal(tmp_path_factory, memo):
    root = tmp_path_factory.mktemp("universal")
    _, train_pool = write_learnable(root, MODELS, "train-pool.toml")
    _, other_pool = write_learnable(root, OTHER_MODELS, "other-pool.toml")
    tasks = learnable_tasks()
    train, test = select_split(tasks, "train"), select_split(tasks, "test")
    calibration = calibration_tasks(train, CALIBRATION)
    grader = Grader(root / "grades.sqlite")
    trained = train_universal(
        train, build_agents(load_pool(str(train_pool)).agents, tasks), calibration, memo, grader,
        SETTINGS, root / "universal.ckpt", pool_sizes=(2, 3),
    )
    others = build_agents(load_pool(str(other_pool)).agents, tasks)
    measured = measure_profiles(others, calibration, memo, trained.head, grader)
    profiles = np.array([p.vector() for p in measured])

    def scored(rows_of):
        report = evaluate(
            test, others, [HeadUnderTest("universal", trained.head.for_pool(rows_of), memo)],
            grader, max_turns=1,
        )
        rows = {r.policy: r for r in report.pop("_rows")}
        return rows, paired_margin(rows["universal"].passes, rows[report["best_single"]].passes)

    return {
        "root": root, "memo": memo, "tasks": tasks, "test": test, "calibration": calibration,
        "trained": trained, "train_pool": train_pool, "other_pool": other_pool,
        "measured": measured, "profiles": profiles, "grader": grader, "routed": scored(profiles),
        "shuffled": scored(profiles[[1, 2, 0]]),
    }


def test_a_universal_head_routes_a_pool_of_unseen_agents_from_their_profiles(universal):
    rows, margin = universal["routed"]
    assert len(universal["test"]) >= 30
    # no single agent solves it
    assert (
        max(rows[f"single:{m}"].pass_at_1 for m in OTHER_MODELS) <= 0.75
    )
    assert margin >= 2, {name: row.pass_at_1 for name, row in rows.items()}


def test_with_profiles_shuffled_between_the_agents_it_does_not(universal):
    rows, margin = universal["shuffled"]
    assert margin < 2, {name: row.pass_at_1 for name, row in rows.items()}
    assert rows["universal"].pass_at_1 < universal["routed"][0]["universal"].pass_at_1


def test_the_head_scores_agents_by_profile_alone_for_any_pool_size(universal):
    """Parameters independent of L; reordering the agents reorders their probabilities."""
    head = universal["trained"].head
    k, size = head.basis.shape[0], head.profiles.shape[1]
    assert head.params.size == UniversalHead.size(k, size, SETTINGS.max_turns)
    hidden = universal["trained"].head.mean + 1.0
    rng = np.random.default_rng(0)
    for n in (1, 3, 7):
        rows = rng.normal(size=(n, size))
        probs = head.for_pool(rows).choose(hidden, 1).agent_probs
        order = rng.permutation(n)
        assert np.allclose(head.for_pool(rows[order]).choose(hidden, 1).agent_probs, probs[order])


def test_the_start_plays_loop_of_the_best_agent_by_profile_on_any_pool(universal):
    """At three turns the search starts from the plan a user would write for a pool nobody trained
    on: the agent with the best profiled pass rate answers, the cheapest verifies, it answers again
    on a REJECT. Its choices are the `loop:` row's on every task (equal passes; the Verifier is the
    cheapest by profile, so $ may differ where answers' lengths reorder prices); and training
    never returns a head that scores below its start on the training tasks."""
    train = select_split(universal["tasks"], "train")
    pool = build_agents(load_pool(str(universal["train_pool"])).agents, universal["tasks"])
    start = input_space(
        train, pool, universal["memo"], SETTINGS.project, skill_weight=0.0, max_turns=3
    )
    # the space profiles were measured in
    assert (
        start.basis.tobytes() == universal["trained"].head.basis.tobytes()
    )
    others = build_agents(load_pool(str(universal["other_pool"])).agents, universal["tasks"])
    best = OTHER_MODELS[int(np.argmax([p.pass_rate for p in universal["measured"]]))]
    test = universal["test"][:12]
    report = evaluate(
        test, others,
        [HeadUnderTest("start", start.for_pool(universal["profiles"]), universal["memo"])],
        universal["grader"], max_turns=3, baselines=("loop",),
    )
    rows = {r.policy: r for r in report.pop("_rows")}
    assert rows["start"].passes == rows[f"loop:{best}"].passes
    # it can fail
    assert all(
        rows["start"].passes != rows[f"loop:{m}"].passes for m in OTHER_MODELS if m != best
    )
    assert 2 < rows["start"].mean_turns <= 3
    training = universal["trained"].training
    assert np.isfinite(training.start.fitness) and training.fitness >= training.start.fitness


def test_profile_of_a_replay_pool_is_exact(universal):
    """Recorded programs are graded: the pass rate is the share of calibration tasks whose
    recorded program is right; the offset is mean(Z) · skill."""
    calibration = universal["calibration"]
    for model, profile in zip(OTHER_MODELS, universal["measured"]):
        assert profile.pass_rate == pytest.approx(
            np.mean([program(model, t) == right(t) for t in calibration])
        )
        assert profile.n == len(calibration)
    states = problem_states(calibration, universal["memo"], universal["trained"].head)
    for profile in universal["measured"]:
        assert profile.offset == pytest.approx(states.mean(axis=0) @ np.array(profile.skill))
        assert profile.vector()[:3].tolist() == [profile.pass_rate, profile.cost, profile.offset]


def test_profile_of_pass_rate_records_is_their_recorded_probability():
    """EvalPerf records give probabilities, not 0/1: the profile's pass rate is their mean
    exactly."""
    tasks = load_tasks("evalperf")
    chosen = select_split(tasks, "train")[:6]
    pool = load_pool("evalperf-all")
    specs = [a for a in pool.agents if a.name in ("gpt-4o-mini", "llama-3-8b")]
    for spec, agent in zip(specs, build_agents(specs, tasks)):
        rates = [agent.provider.record.rates[(spec.model, t.task_id)].pass_rate for t in chosen]
        # not all 0/1: a graded pass rate could not match
        assert (
            len(set(rates)) > 1 or 0 < rates[0] < 1
        )
        profile = profile_agent(
            LocalRunner(Players([agent], Grader())), 0, spec.name, chosen,
            np.random.default_rng(1).normal(size=(len(chosen), 4)),
        )
        assert profile.pass_rate == pytest.approx(float(np.mean(rates)), abs=1e-12)


@pytest.fixture(scope="module")
def saved(universal, gguf_path):
    head = universal["trained"].head
    path = universal["root"] / "universal.npz"
    pool = load_pool(str(universal["other_pool"]))
    save_head(
        path, head,
        universal_metadata(backbone_of(pool), head.mean.shape[0], head, auto_select=False),
    )
    return path


def cli(universal, *args):
    return trinity(*args, "--pool", str(universal["other_pool"]), timeout=900)


def task_file(universal, folder):
    tasks = folder / "tasks.jsonl"
    write_tasks(tasks, universal["tasks"])
    return tasks


def test_profile_then_eval_with_the_saved_head_through_the_cli(universal, saved, tmp_path):
    tasks = task_file(universal, tmp_path)
    before = cli(
        universal, "eval", "--weights", str(saved), "--tasks", str(tasks), "--max-turns", "1",
        "--no-log",
    )
    # no profiles yet: exit 3, says why
    assert (
        before.returncode == 3 and "have none for it" in before.stderr
    )
    unready = cli(universal, "pool", "--json", "--weights", str(saved))
    assert (
        unready.returncode == 3
        and "have none for it" in json.loads(unready.stdout)["policy"]["reason"]
    )
    measured = cli(
        universal, "profile", "--tasks", str(tasks), "--n", str(CALIBRATION), "--weights",
        str(saved), "--json", "--no-log",
    )
    assert measured.returncode == 0, measured.stderr
    # no empty progress bar
    assert (
        "worst case $" in measured.stderr and "" not in measured.stderr.splitlines()
    )
    profiles = json.loads(measured.stdout)["agents"]
    assert [profiles[m]["pass_rate"] for m in OTHER_MODELS] == pytest.approx(
        [p.pass_rate for p in universal["measured"]]
    )
    again = cli(
        universal, "profile", "--tasks", str(tasks), "--n", str(CALIBRATION), "--weights",
        str(saved), "--no-log",
    )
    assert "profiling 0 of 3 agents" in again.stderr  # stored: nothing measured twice
    shown = json.loads(cli(universal, "pool", "--json", "--weights", str(saved)).stdout)
    assert shown["policy"]["source"] == str(saved)
    for agent, profile in zip(shown["agents"], universal["measured"]):
        assert (
            agent["profile"]["pass_rate"] == pytest.approx(profile.pass_rate)
            and agent["profile"]["age_days"] < 1
        )
    evaluated = cli(
        universal, "eval", "--weights", str(saved), "--tasks", str(tasks), "--max-turns", "1",
        "--json", "--no-log",
    )
    assert evaluated.returncode == 0, evaluated.stderr
    rows = {r["policy"]: r["pass_at_1"] for r in json.loads(evaluated.stdout)["rows"]}
    # JSON rounds
    assert rows["trained"] == pytest.approx(
        universal["routed"][0]["universal"].pass_at_1, abs=1e-4
    )


def test_profile_budget_is_never_exceeded(universal, saved, tmp_path):
    """Priced replay agents (about $0.003 for one agent's 10 answers): a $0.005 budget stops the
    run (exit 5) before the pool is done, and the run log's spend stays within it."""
    tasks = task_file(universal, tmp_path)
    result = cli(
        universal, "profile", "--tasks", str(tasks), "--n", "10", "--weights", str(saved),
        "--budget-usd", "0.005",
    )
    assert result.returncode == 5, result.stderr
    assert "--budget-usd" in result.stderr
    logged = json.loads(trinity("logs", "--json", "-n", "1").stdout)[0]
    assert logged["command"] == "profile" and 0 < logged["usd"] <= 0.005


def test_profile_keys_change_with_every_keyed_field_and_never_with_the_name(universal, tmp_path):
    spec = load_pool(str(universal["other_pool"])).agents[0]
    scale = Scale("coordinator-sha", "basis-sha")
    key = agent_key(spec, scale)
    assert agent_key(replace(spec, name="renamed"), scale) == key
    other_record = tmp_path / "other.jsonl"
    other_record.write_text("other bytes\n")
    changed = [
        replace(spec, model="generalist-b"), replace(spec, temperature=0.5),
        replace(spec, max_tokens=7), replace(spec, mode="chat"),
        replace(spec, base_url="http://127.0.0.1:1/v1"), replace(spec, seed=3),
        replace(spec, stop=("###",)), replace(spec, provider="openai"),
        replace(spec, record=str(other_record)),
    ]
    assert len({agent_key(s, scale) for s in changed} | {key}) == len(changed) + 1
    for other in (
        Scale("other-coordinator", "basis-sha"), Scale("coordinator-sha", "other-basis"),
        Scale("coordinator-sha", "basis-sha", "trinity-profile-v0"),
    ):
        assert agent_key(spec, other) != key
    ids = [t.task_id for t in universal["calibration"]]
    assert (
        len(
            {
                full_key(spec, scale, ids), full_key(spec, scale, ids[:-1]),
                full_key(spec, scale, ids[1:] + ids[:1]),
            }
        )
        == 3
    )


def test_solve_routes_with_the_shipped_universal_head_once_every_agent_has_a_profile(
    universal, tmp_path
):
    """The precedence's universal step: without profiles the fallback, saying which agents lack
    one; with them, the shipped universal head."""
    from trinity_cli.core.profile import Profile
    from trinity_cli.heads.files import UNIVERSAL, read_metadata, shipped_dir
    from trinity_cli.heads.profile_store import ProfileStore
    from trinity_cli.runtime import profile_scale

    pool = universal["root"] / "precedence-pool.toml"
    # agents no other test profiled
    pool.write_text(
        universal["other_pool"]
        .read_text()
        .replace('roles = ["worker"]', 'roles = ["worker"]\nseed = 11')
    )
    shipped = shipped_dir() / f"{UNIVERSAL}.npz"
    before = json.loads(trinity("pool", "--pool", str(pool), "--json").stdout)["policy"]
    assert before["source"] != str(shipped) and "needs profiles of" in before["reason"]
    store = ProfileStore()
    for spec in load_pool(str(pool)).agents:
        store.put(
            spec, profile_scale(read_metadata(shipped)), ["t"],
            Profile(0.5, (0.0,) * 4, 0.001, 1, 0.5),
        )
    store.close()
    after = json.loads(trinity("pool", "--pool", str(pool), "--json").stdout)["policy"]
    assert after["source"] == str(shipped) and "universal head" in after["reason"]


def test_a_head_with_another_profile_definition_is_refused(saved, tmp_path):
    meta = json.loads(saved.with_suffix(".json").read_text())
    meta["profile"]["definition"] = "trinity-profile-v0"
    other = tmp_path / "old.npz"
    other.write_bytes(saved.read_bytes())
    other.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match=f"this version measures {DEFINITION!r}"):
        load_head(other)


def test_profile_refuses_a_pool_specific_head_with_exit_3(universal):
    assert_clean_failure(
        cli(universal, "profile", "--weights", "ldb-mbpp", "--n", "10"), 3,
        "is a pool-specific head",
    )
