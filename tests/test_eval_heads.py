"""`eval --weights` with several heads: one run, the same tasks, a row per head and the
quality/cost curve (JSON, CSV, and PNG with the plot extra)."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

from support.cli import EXAMPLES, trinity
from support.tasks import write_tasks

from trinity_cli.heads.files import shipped_dir

SIM_POOL = EXAMPLES / "sim-pool.toml"


def head_copy(to, cost_weight):
    source = shipped_dir() / "sim-pool.npz"
    shutil.copy(source, to)
    meta = json.loads(source.with_suffix(".json").read_text())
    meta["training"] = {**meta.get("training", {}), "cost_weight": cost_weight}
    to.with_suffix(".json").write_text(json.dumps(meta))


def test_several_heads_are_rows_of_one_run_with_their_cost_curve(workdir):
    from trinity_cli.tasks.taskset import load_humaneval

    tasks = load_humaneval()[:8]
    write_tasks(workdir / "t.jsonl", tasks, "tags")
    (workdir / "heads").mkdir()
    head_copy(workdir / "heads" / "w0.npz", 0.0)
    head_copy(workdir / "heads" / "w3.npz", 3.0)
    flags = [
        "--tasks", "t.jsonl", "--pool", str(SIM_POOL), "--split", "all", "--max-turns", "1",
        "--json",
    ]
    result = trinity("eval", *flags, "--weights", "heads/w0.npz,heads/w3.npz", "--out-dir", "out")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    policies = [r["policy"] for r in report["rows"]]
    assert (
        policies[:2] == ["trained:w0", "trained:w3"]
        and "cascade" in policies
        and policies[-1] == "oracle"
    )
    assert set(report["paired_margin_se"]) == {"vs_best_single", "vs_random", "vs_cascade"}
    assert [(c["head"], c["cost_weight"]) for c in report["curve"]] == [
        ("trained:w0", 0.0), ("trained:w3", 3.0),
    ]
    same = report["rows"][0]
    assert (
        report["curve"][0]["pass_at_1"] == same["pass_at_1"]
        and report["curve"][0]["usd_per_task"] == same["usd_per_task"]
    )
    with (workdir / "out" / "eval-curve.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert [(r["policy"], r["kind"]) for r in table][:2] == [
        ("trained:w0", "head"), ("trained:w3", "head"),
    ]
    assert {r["kind"] for r in table[2:]} == {"baseline"} and len(table) == len(report["rows"])
    assert (workdir / "out" / "eval-curve.png").exists() == (
        importlib.util.find_spec("matplotlib") is not None
    )

    # an earlier curve is never replaced (its .csv or its .png): the next free name, said
    (workdir / "out" / "eval-curve.csv").write_bytes(b"an earlier curve\n")
    (workdir / "out" / "eval-curve-2.png").write_bytes(b"an earlier picture")
    again = trinity("eval", *flags, "--weights", "heads", "--out-dir", "out")
    by_directory = json.loads(again.stdout)
    assert [r["policy"] for r in by_directory["rows"][:2]] == ["trained:w0", "trained:w3"]
    assert (workdir / "out" / "eval-curve.csv").read_bytes() == b"an earlier curve\n"
    assert (workdir / "out" / "eval-curve-2.png").read_bytes() == b"an earlier picture"
    assert not (workdir / "out" / "eval-curve-2.csv").exists()
    assert (workdir / "out" / "eval-curve-3.csv").read_bytes().startswith(b"policy,kind,")
    assert f"wrote {Path('out') / 'eval-curve-3.csv'}" in again.stderr
    (workdir / "notes.txt").write_text("mine")  # a file where the curve goes: refused at once
    (workdir / "gone").symlink_to(workdir / "nowhere")
    for out_dir, why in (
        ("notes.txt", f"{workdir / 'notes.txt'} is a file, not a folder"),
        ("notes.txt/sub", f"{workdir / 'notes.txt'} is a file, not a folder"),
        ("gone", f"{workdir / 'gone'} is a link to nothing"),
    ):
        refused = trinity("eval", *flags, "--weights", "heads", "--out-dir", out_dir, "--dry-run")
        assert refused.returncode == 2 and refused.stdout == "" and refused.stderr.endswith(
            f"error: --out-dir {out_dir}: {why}\n"
        ), refused.stderr
    assert (workdir / "notes.txt").read_text() == "mine"
    one = json.loads(trinity("eval", *flags, "--weights", "heads/w0.npz").stdout)
    assert one["rows"][0]["policy"] == "trained" and "curve" not in one
    assert not (workdir / "eval-curve.csv").exists()  # one head: no curve written
