"""The bundled task sets and recorded pools: rebuilt byte for byte, in the documented format,
covering their task sets, shipped in the wheel, and listed by `trinity pool --list`."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.cli import trinity

from trinity_cli.errors import ConfigError, TaskFileError
from trinity_cli.pool import bundled
from trinity_cli.tasks.grading import Tests, grade, run_check
from trinity_cli.tasks.taskset import load_humaneval, load_tasks, select_split, task_set_names

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
PRICES = {  # USD per million tokens in / out, as the issue fixes them
    "gpt-4-1106-preview": (10.0, 30.0), "gpt-3.5-turbo-0613": (1.5, 2.0),
    "codellama-34b-instruct": (0.78, 0.78), "starcoder": (0.30, 0.30),
    "gpt-4o-2024-08-06": (2.5, 10.0), "gpt-4o-mini-2024-07-18": (0.15, 0.60),
    "claude-3-5-sonnet-20240620": (3.0, 15.0), "gemini-1.5-flash-002": (0.075, 0.30),
    "deepseek-chat-v3": (0.27, 1.10),
}
# Reference solutions the full run (all 500 MBPP) found failing: MBPP/436's returns a number
# where the tests want a tuple; MBPP/56's defines the asked-for function under another name.
WRONG_REFERENCES = {"MBPP/436", "MBPP/56"}


def build_script():
    spec = importlib.util.spec_from_file_location(
        "build_records", ROOT / "scripts" / "build_records.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def records(name: str) -> list[dict]:
    with gzip.open(bundled.record_path(name), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.skipif(not (SHARED / "ldb").is_dir(), reason=f"the source data {SHARED} is not here")
def test_the_script_rebuilds_every_derived_file_byte_for_byte(tmp_path):
    written = build_script().build(SHARED, tmp_path)
    rebuilt = {p.relative_to(tmp_path) for p in written}
    shipped = {
        p.relative_to(bundled.DATA)
        for folder in ("tasks", "records", "pools")
        for p in (bundled.DATA / folder).iterdir()
    } | {Path("manifest.json")}
    assert shipped <= rebuilt, f"shipped but not built: {shipped - rebuilt}"
    for rel in sorted(rebuilt):
        assert (bundled.DATA / rel).read_bytes() == (tmp_path / rel).read_bytes(), (
            f"{rel} differs: rerun the script"
        )


def test_every_record_line_is_in_the_documented_format():
    for pool in bundled.pools():
        for number, row in enumerate(records(pool.name), start=1):
            where = f"{pool.name}:{number}"
            assert isinstance(row["model"], str) and isinstance(row["task_id"], str), where
            if "pass_rate" in row:
                assert set(row) == {"model", "task_id", "pass_rate", "correct"}, where
                assert 0.0 <= row["pass_rate"] <= 1.0, where
                assert all(isinstance(c, str) and c for c in row["correct"]), where
            else:
                assert set(row) <= {
                    "model", "task_id", "code", "sample", "round", "tokens_in", "tokens_out",
                }, where
                assert isinstance(row["code"], str) and row["code"], where
                assert row.get("sample", 0) >= 0 and row.get("round", 0) >= 0, where


def test_each_pool_covers_its_task_set_and_its_toml_replays_its_models():
    for pool in bundled.pools():
        rows = records(pool.name)
        task_ids = {t.task_id for t in load_tasks(pool.task_set)}
        assert {r["model"] for r in rows} == set(pool.models)
        for model in pool.models:
            mine = [r for r in rows if r["model"] == model]
            assert {r["task_id"] for r in mine} == task_ids, (pool.name, model)
            if "code" in mine[0]:  # rounds run 0, 1, ..., k for every task
                rounds: dict[str, list[int]] = {}
                for r in mine:
                    rounds.setdefault(r["task_id"], []).append(r["round"])
                assert all(sorted(v) == list(range(len(v))) for v in rounds.values()), (
                    pool.name, model,
                )
        agents = tomllib.loads(pool.path.read_text("utf-8"))["agents"]
        assert tuple(a["model"] for a in agents) == pool.models
        for a in agents:
            assert a["provider"] == "replay" and a["record"] == pool.name
            assert (a["price_in"], a["price_out"]) == PRICES.get(
                a["model"], (a["price_in"], a["price_out"])
            )
            assert a["price_in"] > 0 and a["price_out"] > 0


def test_gpt4_keeps_no_repairs_and_the_others_keep_their_own():
    rows = records("ldb-humaneval")
    repaired = {r["model"] for r in rows if r["round"] > 0}
    # gpt-4-seed: another backbone
    assert repaired == {
        "gpt-3.5-turbo-0613", "codellama-34b-instruct", "starcoder",
    }


def test_mbpp_has_500_tasks_in_the_fixed_split_with_visible_tests():
    tasks = load_tasks("mbpp")
    assert len(tasks) == 500 and len({t.task_id for t in tasks}) == 500
    assert {int(t.task_id.removeprefix("MBPP/")) for t in tasks} == set(range(11, 511))
    assert len(select_split(tasks, "test")) == 177
    assert all(len(t.visible_tests) == 1 and t.has_tests and t.canonical_solution for t in tasks)
    assert not any(t.test.rstrip().endswith(f"check({t.entry_point})") for t in tasks)


def test_evalperf_has_118_normalised_tasks_and_marks_those_without_tests():
    tasks = load_tasks("evalperf")
    assert len(tasks) == 118 and not any(t.task_id.startswith("Mbpp/") for t in tasks)
    assert sum(t.task_id.startswith("HumanEval/") for t in tasks) == 29
    # 29 HumanEval + 42 MBPP: LDB lacks 38, MBPP/166 has another signature, EvalPlus revised 8
    assert sum(t.has_tests for t in tasks) == 71
    humaneval = {t.task_id: t for t in load_humaneval()}
    assert all(t == humaneval[t.task_id] for t in tasks if t.task_id in humaneval)
    assert all(
        t.test == "" and t.prompt.startswith(f"def {t.entry_point}(")
        for t in tasks
        if not t.has_tests
    )


def test_joined_task_sets_keep_a_shared_task_once():
    assert len(load_tasks("humaneval,mbpp")) == 664
    assert len(load_tasks("humaneval, evalperf")) == 164 + 89
    with pytest.raises(TaskFileError, match="humaneval, evalperf, mbpp"):
        load_tasks("humaneval,nope")


def test_reference_solutions_pass_the_grader():
    """A sample: the full run (all 500 MBPP, 46 s on 2 cores) passed all but WRONG_REFERENCES."""
    mbpp = [t for t in load_tasks("mbpp") if t.task_id not in WRONG_REFERENCES]
    sample = mbpp[::20] + [t for t in load_tasks("evalperf") if t.has_tests][::10]
    assert all(run_check(t, t.prompt + t.canonical_solution) for t in sample)


def test_reference_solutions_pass_their_visible_tests():
    """A sample: the full run passed 164/164 HumanEval and 498/500 MBPP (MBPP/436's reference is
    wrong; MBPP/367's visible assert needs the tree its hidden test builds)."""
    mbpp = [t for t in load_tasks("mbpp") if t.task_id not in WRONG_REFERENCES | {"MBPP/367"}]
    for task in load_humaneval()[::16] + mbpp[::50]:
        visible = Tests("file", source="\n".join(task.visible_tests) + "\n")
        assert grade(task.prompt + (task.canonical_solution or ""), visible, task.prompt).passed, (
            task.task_id
        )


def test_evalperf_correct_programs_pass_the_tests_they_are_graded_by():
    """A sample: all 1,670 (up to 5 a model and task) passed when the set was built."""
    tasks = {t.task_id: t for t in load_tasks("evalperf") if t.has_tests}
    first: dict[str, str] = {}
    for row in records("evalperf-api"):
        if row["task_id"] in tasks and row["correct"]:
            first.setdefault(row["task_id"], row["correct"][0])
    assert all(run_check(tasks[task_id], code) for task_id, code in sorted(first.items())[::3])


def test_a_path_wins_then_a_bundled_name_else_exit_3_listing_names(tmp_path, monkeypatch):
    assert bundled.pool_path("ldb-mbpp") == bundled.DATA / "pools" / "ldb-mbpp.toml"
    assert bundled.record_path("ldb-mbpp") == bundled.DATA / "records" / "ldb-mbpp.jsonl.gz"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ldb-mbpp").write_text("mine")
    assert bundled.pool_path("ldb-mbpp") == Path("ldb-mbpp")
    with pytest.raises(ConfigError) as caught:
        bundled.pool_path("no-such-pool")
    assert caught.value.exit_code == 3
    assert "evalperf-all, evalperf-api, ldb-humaneval, ldb-mbpp" in caught.value.message
    assert bundled.pool_names() == ["evalperf-all", "evalperf-api", "ldb-humaneval", "ldb-mbpp"]
    assert task_set_names() == ["humaneval", "evalperf", "mbpp"]


def test_pool_list_shows_the_bundled_pools_and_task_sets():
    listed = trinity("pool", "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert [(p["name"], p["task_set"], len(p["models"])) for p in data["pools"]] == [
        ("evalperf-all", "evalperf", 33), ("evalperf-api", "evalperf", 5),
        ("ldb-humaneval", "humaneval", 4), ("ldb-mbpp", "mbpp", 3),
    ]
    sizes = {
        s["name"]: (s["tasks"], s["train"], s["test"], s["with_tests"]) for s in data["task_sets"]
    }
    assert sizes == {
        "humaneval": (164, 107, 57, 164), "mbpp": (500, 323, 177, 500),
        "evalperf": (118, 72, 46, 71),
    }
    shown = trinity("pool", "--list")
    assert shown.returncode == 0 and "ldb-humaneval" in shown.stderr and "evalperf" in shown.stderr


def test_the_wheel_ships_the_data_and_stays_under_20_mb(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", str(ROOT), "-w", str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=600,
    )
    if (
        built.returncode
        and "hatchling" in built.stdout + built.stderr
        and "satisf" in built.stdout + built.stderr
    ):
        pytest.skip("pip cannot fetch the build backend (hatchling) here")
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.stat().st_size < 20 * 1024 * 1024
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in (
        "manifest.json", "NOTICE", "licenses/CC-BY-4.0.txt", "licenses/LDB-LICENSE.txt",
        "licenses/EvalPlus-LICENSE.txt", "licenses/HumanEval-MIT.txt", "tasks/mbpp.jsonl.gz",
        "tasks/evalperf.jsonl.gz", "tasks/humaneval-visible-tests.json",
        *(f"records/{p}.jsonl.gz" for p in bundled.pool_names()),
        *(f"pools/{p}.toml" for p in bundled.pool_names()),
    ):
        assert f"trinity_cli/data/{rel}" in names, rel


def test_the_model_split_holds_out_whole_families_and_each_model_once():
    split = json.loads((bundled.DATA / "manifest.json").read_text())["model_split"]
    agents = [
        a["name"]
        for a in tomllib.loads(bundled.pool_path("evalperf-all").read_text("utf-8"))["agents"]
    ]
    assert len(agents) == len(set(agents)) == 33  # o1-mini's two configurations kept once
    assert sorted(split["train"] + split["held_out"]) == sorted(agents)
    assert not set(split["train"]) & set(split["held_out"])
    assert sorted(name for members in split["families"].values() for name in members) == sorted(
        agents
    )
    for family, members in split["families"].items():
        sides = {name in split["held_out"] for name in members}
        assert len(sides) == 1, family  # a family is never on both sides
    # pools of 3-5 held-out, 2-6 training
    assert (
        len(split["held_out"]) >= 5 and len(split["train"]) >= 6
    )
