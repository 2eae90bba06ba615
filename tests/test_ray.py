"""`--ray`: train, eval and profile on a Ray cluster that this module starts on 127.0.0.1.

From cold caches a Ray run writes the head of a local run bit for bit (sim and replay pools) and
eval and profile report the same; a worker SIGKILLed in the middle of its episodes is replaced
and the head does not change; a killed driver resumes from its checkpoint; the budget holds
across workers, each paid call counted once; the API key reaches the agent from the workers'
environment and appears in no Ray log; `--ray local` leaves no Ray process behind.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import free_port
from support.cli import SIM_POOL, TRINITY
from support.tasks import short_humaneval, write_tasks
from support.wire.server import WireServer, openai_stream

RAY = str(Path(sys.executable).parent / "ray")
KEY_ENV = "TRINITY_TEST_RAY_KEY"
SECRET = "sk-ray-test-5f1c0c2a9e7b4d2f"  # only in the cluster's and the driver's environment
SIM_AGENTS = "".join(
    f'[[agents]]\nname = "{name}"\nprovider = "sim"\nmodel = "sim"\nskills = {{ {tag} = 0.9 }}\n\n'
    for name, tag in (("sim-strings", "string"), ("sim-lists", "list"))
)
# Ray's token authentication: on where RAY_AUTH_MODE=token, and a client given an explicit
# address uses it only when told (Ray's own rule); newer Ray releases also need the token itself
# (here a random one of this test cluster's, in the environment of the cluster and its clients)
ANSWER = "```python\ndef solution():\n    return None\n```\nVERDICT: ACCEPT"
TOKENS = 100 + len(ANSWER) // 4  # a loopback reply's prompt and completion tokens (its usage)


def loopback(latency_s: float) -> WireServer:
    """A network-bound agent with no model behind it: every request answered with ANSWER after
    `latency_s`, streamed (as trinity asks) with its usage."""
    reply = openai_stream(ANSWER, tokens_in=100)
    reply.delay_s = latency_s
    return WireServer(check=lambda body: reply)


def loopback_pool(server: WireServer, names: tuple[str, ...], price: float = 1.0) -> str:
    return "".join(
        f'[[agents]]\nname = "{name}"\nprovider = "openai"\nmodel = "loopback"\n'
        f'base_url = "{server.url}/v1"\napi_key_env = "{KEY_ENV}"\n'
        f"price_in = {price}\nprice_out = {price}\nmax_tokens = 64\nretries = 0\n\n"
        for name in names
    )


def keys_sent(server: WireServer) -> set[str]:
    """The API key of every request ("" for one sent without)."""
    return {
        next(
            (v for k, v in request["headers"].items() if k.lower() == "authorization"), ""
        ).removeprefix("Bearer ")
        for request in server.requests
    }


TOKEN_AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.urandom(32).hex()}
TRAIN = [
    "--max-turns", "2", "--generations", "3", "--popsize", "4", "--batch-size", "4", "--project",
    "4", "--sigma0", "0.3", "--seed", "3", "--folds", "0", "-q", "--no-log",
]


@pytest.fixture(scope="module")
def cluster():
    """A 2-CPU Ray head on 127.0.0.1 whose workers have the test key in their environment."""
    # short: Ray's socket paths have a limit
    temp = Path(
        tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    )
    port = free_port()
    started = subprocess.run(
        [
            RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
            "--num-cpus", "2", "--temp-dir", str(temp), "--include-dashboard", "false",
            "--disable-usage-stats",
        ],
        env={**os.environ, **TOKEN_AUTH, KEY_ENV: SECRET}, capture_output=True, text=True,
        check=False, timeout=120,
    )
    assert started.returncode == 0, started.stderr
    yield {"address": f"127.0.0.1:{port}", "temp": temp}
    # never `ray stop`: it would stop every Ray cluster on the machine
    stop_processes_under(
        str(temp)
    )
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    write_tasks(path, short_humaneval(6), "tags")
    return path


def run(*args: str, home: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    """trinity with its own TRINITY_HOME: a fresh one is a cold cache."""
    env = {**os.environ, **TOKEN_AUTH, "TRINITY_HOME": str(home), KEY_ENV: SECRET}
    return subprocess.run(
        [TRINITY, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def same_head(a: Path, b: Path) -> bool:
    one, two = np.load(a), np.load(b)
    return one.files == two.files and all(np.array_equal(one[k], two[k]) for k in one.files)


def worker_pids(temp: str) -> list[int]:
    """The EpisodeWorkers of the cluster at `temp`: children of its raylet, whose command line
    names temp (a worker's own names only its class), so another cluster's are never touched."""
    raylets = ",".join(line.split()[0] for line in processes_under(temp))
    found = subprocess.run(
        ["pgrep", "-P", raylets or "0", "-f", "ray::EpisodeWorker"],
        capture_output=True, text=True, check=False,
    )
    return [int(p) for p in found.stdout.split()]


def processes_under(temp: str) -> set[str]:
    """`pid command` of the processes whose command line names `temp` (a cluster's temp dir)."""
    found = subprocess.run(["pgrep", "-af", temp], capture_output=True, text=True, check=False)
    return {line for line in found.stdout.splitlines() if "pgrep" not in line}


def stop_processes_under(temp: str) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for line in processes_under(temp):
            try:
                os.kill(int(line.split()[0]), sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while processes_under(temp) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture(scope="module")
def local_sim_head(tasks_file, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("local")
    result = run(
        "train", "--tasks", str(tasks_file), "--pool", str(SIM_POOL), *TRAIN, "--out",
        str(root / "h.npz"), home=root / "home",
    )
    assert result.returncode == 0, result.stderr
    return root / "h.npz"


@pytest.mark.parametrize("pool", ["sim", "replay"])
def test_a_ray_run_from_cold_caches_writes_the_local_runs_head_and_eval_reports_the_same(
    pool, cluster, tasks_file, local_sim_head, tmp_path
):
    source = str(SIM_POOL) if pool == "sim" else "ldb-humaneval"
    local = local_sim_head
    if pool == "replay":
        local = tmp_path / "local.npz"
        result = run(
            "train", "--tasks", str(tasks_file), "--pool", source, *TRAIN, "--out", str(local),
            home=tmp_path / "l",
        )
        assert result.returncode == 0, result.stderr
    on_ray = tmp_path / "ray.npz"
    loud = [f for f in TRAIN if f != "-q"]
    result = run(
        "train", "--tasks", str(tasks_file), "--pool", source, *loud, "--out", str(on_ray), "--ray",
        cluster["address"], "--ray-workers", "2", home=tmp_path / "r",
    )
    assert result.returncode == 0, result.stderr
    assert "playing on 2 Ray workers" in result.stderr
    assert "grades run: 0;" not in result.stderr  # the workers' figures reach the driver's summary
    assert same_head(local, on_ray)
    if pool == "sim":  # eval: every row the same, from a cold cache again
        flags = [
            "eval", "--tasks", str(tasks_file), "--split", "all", "--pool", source, "--weights",
            str(local), "--max-turns", "2", "--json", "--no-log",
        ]
        here = run(*flags, home=tmp_path / "e1")
        there = run(*flags, "--ray", cluster["address"], home=tmp_path / "e2")
        assert here.returncode == 0 and there.returncode == 0, here.stderr + there.stderr
        assert json.loads(here.stdout)["rows"] == json.loads(there.stdout)["rows"]


def test_profile_on_ray_gives_the_local_profiles(cluster, tasks_file, tmp_path):
    flags = [
        "profile", "--pool", "ldb-humaneval", "--tasks", str(tasks_file), "--n", "4", "--json",
        "--no-log",
    ]
    here = run(*flags, home=tmp_path / "p1")
    there = run(*flags, "--ray", cluster["address"], "--ray-workers", "2", home=tmp_path / "p2")
    assert here.returncode == 0 and there.returncode == 0, here.stderr + there.stderr
    profiles = [
        {
            name: {k: v for k, v in p.items() if k != "created"}
            for name, p in json.loads(r.stdout)["agents"].items()
        }
        for r in (here, there)
    ]
    assert profiles[0] == profiles[1] and len(profiles[0]) == 4


def test_a_worker_killed_mid_episode_is_replaced_and_the_head_does_not_change(
    cluster, tasks_file, tmp_path
):
    """Sim agents and one agent behind a loopback server that answers after 1 s: the kill lands
    while episodes wait on it."""
    server = loopback(1.0)
    try:
        pool = tmp_path / "mixed.toml"
        pool.write_text(SIM_AGENTS + loopback_pool(server, ("remote",)))
        local = run(
            "train", "--tasks", str(tasks_file), "--pool", str(pool), *TRAIN, "--out",
            str(tmp_path / "local.npz"), home=tmp_path / "l",
        )
        assert local.returncode == 0, local.stderr
        calls_local = len(server.requests)
        proc = subprocess.Popen(
            [
                TRINITY, "train", "--tasks", str(tasks_file), "--pool", str(pool), *TRAIN, "--out",
                str(tmp_path / "ray.npz"), "--ray", cluster["address"], "--ray-workers", "2",
            ],
            env={**os.environ, **TOKEN_AUTH, "TRINITY_HOME": str(tmp_path / "r"), KEY_ENV: SECRET},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 300
        # episodes in flight on both workers
        while (
            len(server.requests) < calls_local + 3 or len(worker_pids(str(cluster["temp"]))) < 2
        ):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.2)
        os.kill(worker_pids(str(cluster["temp"]))[0], signal.SIGKILL)
        _, stderr = proc.communicate(timeout=600)
    finally:
        server.close()
    assert proc.returncode == 0, stderr
    assert "died; replaced it" in stderr
    assert same_head(tmp_path / "local.npz", tmp_path / "ray.npz")


def test_a_driver_killed_with_sigkill_resumes_to_the_local_head(
    cluster, tasks_file, local_sim_head, tmp_path
):
    flags = [
        "train", "--tasks", str(tasks_file), "--pool", str(SIM_POOL), *TRAIN, "--out",
        str(tmp_path / "h.npz"), "--ray", cluster["address"], "--ray-workers", "2",
    ]
    env = {**os.environ, **TOKEN_AUTH, "TRINITY_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [TRINITY, *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    checkpoint = tmp_path / "h.ckpt"
    deadline = time.monotonic() + 300
    while not checkpoint.exists():  # one generation done: kill in the middle of the next
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = pickle.loads(checkpoint.read_bytes())
    state["history"][0]["best"] = (
        123.0  # a mark only the checkpoint holds: a run that ignored it would recompute
    )
    checkpoint.write_bytes(pickle.dumps(state))
    resumed = run(*flags, "--resume", home=tmp_path / "home")
    assert resumed.returncode == 0, resumed.stderr
    assert same_head(local_sim_head, tmp_path / "h.npz")
    history = json.loads((tmp_path / "h.json").read_text())["training"]["history"]
    assert history[0]["best"] == 123.0 and len(history) == 3


def test_the_budget_holds_across_workers_and_the_key_stays_out_of_rays_logs(
    cluster, tasks_file, tmp_path
):
    """Four workers on network-bound agents: together they stop before passing the budget (what
    the server was paid for and the run's account), and the key the agents received is in no
    file of Ray's, the run's or the caches'."""
    server = loopback(0.2)
    try:
        pool = tmp_path / "paid.toml"
        pool.write_text(loopback_pool(server, ("a", "b", "c"), price=100.0))  # $0.0115 a call
        flags = [f for f in TRAIN if f != "--no-log"]
        result = run(
            "train", "--tasks", str(tasks_file), "--pool", str(pool), *flags, "--out",
            str(tmp_path / "h.npz"), "--budget-usd", "0.5", "--ray", cluster["address"],
            "--ray-workers", "4", home=tmp_path / "home",
        )
    finally:
        server.close()
    assert result.returncode == 5, result.stderr
    paid = len(server.requests) * TOKENS * 100.0 / 1e6
    assert 0 < paid <= 0.5
    logged = json.loads(run("logs", "-n", "1", "--json", home=tmp_path / "home").stdout)[0]
    # the run's own account (which also prices replies the cache answered) bounds what was paid
    assert logged["command"] == "train" and paid - 1e-9 <= logged["usd"] <= 0.5
    assert keys_sent(server) == {SECRET}
    assert SECRET not in result.stdout + result.stderr
    leaked = [
        p
        for root in (cluster["temp"], tmp_path)
        for p in root.rglob("*")
        if p.is_file() and SECRET.encode() in p.read_bytes()
    ]
    assert leaked == []


def test_ray_local_starts_a_private_cluster_and_leaves_no_ray_process(tasks_file, tmp_path):
    """The private cluster's processes are the ones under its temp dir (RAY_TMPDIR)."""
    temp = tempfile.mkdtemp(prefix="rl-", dir="/tmp")
    seen: set[str] = set()
    proc = subprocess.Popen(
        [
            TRINITY, "eval", "--tasks", str(tasks_file), "--split", "all", "--pool", str(SIM_POOL),
            "--weights", "none", "--max-turns", "1", "--json", "--no-log", "--ray", "local",
            "--ray-workers", "1",
        ],
        env={**os.environ, "TRINITY_HOME": str(tmp_path / "home"), "RAY_TMPDIR": temp},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    while proc.poll() is None:
        seen |= processes_under(temp)
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr
    assert json.loads(stdout)["rows"]
    assert seen, "no Ray process ran under the private cluster's temp dir"
    time.sleep(2)
    assert processes_under(temp) == set()
    shutil.rmtree(temp, ignore_errors=True)


def test_an_unreachable_cluster_a_bad_address_and_ray_workers_without_ray_are_one_line_errors(
    tmp_path, tasks_file
):
    flags = ["eval", "--tasks", str(tasks_file), "--pool", str(SIM_POOL), "--weights", "none"]
    for address, code in ((f"127.0.0.1:{free_port()}", 3), ("nonsense-address", 2)):
        started = time.monotonic()
        result = run(*flags, "--ray", address, home=tmp_path / "home", timeout=300)
        assert result.returncode == code, result.stderr
        assert time.monotonic() - started < 60
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"error: --ray {address}"), result.stderr
    result = run("train", "--ray-workers", "2", home=tmp_path / "home")
    assert result.returncode == 2 and "--ray-workers needs --ray" in result.stderr


def test_workers_never_ask_for_more_cpus_than_the_cluster_has():
    from trinity_cli.train.ray_runner import cpu_shares

    assert cpu_shares(None, 2, network_bound=True) == (4, 0.5)  # 4 network-bound workers on 2 CPUs
    assert cpu_shares(None, 2, network_bound=False) == (2, 1.0)
    assert cpu_shares(1, 2, network_bound=False) == (1, 2.0)  # one worker: both CPUs, 2 threads
    for workers, network_bound in ((4, False), (6, True), (3, False)):
        n, cpus = cpu_shares(workers, 2, network_bound)
        assert n == workers and n * cpus <= 2 + 1e-9


def test_a_worker_with_other_numerics_is_named_with_the_driver():
    from trinity_cli.train.ray_runner import identity_mismatch, worker_identity

    driver = worker_identity({"llama_cpp": "0.3.16", "cpu_features": "AVX2"}, 1)
    assert identity_mismatch(driver, dict(driver)) is None
    message = identity_mismatch(driver, {**driver, "cpu_features": "AVX512"})
    assert message == "cpu_features: driver 'AVX2', worker 'AVX512'"


def test_a_dead_workers_settled_spend_is_taken_back_and_its_call_in_flight_counts():
    """The keeper's account when a worker dies mid-task: its rerun settles the same replies again
    (from the cache), so what the dead try settled is taken back; its call in flight may have
    been billed, so it counts at its reservation."""
    from trinity_cli.core.budget import Budget
    from trinity_cli.train.ray_runner import Keeper, budget_state

    keeper = Keeper({"replies": None, "grades": None, "states": None})
    keeper.load_budget(budget_state(Budget(1.0)))
    assert keeper.reserve(0.3, "1") is None
    keeper.settle(0.1, 0.3, "1")  # a call the dead try finished
    assert keeper.reserve(0.3, "1") is None  # in flight when the worker died
    assert keeper.reserve(0.2, "2") is None  # another worker's, finished
    keeper.settle(0.05, 0.2, "2")
    keeper.finished("2")
    keeper.void("1")
    state = keeper.budget_state()
    assert state["spent_usd"] == pytest.approx(0.05 + 0.3) and state[
        "reserved_usd"
    ] == pytest.approx(0.0)
    assert keeper.reserve(0.3, "3") is None  # the rerun: its cached reply settles once more
    keeper.settle(0.1, 0.3, "3")
    assert keeper.budget_state()["spent_usd"] == pytest.approx(0.05 + 0.3 + 0.1)


def test_without_ray_it_is_never_imported(tmp_path, tasks_file):
    code = (
        "import sys\nfrom trinity_cli.cli import main\n"
        f"sys.argv = ['trinity', 'eval', '--tasks', {str(tasks_file)!r}, '--pool', "
        f"{str(SIM_POOL)!r}, '--weights', 'none',"
        " '--max-turns', '1', '--json', '--no-log']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nprint('RAY=' + str('ray' in sys.modules), "
        "file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "TRINITY_HOME": str(tmp_path / "h")},
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert "RAY=False" in result.stderr, result.stderr
