"""Recorded pools and task sets that ship inside the package, and how a name finds them.

The task sets, records, pools and manifest under `trinity_cli/data/` are derived from public
records (LDB, EvalPerf, MBPP, HumanEval: credits and licences in data/NOTICE and
data/licenses/) by `scripts/build_records.py`: rebuild them, never edit them. A `--pool`,
`record = ...` or task set given by the user follows one rule: an existing path wins, else a
bundled name, else an error listing the names.

Record format (JSON Lines, gzip allowed; one object per line). A recorded program:

    {"model": str, "task_id": str, "code": str, "sample": int = 0, "round": int = 0,
     "tokens_in": int (optional), "tokens_out": int (optional)}

`code` is the whole program. `round` 0 is the model's first answer to the task; round k its
k-th repair of its own answer (LDB's debugging rounds, kept only where the debugging backbone
is the model that wrote the first answer). `sample` tells apart independent first answers.
A probability-only source (EvalPerf keeps no failing programs), one line per model and task:

    {"model": str, "task_id": str, "pass_rate": float in [0, 1], "correct": [str, ...]}

`pass_rate` is the share of the model's samples that passed (EvalPerf: 100 at T=1.0);
`correct` holds some of its passing programs, possibly none.

An agent replays a record with `provider = "replay"` (providers/replay.py); each line is
validated when the record is first read (providers/record_file.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trinity_cli.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "data"


@dataclass(frozen=True)
class BundledPool:
    name: str
    task_set: str  # the task set its records cover
    models: tuple[str, ...]
    source: str  # where the records come from, and their licence

    @property
    def path(self) -> Path:
        return DATA / "pools" / f"{self.name}.toml"


def pools() -> list[BundledPool]:
    manifest = json.loads((DATA / "manifest.json").read_text("utf-8"))["pools"]
    return [
        BundledPool(name, entry["task_set"], tuple(entry["models"]), entry["source"])
        for name, entry in sorted(manifest.items())
    ]


def pool_names() -> list[str]:
    return _names(DATA / "pools", ".toml")


def pool_path(name_or_path: str) -> Path:
    return _find(name_or_path, "pool", DATA / "pools", ".toml")


def shown_source(source: str) -> str:
    """How a pool's source is shown: a bundled pool by the name --pool takes, not by its path
    inside the installed package; any other as given."""
    path = Path(source)
    return f"{path.stem} (bundled)" if path.parent == DATA / "pools" else source


def record_path(name_or_path: str) -> Path:
    return _find(name_or_path, "record", DATA / "records", ".jsonl.gz")


def _names(folder: Path, suffix: str) -> list[str]:
    return sorted(p.name.removesuffix(suffix) for p in folder.glob(f"*{suffix}"))


def _find(name_or_path: str, kind: str, folder: Path, suffix: str) -> Path:
    """An existing path wins, else a bundled name, else ConfigError naming both choices."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    names = _names(folder, suffix)
    if name_or_path in names:
        return folder / f"{name_or_path}{suffix}"
    raise ConfigError(
        f"{kind} not found: {name_or_path!r} is no file and no bundled {kind} "
        f"(bundled: {', '.join(names)})"
    )
