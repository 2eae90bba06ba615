"""Build the head shipped for the built-in offline pool: weights/default-offline.npz.

    python scripts/make_default_head.py

It imitates the fallback pipeline (see trinity_cli/train/imitate.py) on the HumanEval train
split, from synthetic transcripts and from real fallback-pipeline episodes of the pool's own
agents; it is not trained for reward. `trinity train` replaces it with an evolved head.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trinity_cli.core.episode import run_episode
from trinity_cli.heads.files import metadata_for, save_head
from trinity_cli.pool.spec import load_pool
from trinity_cli.runtime import backbone_of, build_run
from trinity_cli.tasks.taskset import load_humaneval
from trinity_cli.train.imitate import fit_imitation_head, pipeline_transcripts

TURNS = 5
REAL_ROLLOUTS = 12
OUT = Path(__file__).resolve().parent.parent / "weights" / "default-offline.npz"


def main() -> None:
    pool = load_pool(None)
    tasks = [t for t in load_humaneval() if t.split == "train"]
    run = build_run(pool, tasks, no_cache=True)  # replies asked afresh, states encoded afresh
    coordinator, agents = run.coordinator(), run.agents
    fit_tasks, check_tasks = tasks[:60], tasks[60:80]

    def states_of(transcripts_per_task):
        states, turns = [], []
        for transcripts in transcripts_per_task:
            for turn, transcript in enumerate(transcripts, start=1):
                states.append(coordinator.encode(transcript).hidden)
                turns.append(turn)
        return np.asarray(states, dtype=np.float64), turns

    real = [rollout(task, agents) for task in tasks[80 : 80 + REAL_ROLLOUTS]]
    synthetic = [pipeline_transcripts(task, pool.names, TURNS) for task in fit_tasks]
    states, turns = states_of(synthetic + real)
    head, train_acc = fit_imitation_head(states, turns, len(pool.agents))
    check_states, check_turns = states_of(
        [pipeline_transcripts(t, pool.names, TURNS) for t in check_tasks]
    )
    held_out = np.mean(
        [_matches(head, s, t, len(pool.agents)) for s, t in zip(check_states, check_turns)]
    )
    meta = metadata_for(
        backbone_of(pool), pool, coordinator.hidden_size, numerics=coordinator.numerics,
        trained=False,
        init=(
            "imitation of the fallback pipeline (ridge regression on hidden states); "
            "not trained for reward"
        ),
        training={
            "tasks": "humaneval", "split": "train", "n_synthetic_tasks": len(fit_tasks),
            "n_real_rollouts": REAL_ROLLOUTS, "turns": TURNS,
            "imitation_accuracy_train": round(train_acc, 4),
            "imitation_accuracy_held_out": round(float(held_out), 4),
            "command": "python scripts/make_default_head.py",
        },
    )
    save_head(OUT, head, meta)
    print(f"wrote {OUT}: imitation accuracy train {train_acc:.3f}, held-out {held_out:.3f}")


def rollout(task, agents) -> list:
    """The transcripts a real fallback-pipeline episode with the pool's agents saw."""
    from trinity_cli.core.head import PipelinePolicy
    from trinity_cli.core.transcript import Transcript

    result = run_episode(task.problem, agents, None, PipelinePolicy(len(agents)), max_turns=TURNS)
    transcript = Transcript(task.problem)
    seen = [transcript]
    for record in result.turns[:-1]:
        transcript = transcript.with_turn(record.as_turn())
        seen.append(transcript)
    return seen


def _matches(head, state, turn, n_agents) -> bool:
    from trinity_cli.core.head import PipelinePolicy

    want = PipelinePolicy(n_agents).choose(None, turn)
    got = head.choose(state, turn)
    return bool(
        np.argmax(got.agent_probs) == np.argmax(want.agent_probs)
        and np.argmax(got.role_probs) == np.argmax(want.role_probs)
    )


if __name__ == "__main__":
    main()
