"""The library calls behind `train`, `eval` and `solve`, used without the CLI, as a script would:
each with its defaults (no display, played here, no log)."""

from __future__ import annotations

import json

from support.cli import FAST_POOL, PROBLEM, SIM_POOL
from support.tasks import write_tasks

from trinity_cli.pool.spec import load_pool
from trinity_cli.runtime import FALLBACK, build_solver
from trinity_cli.store.runlog import RunLog
from trinity_cli.tasks.taskset import load_humaneval
from trinity_cli.train import workflow
from trinity_cli.train.es import TrainSettings
from trinity_cli.train.evaluation import evaluate_and_report, plan_eval
from trinity_cli.train.workflow import plan_job, train_and_save


def test_train_and_save_then_evaluate_and_report_then_solve(workdir, home):
    tasks = str(write_tasks(workdir / "tasks.jsonl", load_humaneval()[:10], "tags"))
    pool = load_pool(str(SIM_POOL))
    settings = TrainSettings(generations=2, popsize=2, batch_size=2, max_turns=1, project=2)
    job = plan_job(pool, tasks, workdir / "h.npz", settings, folds=0)
    assert job.imitations == ("best-fixed",) and not job.resume  # no folds: nothing to compare
    trained = train_and_save(job, log=False)
    written = {p.name for p in workdir.iterdir()}
    assert {"h.npz", "h.json", "h-plan.npz", "h-plan.json", "h.csv", "h.ckpt"} <= written
    assert len(trained.result.history) == 2 and trained.validation is None
    meta = json.loads((workdir / "h.json").read_text())
    assert meta["training"]["generations"] == 2 and meta["training"]["folds"] == 0

    warnings: list[str] = []
    heads = f"{job.out},{trained.plan_out}"
    evaluation = plan_eval(
        pool, tasks, heads, "all", max_turns=1, baselines="single", warn=warnings.append
    )
    assert evaluation.kinds == ("single",) and evaluation.names == ["trained:h", "trained:h-plan"]
    # --split all plays the tasks both heads were trained on: said for each, through `warn`
    assert [w.rsplit(": ", 1)[1] for w in warnings] == [str(job.out), str(trained.plan_out)]
    assert all(w.startswith("these tasks overlap the head's training split") for w in warnings)
    evaluated = evaluate_and_report(evaluation, log=False, out_dir=workdir)
    rows = [row.policy for row in evaluated.rows]
    assert rows[:2] == ["trained:h", "trained:h-plan"] and "single:sim-strings" in rows
    assert evaluated.report["tasks"] == 10 and not evaluated.report["partial"]
    assert (workdir / "eval-curve.csv").is_file()  # several heads: their quality/cost curve

    # sim agents answer only their task set: solve runs the real Gemma, with the fallback
    (workdir / "fast.toml").write_text(FAST_POOL)
    solver = build_solver(load_pool("fast.toml"), "none", PROBLEM.read_text(), 1, warn=print)
    assert solver.head.source == FALLBACK and solver.max_turns == 1
    result = solver.solve()
    assert result.verdict in ("accepted", "turn_limit", "no_answer", "tests_failed")
    assert len(result.turns) == 1
    with RunLog.open() as log:
        assert log.list_runs(10) == []  # log=False, and a Solver alone logs nothing


def test_train_says_how_far_it_got_until_the_search_starts(workdir, home, monkeypatch):
    """Before the first generation (best-fixed, cross-validation: minutes on a cold cache)
    train reports its progress on a clock, and stops once the search says where it starts."""
    monkeypatch.setattr(workflow, "PROGRESS_EVERY_S", 0.01)
    tasks = str(write_tasks(workdir / "tasks.jsonl", load_humaneval()[:4], "tags"))
    settings = TrainSettings(generations=2, popsize=2, batch_size=2, max_turns=2, project=2)
    job = plan_job(load_pool(str(SIM_POOL)), tasks, workdir / "h.npz", settings, folds=0)
    said: list[str] = []
    train_and_save(job, log=False, say=said.append)
    ticks = [i for i, line in enumerate(said) if line.startswith("still playing: ")]
    [start] = [i for i, line in enumerate(said) if line.startswith("start: best-fixed")]
    assert ticks and max(ticks) < start, said
    made = [int(said[i].split()[2].replace(",", "")) for i in ticks]
    assert made == sorted(made) and made[-1] > 0  # turns made so far, counting up
