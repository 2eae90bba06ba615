"""`trinity` end to end, as a user runs it: the installed console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import (
    EXAMPLES,
    FAST_POOL,
    PROBLEM,
    SIM_POOL,
    TRINITY,
    assert_clean_failure,
    every_command,
    trinity,
)
from support.tasks import short_humaneval, write_tasks


@pytest.fixture()
def fast_pool(workdir: Path) -> Path:
    path = workdir / "fast.toml"
    path.write_text(FAST_POOL)
    return path


@pytest.mark.parametrize("command", every_command(), ids=" ".join)
def test_every_command_has_help_with_an_example_and_a_place_in_the_readme(command):
    # solve pool train eval profile bench doctor logs (show stats prune)
    assert (
        len(every_command()) >= 11
    )
    result = trinity(*command, "--help")
    assert (
        result.returncode == 0
        and "Usage" in result.stdout
        and "Example: trinity " + " ".join(command) in result.stdout
    )
    assert f"trinity {command[0]}" in (EXAMPLES.parent / "README.md").read_text()


def test_bare_help_works():
    result = trinity("--help")
    assert result.returncode == 0 and "Usage" in result.stdout


def test_version():
    from trinity_cli import __version__

    assert trinity("--version").stdout.strip() == f"trinity {__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["pool"]])
def test_help_and_pool_import_no_heavy_module(argv, workdir):
    code = (
        "import sys\nfrom trinity_cli.cli import app\n"
        f"try:\n    app({argv!r})\nexcept SystemExit:\n    pass\n"
        "heavy = ['llama_cpp', 'numpy', 'cmaes', 'openai', 'anthropic', 'google.genai', 'ray']\n"
        "print('LOADED=' + ','.join(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=False, text=True, cwd=workdir
    )
    assert "LOADED=\n" in result.stdout, result.stdout + result.stderr


def test_solve_a_problem_file_streams_turns_and_prints_only_the_answer(fast_pool):
    result = trinity("solve", str(PROBLEM), "--pool", str(fast_pool), "--max-turns", "2")
    assert result.returncode in (0, 6), result.stderr
    assert "turn  1" in result.stderr and "verdict" in result.stderr
    assert "turn  1" not in result.stdout and "verdict" not in result.stdout
    if result.stdout:  # a Worker answered: the answer is the signature plus its completion
        assert result.stdout.startswith("def add(a: int, b: int) -> int:")


@pytest.mark.parametrize("how", ["redirect", "pipe"])
def test_solve_reads_stdin(fast_pool, how):
    if how == "redirect":
        result = trinity(
            "solve", "-", "--pool", str(fast_pool), "--max-turns", "1", "--json",
            stdin=PROBLEM.read_text(),
        )
    else:
        result = subprocess.run(
            # a pipe needs no argument
            f"cat {PROBLEM} | {TRINITY} solve --pool {fast_pool} --max-turns 1 --json", shell=True,
            capture_output=True, check=False, text=True, timeout=300,
        )
    assert result.returncode in (0, 6), result.stderr
    assert json.loads(result.stdout)["turns"][0]["turn"] == 1


def test_json_carries_agent_and_role_for_every_turn(fast_pool):
    result = trinity(
        "solve", str(PROBLEM), "--pool", str(fast_pool), "--max-turns", "3", "--json", "--quiet"
    )
    assert result.returncode in (0, 6), result.stderr
    assert result.stderr == ""  # --quiet
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    assert data["verdict"] in ("accepted", "turn_limit", "no_answer", "tests_failed")
    assert isinstance(data["usd"], float) and "answer" in data
    # add.md's doctest
    assert (
        data["tests"]["source"] == "problem examples" and data["tests"]["count"] == 1
    )
    if data["verdict"] == "accepted":
        assert data["tests"]["passed"] is True
    assert data["turns"], data
    for turn in data["turns"]:
        assert turn["agent"] in ("gemma-greedy", "gemma-t08")
        assert turn["role"] in ("thinker", "worker", "verifier")
        assert turn["role_source"] in ("head", "thinker")
        assert set(turn["agent_probs"]) == {"gemma-greedy", "gemma-t08"}
        assert set(turn["role_probs"]) == {"thinker", "worker", "verifier"}
        assert abs(sum(turn["role_probs"].values()) - 1) < 1e-4
        for key in (
            "tokens_in", "tokens_out", "usd", "seconds", "coordinator_seconds",
            "coordinator_tokens",
        ):
            assert isinstance(turn[key], (int, float)), key
        assert (turn["verdict"] is not None) == (turn["role"] == "verifier")
    assert data["turns"][0]["coordinator_tokens"] > 0  # the shipped head reads the coordinator


def test_jsonl_streams_events_and_ends_with_the_final_object(fast_pool):
    result = trinity(
        "solve", str(PROBLEM), "--pool", str(fast_pool), "--max-turns", "2", "--jsonl", "--quiet"
    )
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "final" and kinds.count("final") == 1
    assert kinds[0] == "turn_start"
    assert kinds.count("turn_start") == kinds.count("turn_end")
    final = events[-1]
    assert final["schema_version"] == 1 and len(final["turns"]) == kinds.count("turn_end")
    assert result.returncode == {"accepted": 0}.get(final["verdict"], 6)


def test_fallback_pipeline_with_weights_none(fast_pool):
    result = trinity(
        "solve", str(PROBLEM), "--pool", str(fast_pool), "--weights", "none", "--max-turns", "2",
        "--json",
    )
    data = json.loads(result.stdout)
    assert [t["role"] for t in data["turns"]] == ["thinker", "worker"]
    assert all(t["coordinator_tokens"] == 0 for t in data["turns"])


def test_default_offline_pool_end_to_end(workdir):
    result = trinity("solve", str(PROBLEM), "--max-turns", "2")
    assert result.returncode in (0, 6), result.stderr
    assert "built-in offline default" in result.stderr
    assert "default-offline.npz" in result.stderr


def test_missing_empty_binary_and_directory_problems_exit_2(workdir):
    (workdir / "empty.md").write_text("  \n\t\n")
    (workdir / "binary.md").write_bytes(b"\x89PNG\x00\x01")
    (workdir / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    assert_clean_failure(trinity("solve", "missing.md"), 2, "problem file not found: missing.md")
    assert_clean_failure(trinity("solve", "empty.md"), 2, "is empty")
    assert_clean_failure(trinity("solve", "binary.md"), 2, "is binary")
    assert_clean_failure(trinity("solve", "latin1.md"), 2, "not UTF-8")
    assert_clean_failure(trinity("solve", str(workdir)), 2, "is a directory")
    assert_clean_failure(trinity("solve", "-", stdin=""), 2, "stdin is empty")


def test_a_folder_where_a_file_belongs_says_so(workdir):
    (workdir / "heads").mkdir()
    assert_clean_failure(
        trinity("pool", "--pool", "heads"), 3, "pool heads is a directory, not a pool file"
    )
    assert_clean_failure(
        trinity("solve", str(PROBLEM), "--weights", "heads/"), 3,
        "weights heads is a directory, not a head file",
    )
    assert_clean_failure(
        trinity("eval", "--tasks", "heads", "--weights", "none"), 2,
        "task set heads is a directory, not a JSONL file",
    )
    (workdir / "trinity.toml").mkdir()  # the pool file of this folder: not silently skipped
    assert_clean_failure(trinity("pool"), 3, "trinity.toml is a directory, not a pool file")


def test_a_misspelt_required_key_is_named_before_an_optional_one(workdir):
    (workdir / "p.toml").write_text('[[agents]]\nname="a"\nprovider="local"\nmodle="embedded"\n')
    assert_clean_failure(
        trinity("pool", "--pool", "p.toml"), 3, "unknown key agents[1].modle (did you mean "
        "agents[1].model?"
    )
    (workdir / "p.toml").write_text(
        '[defaults]\nmodle="embedded"\n[[agents]]\nname="a"\nprovider="local"\n'
    )
    assert_clean_failure(
        trinity("pool", "--pool", "p.toml"), 3, "unknown key defaults.modle (did you mean "
        "defaults.model?"
    )


def test_pool_warns_when_no_agent_may_verify(workdir):
    from trinity_cli.pool.spec import NO_VERIFIER

    agent = '[[agents]]\nname="a"\nprovider="sim"\nmodel="m"\nroles=["thinker", "worker"]\n'
    (workdir / "p.toml").write_text(agent)
    report = json.loads(trinity("pool", "--pool", "p.toml", "--json").stdout)
    assert report["warnings"] == [NO_VERIFIER]
    assert "warning: no agent may play verifier" in trinity("pool", "--pool", "p.toml").stderr
    # and every run says it before it starts (solve here stops at once: sim needs a task set)
    for run in (
        ("solve", str(PROBLEM), "--no-log"),
        ("eval", "--dry-run", "--tasks", "humaneval", "--weights", "none"),
        ("train", "--dry-run", "--tasks", "humaneval", "--out", "h.npz"),
    ):
        said = trinity(*run, "--pool", "p.toml").stderr
        assert said.startswith(f"warning: {NO_VERIFIER}\n"), said
    (workdir / "p.toml").write_text(agent.replace('"worker"]', '"worker", "verifier"]'))
    assert json.loads(trinity("pool", "--pool", "p.toml", "--json").stdout)["warnings"] == []


def test_json_and_jsonl_are_exclusive(workdir):
    assert_clean_failure(trinity("solve", str(PROBLEM), "--json", "--jsonl"), 2, "exclusive")


def test_bad_pool_toml_exits_3(workdir):
    (workdir / "bad.toml").write_text("[[agents]\n")
    assert_clean_failure(trinity("solve", str(PROBLEM), "--pool", "bad.toml"), 3, "invalid TOML")
    (workdir / "unknown.toml").write_text(
        '[[agents]]\nname="a"\nprovider="local"\nmodel="embedded"\nfoo=1\n'
    )
    assert_clean_failure(
        trinity("solve", str(PROBLEM), "--pool", "unknown.toml"), 3, "unknown key agents[1].foo"
    )


def test_unreadable_and_mismatched_weights_exit_3(fast_pool, workdir):
    shipped = (
        Path(__import__("trinity_cli.heads.files", fromlist=["x"]).shipped_dir())
        / "default-offline.npz"
    )
    (workdir / "bad.npz").write_bytes(b"garbage")  # metadata that fits, arrays that do not load
    (workdir / "bad.json").write_text(shipped.with_suffix(".json").read_text())
    assert_clean_failure(
        trinity("solve", str(PROBLEM), "--pool", str(fast_pool), "--weights", "bad.npz"), 3,
        "weights bad.npz is not a head: a head is an .npz archive",
    )
    checked = trinity("pool", "--pool", str(fast_pool), "--weights", "bad.npz")  # as solve would
    assert checked.returncode == 3 and "solve would stop: weights bad.npz is not a head" in (
        " ".join(checked.stderr.split())
    )
    (workdir / "other.npz").write_bytes(shipped.read_bytes())  # arrays that load
    (workdir / "other.json").write_text('{"format_version": 1, "hidden_size": 640, "agents": []}')
    assert_clean_failure(
        trinity("solve", str(PROBLEM), "--pool", str(fast_pool), "--weights", "other.npz"), 3,
        "do not fit this run",
    )
    assert_clean_failure(
        trinity("solve", str(PROBLEM), "--pool", str(fast_pool), "--weights", "nope.npz"), 3,
        "no head of that name",
    )
    (workdir / "one.toml").write_text(
        '[[agents]]\nname="solo"\nprovider="local"\nmodel="embedded"\n'
    )
    assert_clean_failure(
        trinity("solve", str(PROBLEM), "--pool", "one.toml", "--weights", str(shipped)), 3,
        "agents: head has [gemma-greedy=local:embedded, gemma-t08=local:embedded], "
        "this run has [solo=local:embedded]",
    )


def test_offline_refuses_remote_agents_and_missing_keys_exit_3(workdir):
    (workdir / "remote.toml").write_text(
        '[[agents]]\nname="gpt"\nprovider="openai"\nmodel="gpt-4o-mini"\n'
    )
    assert_clean_failure(
        trinity("solve", str(PROBLEM), "--pool", "remote.toml", "--offline"), 3,
        "--offline: agent gpt needs the network",
    )
    assert_clean_failure(
        trinity("solve", str(PROBLEM), "--pool", "remote.toml", "--weights", "none"), 3,
        "set OPENAI_API_KEY",
    )


def test_unreachable_server_is_exit_4(workdir):
    from conftest import free_port

    (workdir / "dead.toml").write_text(
        f'[[agents]]\nname="srv"\nprovider="openai"\nmodel="m"\nbase_url="http://127.0.0.1:{free_port()}/v1"\ntimeout_s=5\n'
    )
    result = trinity(
        "solve", str(PROBLEM), "--pool", "dead.toml", "--weights", "none", "--json", "--quiet"
    )
    assert result.returncode == 4
    assert json.loads(result.stdout)["verdict"] == "provider_error"
    assert "Traceback" not in result.stderr


def test_pool_lists_agents_and_usability(workdir):
    result = trinity("pool", "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert [a["name"] for a in data["agents"]] == ["gemma-greedy", "gemma-t08"]
    assert all(a["usable"] for a in data["agents"])
    (workdir / "notes.gguf").write_text("not a model")
    (workdir / "folder.gguf").mkdir()
    (workdir / "mixed.toml").write_text(
        '[[agents]]\nname="gpt"\nprovider="openai"\nmodel="m"\n'
        '[[agents]]\nname="file"\nprovider="local"\nmodel="/no/such.gguf"\n'
        '[[agents]]\nname="text"\nprovider="local"\nmodel="notes.gguf"\n'
        '[[agents]]\nname="folder"\nprovider="local"\nmodel="folder.gguf"\n'
    )
    result = trinity("pool", "--pool", "mixed.toml", "--json")
    assert result.returncode == 3
    details = {a["name"]: a for a in json.loads(result.stdout)["agents"]}
    assert not details["gpt"]["usable"] and "OPENAI_API_KEY" in details["gpt"]["detail"]
    assert not details["file"]["usable"] and "missing" in details["file"]["detail"]
    assert not details["text"]["usable"] and "not a GGUF file" in details["text"]["detail"]
    assert not details["folder"]["usable"] and "a directory" in details["folder"]["detail"]


def test_train_then_eval_on_a_small_task_file(workdir):
    tasks = short_humaneval(14)
    write_tasks(workdir / "tasks.jsonl", tasks, "tags")
    flags = ["--tasks", "tasks.jsonl", "--pool", str(SIM_POOL), "--max-turns", "1"]
    result = trinity(
        "train", *flags, "--out", "head.npz", "--generations", "2", "--popsize", "4",
        "--batch-size", "4", "--project", "4", "--sigma0", "0.3", "--folds", "2",
    )
    assert result.returncode == 0, result.stderr
    assert "gen 2/2" in result.stderr and "coordinator passes saved by the memo" in result.stderr
    assert (
        "start: best-fixed sim-" in result.stderr and "cross-validated (2 folds)" in result.stderr
    )
    meta = json.loads((workdir / "head.json").read_text())
    assert meta["trained"] is True and len(meta["training"]["history"]) == 2
    training = meta["training"]
    # one turn: one answer
    assert (
        training["start"]["plan"][0][1] == "worker" and len(training["start"]["plan"]) == 1
    )
    assert (
        training["validation"]["folds"] == 2
        and training["validation"]["tasks"] == training["n_tasks"] == 10
    )
    # --imitate auto: both cross-validated, ...
    assert set(training["starts"]) == {
        "best-fixed", "routed",
    }
    chosen = max(training["starts"], key=lambda name: training["starts"][name]["head_fitness"])
    assert training["imitate"] == chosen  # ... the better held-out head's start trained
    assert training["below_start"] == training["validation"]["below_start"]
    # the start's plan, a routing policy too
    plan = json.loads(
        (workdir / "head-plan.json").read_text()
    )
    assert plan["kind"] == "plan" and plan["training"]["plan_of"] == "head.npz"
    # one routes by default
    assert [meta.get("auto_select", True), plan.get("auto_select", True)].count(
        True
    ) == 1
    assert (workdir / "head.csv").read_text().splitlines()[
        0
    ] == "generation,best,mean,std,spent_usd"
    import importlib.util

    assert (workdir / "head.png").exists() == (importlib.util.find_spec("matplotlib") is not None)
    import llama_cpp

    assert (
        meta["numerics"]["llama_cpp"] == llama_cpp.__version__
        and meta["numerics"]["n_batch"] == 256
    )
    meta["numerics"]["llama_cpp"] = "0.0.1"  # as if trained before an upgrade
    meta["numerics"]["cpu_features"] += ",AVX9000"  # and on a CPU with one more feature
    (workdir / "head.json").write_text(json.dumps(meta))
    result = trinity("eval", *flags, "--weights", "head.npz", "--split", "all", "--json")
    assert result.returncode == 0, result.stderr
    assert "overlap the head's training split" in result.stderr
    assert "computed elsewhere (llama_cpp 0.0.1 (head) vs " in " ".join(result.stderr.split())
    assert (
        "cpu_features: the head's CPU had AVX9000, which this one lacks): states here may differ"
        in " ".join(result.stderr.split())
    )
    report = json.loads(result.stdout)
    assert report["schema_version"] == 1 and report["split"] == "all" and report["tasks"] == 14
    policies = [r["policy"] for r in report["rows"]]
    assert policies[:2] == ["trained", "random"] and policies[-1] == "oracle"
    assert {"pipeline:sim-strings", "single:sim-math", "loop:sim-lists", "cascade"} <= set(policies)
    # chosen on train: not with --split all
    assert (
        "best-fixed" not in policies and report["best_fixed"] is None
    )
    assert "best-fixed is left out: it is chosen on the train split" in " ".join(
        result.stderr.split()
    )
    assert report["max_turns"] == 1  # the head's, as trained
    for row in report["rows"]:
        assert set(row) == {
            "policy", "pass_at_1", "ci95", "expected_pass_at_1", "usd_per_task", "mean_turns",
        }
        assert 0 <= row["ci95"][0] <= row["pass_at_1"] <= row["ci95"][1] <= 1
        # no recorded probabilities here: the expected pass is the pass
        if (
            row["policy"] != "oracle"
        ):
            assert row["expected_pass_at_1"] == row["pass_at_1"]
    assert isinstance(report["rel_err_reduction_vs_best_single"], float)


def test_train_with_a_malformed_task_file_exits_2(workdir):
    (workdir / "bad.jsonl").write_text('{"task_id": "x"}\n')
    assert_clean_failure(
        trinity("train", "--tasks", "bad.jsonl", "--pool", str(SIM_POOL), "--out", "h.npz"), 2,
        "bad.jsonl:1: field 'prompt' is missing",
    )


def test_doctor_reports_isolation_agents_paths_and_backend(workdir, fast_pool, monkeypatch):
    from trinity_cli.tasks.sandbox import MODES

    monkeypatch.setenv("TRINITY_HOME", str(workdir / "home"))  # a home no run has logged to yet
    result = trinity("doctor", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["schema_version"] == 1
    assert report["sandbox"]["mode"] in MODES and report["sandbox"]["isolated"]
    assert [a["name"] for a in report["pool"]["agents"]] == ["gemma-greedy", "gemma-t08"]
    assert report["paths"]["cache"].startswith(os.environ["TRINITY_HOME"])
    assert report["coordinator"]["backend"] in ("CPU", "Metal", "GPU offload available")
    assert report["coordinator"]["threads"] >= 1
    log = Path(report["paths"]["run_log"]["path"])
    assert (
        log == workdir / "home" / "data" / "runs.sqlite"
        and report["paths"]["run_log"]["bytes"] is None
    )
    screen = trinity("doctor")
    assert screen.returncode == 0 and "sandbox" in screen.stderr and "coordinator" in screen.stderr
    assert f"run_log {log} (not created yet)" in screen.stderr
    # into a pipe a table keeps its natural width (Rich's 80 columns would wrap this row), and
    # COLUMNS still narrows it (passed explicitly: readline, once loaded, exports a COLUMNS of
    # its own to every child)
    row = "│ gemma-greedy │ local    │ embedded │ yes    │ embedded model package installed │"
    environ = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    for columns, shown in ((None, True), ("60", False)):
        env = environ if columns is None else {**environ, "COLUMNS": columns}
        table = subprocess.run(
            [TRINITY, "doctor"], capture_output=True, check=True, text=True, env=env
        )
        assert (row in table.stderr.splitlines()) == shown and "│ gemma-gree" in table.stderr
    # the width itself, with colours and without
    from trinity_cli.cli.console import PIPE_WIDTH

    width = "from trinity_cli.cli.console import stderr; print(stderr.width)"
    cases = (({}, PIPE_WIDTH), ({"NO_COLOR": "1"}, PIPE_WIDTH), ({"COLUMNS": "70"}, 70))
    for extra, expected in cases:
        printed = subprocess.run(
            [sys.executable, "-c", width], capture_output=True, check=True, text=True,
            env={**environ, **extra},
        )
        assert int(printed.stdout) == expected, extra

    assert trinity(
        "solve", str(PROBLEM), "--pool", str(fast_pool), "--max-turns", "1", "-q"
    ).returncode in (0, 6)
    beside = sorted(p.name for p in log.parent.iterdir())
    run_log = json.loads(trinity("doctor", "--json").stdout)["paths"]["run_log"]
    assert sorted(p.name for p in log.parent.iterdir()) == beside  # no -wal or -shm left behind
    size = run_log["bytes"]
    assert isinstance(size, int) and size == log.stat().st_size > 0 and run_log["problem"] is None
    assert f"run_log {log} ({size:,} bytes)" in trinity("doctor").stderr
    kept = log.read_bytes()
    log.write_bytes(b"not a database!!")  # what `trinity logs` refuses (exit 3), shown here too
    problem = json.loads(trinity("doctor", "--json").stdout)["paths"]["run_log"]["problem"]
    assert "file is not a database (move it aside to start a new log)" in problem
    assert "UNREADABLE: file is not a database" in " ".join(trinity("doctor").stderr.split())
    assert log.read_bytes() == b"not a database!!"  # doctor only reads
    log.write_bytes(kept)
    (workdir / "remote.toml").write_text(
        '[[agents]]\nname="gpt"\nprovider="openai"\nmodel="m"\napi_key_env="NOPE_KEY"\n'
    )
    assert trinity("doctor", "--pool", "remote.toml").returncode == 3


def test_bench_peak_rss_is_the_measured_process_alone():
    """Neither the measuring process's own memory (a forked child's ru_maxrss starts from its
    parent's image) nor an earlier, larger child may leak into the figure."""
    from trinity_cli.bench.measure import peak_rss_mb

    allocate = (
        "import sys; block = bytearray(int(sys.argv[1]) * 2**20); "
        "block[::4096] = b'x' * len(block[::4096])"
    )
    ballast = bytearray(400 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # this process now holds 400 MB
    big = peak_rss_mb([sys.executable, "-c", allocate, "300"])
    small = peak_rss_mb([sys.executable, "-c", allocate, "50"])
    del ballast
    assert big > 300 and 50 < small < 200


def test_bench_raw_side_survives_a_crashing_configuration(gguf_path):
    """Each raw configuration runs in its own process, so one that llama.cpp crashes on (its AMX
    kernels on recent Xeons) is reported as None; plain weights without flash attention, the
    coordinator's own kernels, always run."""
    from trinity_cli.bench.measure import RAW_CONFIGS, SAME_KERNELS, raw_eval_seconds

    seconds = raw_eval_seconds(gguf_path, list(range(1000, 1400)), threads=2, repeats=1)
    assert set(seconds) == set(RAW_CONFIGS)
    assert all(t is None or t > 0 for t in seconds.values())
    assert seconds[SAME_KERNELS] is not None


def test_a_stdout_that_cannot_take_the_output_is_exit_141_and_one_line(workdir, fast_pool):
    """A full disk or a stdout closed before the start loses the output: one line, exit 141 (a
    bug's exit 1 before); a stderr closed before the start only silences the display."""
    listing = [TRINITY, "pool", "--list", "--json"]
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            result = subprocess.run(
                listing, stdout=full, stderr=subprocess.PIPE, text=True, check=False
            )
        assert result.returncode == 141
        assert result.stderr == "error: cannot write to stdout: No space left on device\n"
        with open("/dev/full", "w") as full:  # a command that writes nothing there is unaffected
            quiet = subprocess.run(
                [TRINITY, "pool", "--list"], stdout=full,
                stderr=subprocess.DEVNULL, check=False,
            )
            version = subprocess.run(
                [TRINITY, "--version"], stdout=full, stderr=subprocess.PIPE, text=True,
                check=False,
            )
        assert quiet.returncode == 0 and version.returncode == 141, version.stderr

    def closed(fd: int):
        return lambda: os.close(fd)  # in the child, before exec: `>&-` / `2>&-`

    result = subprocess.run(
        listing, stderr=subprocess.PIPE, text=True, preexec_fn=closed(1), check=False
    )
    assert result.returncode == 141
    assert result.stderr == "error: cannot write to stdout: it is closed\n"
    solved = subprocess.run(
        [TRINITY, "solve", str(PROBLEM), "--pool", str(fast_pool), "--max-turns", "1", "--json"],
        stdout=subprocess.PIPE, text=True, preexec_fn=closed(2), timeout=300, check=False,
    )
    verdict = json.loads(solved.stdout)["verdict"]  # the output, all the same
    assert solved.returncode == (0 if verdict == "accepted" else 6), verdict
    if Path("/dev/full").exists():  # a stderr that fails (a full disk behind `2> log`) too
        with open("/dev/full", "w") as full:
            solved = subprocess.run(
                [TRINITY, "solve", str(PROBLEM), "--pool", str(fast_pool), "--max-turns", "1",
                 "--json"], stdout=subprocess.PIPE, stderr=full, text=True, timeout=300,
                check=False,
            )
        verdict = json.loads(solved.stdout)["verdict"]
        assert solved.returncode == (0 if verdict == "accepted" else 6), verdict
