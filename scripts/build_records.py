"""Build the bundled task sets and recorded pools from the public records in ../shared/data.

    python scripts/build_records.py [--data DIR] [--out DIR]

Reads `<repo>/../shared/data` (its README says what each file holds) and writes, under
`trinity_cli/data/`:

- `tasks/mbpp.jsonl.gz`: LDB's 500 MBPP problems; the trailing `check(<entry_point>)` call
  is stripped from each `test` (our grader calls `check` itself), MBPP's one visible assert
  kept as `visible_tests`. `canonical_solution` is a whole program here (prompt + it still
  runs: it redefines the prompt's stub); MBPP/436's is wrong in the source (the tests expect
  a tuple) and MBPP/56's defines the function asked for under another name; both kept.
- `tasks/evalperf.jsonl.gz`: EvalPerf's 118 tasks, ids normalised (`Mbpp/N` -> `MBPP/N`):
  HumanEval tasks from LDB's copy of HumanEval, MBPP tasks from LDB's MBPP where LDB has the
  task with the entry point EvalPerf's programs define and EvalPlus did not revise it; the
  rest (47) have no tests (`test` is "") and a prompt recovered from the recorded programs
  (EvalPerf keeps no problem text): the signature most programs define and the "Write a ..."
  statement they quote most (LDB's, where LDB has the task), else their most common
  docstring line.
- `tasks/humaneval-visible-tests.json`: LDB's visible asserts per HumanEval task.
- `records/<pool>.jsonl.gz` in the format of trinity_cli/pool/bundled.py, `pools/<pool>.toml`,
  `manifest.json` (each pool's task set and models, and `model_split`: the training and
  held-out models of the pool-agnostic head, by family), and the sources' licences.
  `evalperf-all` holds every EvalPerf model once, with at most 2 correct programs each.

Every output is deterministic: sorted keys, a stable order, gzip with mtime 0 and no file
name, so tests/test_records.py can check that a rebuild gives the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import re
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "trinity_cli" / "data"
# LDB prepends this to every program it runs; the model did not write it.
LDB_HEADER = (
    "from typing import *\nimport math\nfrom heapq import *\nimport itertools\nimport re\n"
    "import typing\nimport heapq\n_str=str\nimport re\n"
)
EVALPERF_SUFFIX = "_evalperf_results.brief.json"
# EvalPlus revised these MBPP tasks (expected values, types, arity): EvalPerf's correct programs
# fail LDB's tests for them (measured: 0 of 15-25 passed, MBPP/111 15 of 25), so they get no tests.
MBPP_PLUS_REVISED = (
    "MBPP/16", "MBPP/75", "MBPP/111", "MBPP/130", "MBPP/137", "MBPP/140", "MBPP/296", "MBPP/433",
)
ASSUMED = "no list price: an ASSUMED hosted rate for an open-weights model of its size"


@dataclass(frozen=True)
class Model:
    agent: str  # the agent's name in the pool
    model: str  # the model's name in the record
    source: str  # LDB: the seed folder; EvalPerf: the results file's <model>_<backend>_<settings>
    price_in: float  # USD per million tokens
    price_out: float
    repairs: str | None = None  # LDB results folder holding this model's repairs of its own seeds
    price_note: str = "list price at the records' time"


# gpt-4-seed holds another backbone's repairs of gpt-4's seeds: gpt-4 is replayed without repairs.
LDB_MODELS: dict[str, tuple[Model, ...]] = {
    "humaneval": (
        Model("gpt-4", "gpt-4-1106-preview", "gpt-4-1106-preview", 10.0, 30.0),
        Model(
            "gpt-3.5", "gpt-3.5-turbo-0613", "gpt-3.5-turbo-0613", 1.5, 2.0, "gpt-3.5-turbo-0613"
        ),
        Model(
            "codellama-34b", "codellama-34b-instruct", "codellama", 0.78, 0.78, "codellama",
            f"{ASSUMED} (~34B)",
        ),
        Model("starcoder", "starcoder", "starcoder", 0.30, 0.30, "starcoder", f"{ASSUMED} (~15B)"),
    ),
}
LDB_MODELS["mbpp"] = LDB_MODELS["humaneval"][1:]  # LDB has no gpt-4 run on MBPP
EVALPERF_MODELS = (
    Model("gpt-4o", "gpt-4o-2024-08-06", "gpt-4o-2024-08-06_openai_temp_1.0", 2.5, 10.0),
    Model(
        "gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o-mini-2024-07-18_openai_temp_1.0", 0.15,
        0.60,
    ),
    Model(
        "claude-3.5-sonnet", "claude-3-5-sonnet-20240620",
        "claude-3-5-sonnet-20240620_bedrock_temp_1.0", 3.0, 15.0,
    ),
    Model(
        "gemini-1.5-flash", "gemini-1.5-flash-002", "gemini-1.5-flash-002_google_temp_1.0", 0.075,
        0.30,
    ),
    Model("deepseek-v3", "deepseek-chat-v3", "deepseek-chat-v3_openai_temp_1.0", 0.27, 1.10),
)


def open_rate(size: str, rate: float) -> tuple[float, float, str]:
    return rate, rate, f"{ASSUMED} ({size})"


# `evalperf-all`: every EvalPerf model once (o1-mini's default-prompt run; o1-preview has only its
# perf-instruct run), for the pool-agnostic head.
# family -> ((agent, results file stem, in, out, note)...)
EVALPERF_FAMILIES: dict[str, tuple[tuple[str, str, float, float, str], ...]] = {
    "openai": (
        ("gpt-4o", "gpt-4o-2024-08-06_openai_temp_1.0", 2.5, 10.0, ""),
        ("gpt-4o-mini", "gpt-4o-mini-2024-07-18_openai_temp_1.0", 0.15, 0.60, ""),
        ("o1-mini", "o1-mini-2024-09-12_openai_temp_1.0", 3.0, 12.0, ""),
        ("o1-preview", "o1-preview-2024-09-12_openai_temp_1.0-perf-instruct", 15.0, 60.0, ""),
    ),
    "anthropic": (
        ("claude-3.5-sonnet", "claude-3-5-sonnet-20240620_bedrock_temp_1.0", 3.0, 15.0, ""),
    ),
    "gemini": (
        ("gemini-1.5-flash", "gemini-1.5-flash-002_google_temp_1.0", 0.075, 0.30, ""),
        ("gemini-1.5-pro", "gemini-1.5-pro-002_google_temp_1.0", 1.25, 5.0, ""),
    ),
    "gemma": (
        ("gemma-2-9b", "google--gemma-2-9b-it_vllm_temp_1.0", *open_rate("~9B", 0.10)),
        ("gemma-2-27b", "google--gemma-2-27b-it_vllm_temp_1.0", *open_rate("~27B", 0.78)),
    ),
    "deepseek": (
        ("deepseek-v2.5", "deepseek-chat-v2.5_openai_temp_1.0", 0.14, 0.28, ""),
        ("deepseek-v3", "deepseek-chat-v3_openai_temp_1.0", 0.27, 1.10, ""),
        (
            "deepseek-coder-v2-lite", "deepseek-ai--DeepSeek-Coder-V2-Lite-Instruct_vllm_temp_1.0",
            *open_rate("16B MoE", 0.30),
        ),
        (
            "deepseek-coder-33b", "deepseek-ai--deepseek-coder-33b-instruct_vllm_temp_1.0",
            *open_rate("~33B", 0.78),
        ),
        (
            "deepseek-coder-6.7b", "deepseek-ai--deepseek-coder-6.7b-instruct_vllm_temp_1.0",
            *open_rate("~7B", 0.10),
        ),
    ),
    "magicoder": (
        (
            "magicoder-s-ds-6.7b", "ise-uiuc--Magicoder-S-DS-6.7B_vllm_temp_1.0",
            *open_rate("~7B", 0.10),
        ),
    ),
    "qwen": (
        ("qwen2.5-7b", "Qwen--Qwen2.5-7B-Instruct_vllm_temp_1.0", *open_rate("~7B", 0.10)),
        ("qwen2.5-14b", "Qwen--Qwen2.5-14B-Instruct_vllm_temp_1.0", *open_rate("~14B", 0.30)),
        ("qwen2.5-32b", "Qwen--Qwen2.5-32B-Instruct_vllm_temp_1.0", *open_rate("~32B", 0.78)),
        ("qwen2.5-72b", "Qwen--Qwen2.5-72B-Instruct_vllm_temp_1.0", *open_rate("~72B", 0.90)),
        ("codeqwen1.5-7b", "Qwen--CodeQwen1.5-7B-Chat_vllm_temp_1.0", *open_rate("~7B", 0.10)),
        ("qwq-32b", "Qwen--QwQ-32B-Preview_vllm_temp_1.0", *open_rate("~32B", 0.78)),
    ),
    "llama": (
        (
            "llama-3.1-8b", "meta-llama--Llama-3.1-8B-Instruct_vllm_temp_1.0",
            *open_rate("~8B", 0.10),
        ),
        (
            "llama-3.1-70b", "meta-llama--Llama-3.1-70B-Instruct_vllm_temp_1.0",
            *open_rate("~70B", 0.90),
        ),
        (
            "llama-3-8b", "meta-llama--Meta-Llama-3-8B-Instruct_vllm_temp_1.0",
            *open_rate("~8B", 0.10),
        ),
        (
            "nemotron-70b", "nvidia--Llama-3.1-Nemotron-70B-Instruct-HF_vllm_temp_1.0",
            *open_rate("~70B", 0.90),
        ),
    ),
    "mistral": (
        ("codestral-22b", "mistralai--Codestral-22B-v0.1_vllm_temp_1.0", 0.20, 0.60, ""),
        ("mistral-large", "mistralai--Mistral-Large-Instruct-2407_vllm_temp_1.0", 2.0, 6.0, ""),
        ("mistral-nemo", "mistralai--Mistral-Nemo-Instruct-2407_vllm_temp_1.0", 0.15, 0.15, ""),
        ("mistral-small", "mistralai--Mistral-Small-Instruct-2409_vllm_temp_1.0", 0.20, 0.60, ""),
    ),
    "phi": (
        (
            "phi-3-medium", "microsoft--Phi-3-medium-4k-instruct_vllm_temp_1.0",
            *open_rate("~14B", 0.30),
        ),
    ),
    "yi": (("yi-coder-9b", "01-ai--Yi-Coder-9B-Chat_vllm_temp_1.0", *open_rate("~9B", 0.10)),),
    "opencoder": (
        ("opencoder-8b", "infly--OpenCoder-8B-Instruct_vllm_temp_1.0", *open_rate("~8B", 0.10)),
    ),
    "xai": (("grok-beta", "grok-beta_openai_temp_1.0", 5.0, 15.0, ""),),
}
# The model split of the pool-agnostic head: whole families, held out when the first byte of
# sha256(FAMILY_SALT + family) is below HELD_OUT_BYTE_BELOW (≈40%); fixed before any run.
FAMILY_SALT = "trinity-family-v1:"
HELD_OUT_BYTE_BELOW = 102
CORRECT_KEPT = 2  # correct programs kept per model and task in evalperf-all (the size of the wheel)


def held_out(family: str, salt: str = FAMILY_SALT) -> bool:
    """The split rule; scripts/universal_study.py splits the training families again with its own
    salt."""
    return hashlib.sha256((salt + family).encode()).digest()[0] < HELD_OUT_BYTE_BELOW


EVALPERF_ALL = tuple(
    Model(
        agent, source.split("_")[0].split("--")[-1], source, price_in, price_out,
        price_note=note or "list price at the records' time",
    )
    for family in EVALPERF_FAMILIES
    for agent, source, price_in, price_out, note in EVALPERF_FAMILIES[family]
)


def model_split() -> dict:
    return {
        "rule": (
            f"whole families; held out when sha256({FAMILY_SALT!r} + family)[0] "
            f"< {HELD_OUT_BYTE_BELOW}"
        ),
        "families": {
            family: [m[0] for m in models] for family, models in EVALPERF_FAMILIES.items()
        },
        "held_out": sorted(
            m[0] for f, models in EVALPERF_FAMILIES.items() if held_out(f) for m in models
        ),
        "train": sorted(
            m[0] for f, models in EVALPERF_FAMILIES.items() if not held_out(f) for m in models
        ),
    }


POOLS = {  # name -> (task set, models, source line for the TOML and the manifest)
    "ldb-humaneval": (
        "humaneval", LDB_MODELS["humaneval"],
        "LDB (FloridSleeves/LLMDebugger, Apache-2.0): first answers and own repair rounds",
    ),
    "ldb-mbpp": (
        "mbpp", LDB_MODELS["mbpp"],
        (
            "LDB (FloridSleeves/LLMDebugger, Apache-2.0) on MBPP (CC-BY-4.0): "
            "first answers and own repair rounds"
        ),
    ),
    "evalperf-api": (
        "evalperf", EVALPERF_MODELS,
        "EvalPerf (evalplus, Apache-2.0): pass rate of 100 samples and up to 20 correct programs",
    ),
    "evalperf-all": (
        "evalperf", EVALPERF_ALL,
        (
            "EvalPerf (evalplus, Apache-2.0): every model once, pass rate of 100 samples "
            f"and up to {CORRECT_KEPT} correct programs"
        ),
    ),
}


def id_key(task_id: str) -> tuple[str, int]:
    prefix, _, number = task_id.rpartition("/")
    return prefix, int(number)


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def dumps(row: dict) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = "".join(dumps(row) + "\n" for row in rows).encode("utf-8")
    with (
        path.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed,
    ):
        packed.write(payload)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


# ---- task sets ----


def strip_check(test: str, entry_point: str) -> str:
    """MBPP's `test` ends with `check(<entry_point>)`; our grader makes that call itself.

    Where the asserts call a function named `check` (MBPP/349's entry point; MBPP/56's original
    name, where LDB's prompt asks for `rev`), the tests' own `check` shadowed it and recursed
    forever in LDB's harness too: there the asserts call `candidate`, the function asked for."""
    lines = test.rstrip().splitlines()
    if lines[-1].strip() != f"check({entry_point})":
        raise SystemExit(f"unexpected MBPP test ending: {lines[-1]!r}")
    lines = [
        line.replace("check(", "candidate(") if line.lstrip().startswith("assert") else line
        for line in lines
    ]
    return "\n".join(lines[:-1]) + "\n"


def mbpp_tasks(data: Path) -> dict[str, dict]:
    rows = read_jsonl(data / "ldb/input_data/mbpp/dataset/probs.jsonl")
    return {
        r["task_id"]: {
            "task_id": r["task_id"], "prompt": r["prompt"], "entry_point": r["entry_point"],
            "test": strip_check(r["test"], r["entry_point"]),
            "canonical_solution": r["canonical_solution"], "visible_tests": r["given_tests"],
        }
        for r in rows
    }


def humaneval_visible(data: Path) -> dict[str, list[str]]:
    """LDB's visible asserts per HumanEval task (the same in every model's seed file)."""
    seen: dict[str, list[str]] = {}
    for model in LDB_MODELS["humaneval"]:
        for row in read_jsonl(data / f"ldb/input_data/humaneval/seed/{model.source}/seed.jsonl"):
            if seen.setdefault(row["task_id"], row["given_tests"]) != row["given_tests"]:
                raise SystemExit(f"visible tests differ between seed files for {row['task_id']}")
    return seen


def humaneval_tasks(data: Path) -> dict[str, dict]:
    visible = humaneval_visible(data)
    keys = ("task_id", "prompt", "entry_point", "test", "canonical_solution")
    return {
        r["task_id"]: {**{k: r[k] for k in keys}, "visible_tests": visible[r["task_id"]]}
        for r in read_jsonl(data / "ldb/input_data/humaneval/dataset/probs.jsonl")
    }


def evalperf_results(data: Path) -> dict[str, dict]:
    """Every EvalPerf configuration's per-task results, by file stem, ids normalised."""
    results = {}
    for path in sorted((data / "evalperf").glob(f"*{EVALPERF_SUFFIX}")):
        evals = json.loads(path.read_text("utf-8"))["eval"]
        results[path.name.removesuffix(EVALPERF_SUFFIX)] = {
            normalise(k): v for k, v in evals.items()
        }
    return results


def normalise(task_id: str) -> str:
    return "MBPP/" + task_id.removeprefix("Mbpp/") if task_id.startswith("Mbpp/") else task_id


def parse(code: str) -> ast.Module | None:
    """The program's AST, or None when it does not compile."""
    try:
        with warnings.catch_warnings():  # recorded programs carry invalid escapes and the like
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
            compile(tree, "solution.py", "exec")
    except (SyntaxError, ValueError):
        return None
    return tree


def top_level_defs(code: str) -> list[ast.FunctionDef]:
    tree = parse(code)
    return [node for node in tree.body if isinstance(node, ast.FunctionDef)] if tree else []


def most_common(counts: Counter) -> str | None:
    return min(counts, key=lambda item: (-counts[item], item)) if counts else None


def recovered_task(task_id: str, programs: list[str], statement: str | None = None) -> dict:
    """A prompt for a task EvalPerf has no text for, from what its correct programs define
    (the statement, where LDB's prompt for the task is not the one they answered, from LDB)."""
    defs = [top_level_defs(p) for p in programs]
    entry = most_common(Counter(name for found in defs for name in {d.name for d in found}))
    if entry is None:
        raise SystemExit(f"{task_id}: no program defines a function")
    signatures: Counter[str] = Counter()
    statements: Counter[str] = Counter()
    docstrings: Counter[str] = Counter()
    for program, found in zip(programs, defs):
        for node in found:
            if node.name == entry:
                signatures[f"def {entry}({ast.unparse(node.args)}):"] += 1
                doc = ast.get_docstring(node)
                if doc:
                    docstrings[doc.strip().splitlines()[0].strip()] += 1
        for match in re.finditer(r"\b(Write an? .*)", program):
            statements[match.group(1).strip().rstrip("\"'").strip()] += 1
    statement = (
        statement
        or most_common(statements)
        or most_common(docstrings)
        or f"EvalPerf task {task_id}."
    )
    return {
        "task_id": task_id,
        "prompt": f'{most_common(signatures)}\n    """\n    {statement}\n    """\n',
        "entry_point": entry, "test": "", "visible_tests": [],
    }


def statement_of(prompt: str) -> str | None:
    """The problem statement of an LDB prompt: its function's docstring, on one line."""
    defs = top_level_defs(prompt)
    doc = ast.get_docstring(defs[0]) if defs else None
    return " ".join(doc.split()) if doc else None


def evalperf_tasks(data: Path, results: dict[str, dict]) -> list[dict]:
    humaneval, mbpp = humaneval_tasks(data), mbpp_tasks(data)
    tasks = []
    for task_id in sorted(next(iter(results.values())), key=id_key):
        programs = [p["solution"] for evals in results.values() for p in evals[task_id]["profiled"]]
        known = humaneval.get(task_id) or mbpp.get(task_id)
        defined = Counter(name for p in programs for name in {d.name for d in top_level_defs(p)})
        if (
            known
            and most_common(defined) == known["entry_point"]
            and task_id not in MBPP_PLUS_REVISED
        ):
            tasks.append(known)
        else:  # LDB lacks the task, its entry point is another (MBPP/166), or EvalPlus revised it
            tasks.append(
                recovered_task(task_id, programs, statement_of(known["prompt"]) if known else None)
            )
    return tasks


# ---- records ----


def defines(code: str, name: str) -> bool:
    return any(d.name == name for d in top_level_defs(code))


def first_answer(seed: dict) -> str:
    """The seed program as a whole program: some seeds are only the body that completes the
    prompt (LDB ran prompt + body)."""
    code = seed["solution"]
    if defines(code, seed["entry_point"]):
        return code
    joined = seed["prompt"] + code
    return joined if defines(joined, seed["entry_point"]) else code


def is_string(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def without_strings(code: str) -> str | None:
    """The program's AST without bare string statements (docstrings), to compare two programs
    that differ only in a docstring LDB inserted."""
    tree = parse(code)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = [s for s in node.body if not is_string(s)] or [ast.Pass()]
    return ast.dump(tree)


def ldb_records(data: Path, dataset: str) -> list[dict]:
    """Round 0: each model's seed program; round k: LDB's k-th debugging round, kept only where
    the backbone is the seed's own model and the run started from that very seed."""
    rows = []
    for model in LDB_MODELS[dataset]:
        seeds = read_jsonl(data / f"ldb/input_data/{dataset}/seed/{model.source}/seed.jsonl")
        runs = {}
        if model.repairs:
            runs = {
                r["task_id"]: r
                for r in read_jsonl(
                    data / f"ldb/results/ldb/{dataset}/{model.repairs}/results.jsonl"
                )
            }
        for seed in sorted(seeds, key=lambda s: id_key(s["task_id"])):
            code = first_answer(seed)
            rows.append(
                {
                    "model": model.model, "task_id": seed["task_id"], "code": code, "sample": 0,
                    "round": 0,
                }
            )
            run = runs.get(seed["task_id"])
            if run is None:
                continue
            rounds = [impl.removeprefix(LDB_HEADER) for impl in run["implementations"]]
            if without_strings(rounds[0]) is None or without_strings(rounds[0]) != without_strings(
                code
            ):
                continue
            rows += [
                {
                    "model": model.model, "task_id": seed["task_id"], "code": repair, "sample": 0,
                    "round": k,
                }
                for k, repair in enumerate(rounds[1:], start=1)
            ]
    return rows


def evalperf_records(
    results: dict[str, dict], models: tuple[Model, ...] = EVALPERF_MODELS, kept: int | None = None
) -> list[dict]:
    rows = []
    for model in models:
        evals = results[model.source]
        for task_id in sorted(evals, key=id_key):
            entry = evals[task_id]
            rows.append(
                {
                    "model": model.model, "task_id": task_id,
                    "pass_rate": round(entry["pass@1"] / 100, 6),
                    "correct": [p["solution"] for p in entry["profiled"]][:kept],
                }
            )
    return rows


def pool_toml(name: str, task_set: str, models: tuple[Model, ...], source: str) -> str:
    lines = [
        f"# Bundled recorded pool {name!r}, for task set {task_set!r}: each agent replays what its",
        (
            "# model answered in a public record; no model is called. "
            "Built by scripts/build_records.py."
        ),
        f"# Source: {source}.",
        "# Credits and licences: trinity_cli/data/NOTICE. Prices: USD per million tokens in / out.",
    ]
    for m in models:
        lines += [
            "", "[[agents]]", f'name = "{m.agent}"', 'provider = "replay"', f'record = "{name}"',
            f'model = "{m.model}"', f"price_in = {m.price_in}  # {m.price_note}",
            f"price_out = {m.price_out}",
        ]
    return "\n".join(lines) + "\n"


def build(data: Path, out: Path) -> list[Path]:
    """Write every derived file under `out`; returns their paths."""
    results = evalperf_results(data)
    written = []

    def jsonl(rel: str, rows: list[dict]) -> None:
        write_jsonl_gz(out / rel, rows)
        written.append(out / rel)

    def text(rel: str, content: str) -> None:
        write_text(out / rel, content)
        written.append(out / rel)

    jsonl(
        "tasks/mbpp.jsonl.gz", sorted(mbpp_tasks(data).values(), key=lambda t: id_key(t["task_id"]))
    )
    jsonl("tasks/evalperf.jsonl.gz", evalperf_tasks(data, results))
    text(
        "tasks/humaneval-visible-tests.json",
        json.dumps(humaneval_visible(data), indent=1, sort_keys=True) + "\n",
    )
    jsonl("records/ldb-humaneval.jsonl.gz", ldb_records(data, "humaneval"))
    jsonl("records/ldb-mbpp.jsonl.gz", ldb_records(data, "mbpp"))
    jsonl("records/evalperf-api.jsonl.gz", evalperf_records(results))
    jsonl("records/evalperf-all.jsonl.gz", evalperf_records(results, EVALPERF_ALL, CORRECT_KEPT))
    manifest = {}
    for name, (task_set, models, source) in POOLS.items():
        text(f"pools/{name}.toml", pool_toml(name, task_set, models, source))
        manifest[name] = {
            "task_set": task_set, "models": [m.model for m in models], "source": source,
        }
    text(
        "manifest.json",
        json.dumps({"pools": manifest, "model_split": model_split()}, indent=2, sort_keys=True)
        + "\n",
    )
    for source, target in (
        ("ldb/LICENSE", "licenses/LDB-LICENSE.txt"),
        ("evalperf/LICENSE", "licenses/EvalPlus-LICENSE.txt"),
    ):
        text(target, (data / source).read_text("utf-8"))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=DATA, help=f"the shared data folder (default {DATA})"
    )
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT})")
    args = parser.parse_args()
    if not (args.data / "ldb").is_dir() or not (args.data / "evalperf").is_dir():
        raise SystemExit(f"no ldb/ and evalperf/ under {args.data}")
    for path in build(args.data, args.out):
        print(f"{path.stat().st_size:>10,}  {path.relative_to(args.out)}")


if __name__ == "__main__":
    main()
