"""Heads on disk: `NAME.npz` (arrays) + `NAME.json` (metadata sidecar), and choosing one.

The sidecar records what a head is only valid for: the backbone GGUF (name + sha256), hidden size,
token position, transcript format, the agents in logit order (name, provider, model) and the role
order, plus how it was trained. A head may also be a fixed plan (`"kind": "plan"`, the array `plan`
of (agent, role) index pairs, its last step repeated): `train` saves the plan its search started
from beside the head, and a plan fits any coordinator. Which head a run uses is decided in
`runtime.choose_policy`; this module finds the heads that fit (`newest_fitting`) and resolves a
head's name (`resolve`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.core.roles import ROLE_ORDER
from trinity_cli.core.transcript import FORMATS
from trinity_cli.errors import ConfigError, UsageError
from trinity_cli.pool.spec import Pool

FORMAT_VERSION = 1
UNIVERSAL = "universal"  # metadata `kind` of the pool-agnostic head (core.head.UniversalHead)
PLAN = "plan"  # metadata `kind` of a fixed plan saved as a routing policy (core.head.PlanPolicy)


@dataclass(frozen=True)
class Backbone:
    """What a head must match on the coordinator side."""

    name: str
    sha256: str
    token_position: int
    transcript_format: str


def shipped_dir() -> Path:
    return paths.shipped("weights")


def shown_head(source: str) -> str:
    """How a head is shown to a reader: a shipped head by the name --weights takes, not by its
    path inside the installed package; any other as given."""
    path = Path(source)
    return f"{path.name} (shipped)" if path.parent == shipped_dir() else source


def agents_signature(pool: Pool) -> list[dict[str, str]]:
    return [{"name": a.name, "provider": a.provider, "model": a.model} for a in pool.agents]


def agent_roles(pool: Pool) -> list[list[str]]:
    """The role mask a head was trained under: the roles each agent may play, in pool order."""
    return [list(a.roles) for a in pool.agents]


def metadata_for(backbone: Backbone, pool: Pool, hidden_size: int, **extra: Any) -> dict[str, Any]:
    return _metadata(
        backbone, hidden_size, agents=agents_signature(pool), agent_roles=agent_roles(pool), **extra
    )


def universal_metadata(
    backbone: Backbone, hidden_size: int, head: Any, **extra: Any
) -> dict[str, Any]:
    """A universal head's sidecar: no agents; the profile definition and basis it reads."""
    from trinity_cli.core.profile import DEFINITION

    profile = {
        "definition": DEFINITION, "size": int(head.profiles.shape[1]),
        "basis_sha256": basis_sha256(head),
    }
    return _metadata(backbone, hidden_size, kind=UNIVERSAL, agents=[], profile=profile, **extra)


def _metadata(backbone: Backbone, hidden_size: int, **extra: Any) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "backbone": {"name": backbone.name, "sha256": backbone.sha256}, "hidden_size": hidden_size,
        "token_position": backbone.token_position, "transcript_format": backbone.transcript_format,
        "roles": [r.value for r in ROLE_ORDER],
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), **extra,
    }


def in_head_format(meta: dict[str, Any], backbone: Backbone) -> Backbone:
    """The run's backbone, reading transcripts in the head's format when this version knows it
    (a head trained on an older format keeps working; its coordinator shows it that format)."""
    head_format = meta.get("transcript_format")
    return replace(backbone, transcript_format=head_format) if head_format in FORMATS else backbone


def is_universal(meta: dict[str, Any]) -> bool:
    return meta.get("kind") == UNIVERSAL


def is_plan(meta: dict[str, Any]) -> bool:
    return meta.get("kind") == PLAN


def mismatches(meta: dict[str, Any], backbone: Backbone, pool: Pool) -> list[str]:
    """Each difference as 'what: head has X, this run has Y' (empty when the head fits). A
    universal head fits any pool: its agents come from their profiles."""
    found = []
    pairs = (
        []
        if is_plan(meta)
        else [  # a plan reads no state
            ("backbone sha256", meta.get("backbone", {}).get("sha256"), backbone.sha256),
            ("token position", meta.get("token_position"), backbone.token_position),
            ("transcript format", meta.get("transcript_format"), backbone.transcript_format),
        ]
    )
    pairs.append(("roles", meta.get("roles"), [r.value for r in ROLE_ORDER]))
    if not is_universal(meta):
        pairs += [
            ("agents", meta.get("agents"), agents_signature(pool)),
            # heads from before role masks were recorded let every agent play every role
            (
                "agent roles",
                meta.get(
                    "agent_roles", [[r.value for r in ROLE_ORDER]] * len(meta.get("agents", []))
                ),
                agent_roles(pool),
            ),
        ]
    for what, head_value, run_value in pairs:
        if head_value != run_value:
            found.append(f"{what}: head has {_show(head_value)}, this run has {_show(run_value)}")
    return found


def numerics_mismatches(meta: dict[str, Any], numerics: dict[str, Any]) -> list[str]:
    """How this run's coordinator numerics differ from those that produced the head's training
    states (`llamacpp.numerics`); a head from before they were recorded says nothing."""
    recorded = meta.get("numerics") or {}
    return [
        _cpu_features(recorded.get(key), value)
        if key == "cpu_features" and isinstance(value, str)
        else f"{key} {_show(recorded.get(key))} (head) vs {_show(value)} (here)"
        for key, value in numerics.items()
        if recorded and recorded.get(key) != value
    ]


def _cpu_features(recorded: Any, here: str) -> str:
    """The kernels' features that differ, not the two whole lists (a dozen names each)."""
    theirs, ours = set(str(recorded or "").split(",")) - {""}, set(here.split(",")) - {""}
    sides = []
    if theirs - ours:
        sides.append(f"the head's CPU had {', '.join(sorted(theirs - ours))}, which this one lacks")
    if ours - theirs:
        sides.append(f"this one has {', '.join(sorted(ours - theirs))}, which the head's lacked")
    return f"cpu_features: {'; '.join(sides)}"


def _show(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return (
            "["
            + ", ".join(f"{v.get('name')}={v.get('provider')}:{v.get('model')}" for v in value)
            + "]"
        )
    return json.dumps(value) if not isinstance(value, str) else value


def sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def read_metadata(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(sidecar(path).read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"weights {path}: metadata sidecar {sidecar(path).name} is missing"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"weights {path}: metadata {sidecar(path).name} is unreadable: {exc}"
        ) from None
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        raise ConfigError(f"weights {path}: metadata format_version must be {FORMAT_VERSION}")
    return meta


def basis_sha256(head: Any) -> str:
    """Names the input space a universal head reads, which its agents' profiles are measured in."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for array in (head.mean, head.std, head.basis):
        digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    return digest.hexdigest()


def check_head_file(path: Path) -> None:
    """What can be checked without numpy (`trinity pool` stays light): a file, and an intact
    .npz archive."""
    if path.is_dir():
        raise ConfigError(f"weights {path} is a directory, not a head file")
    if not path.is_file():
        raise ConfigError(f"weights file not found: {path}")
    if not zipfile.is_zipfile(path):
        raise ConfigError(
            f"weights {path} is not a head: a head is an .npz archive (is it truncated, or "
            "another kind of file?)"
        )
    with zipfile.ZipFile(path) as archive:
        damaged = archive.testzip()
    if damaged is not None:
        raise ConfigError(f"weights {path} cannot be read: {damaged} in it is damaged")


def load_head(path: Path) -> tuple[Any, dict[str, Any]]:
    """(LinearHead, unbound UniversalHead or PlanPolicy, metadata); any unreadable or inconsistent
    file is a ConfigError."""
    import numpy as np

    from trinity_cli.core.head import N_ROLES, LinearHead

    check_head_file(path)
    meta = read_metadata(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except ValueError as exc:  # numpy's advice to unpickle is not for a user's head file
        not_a_head = f"weights {path} is not a head: a head is an .npz archive"
        if "pickle" not in str(exc):
            raise ConfigError(f"{not_a_head}: {exc}") from None
        raise ConfigError(f"{not_a_head} of plain arrays; this one holds Python objects") from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise ConfigError(f"weights {path} cannot be read (corrupt or truncated?): {exc}") from None
    if is_universal(meta):
        return _universal(path, arrays, meta), meta
    if is_plan(meta):
        return _plan(path, arrays, meta), meta
    for key in ("weights", "mean", "std"):
        if key not in arrays:
            raise ConfigError(f"weights {path}: array {key!r} is missing")
    weights, mean, std = arrays["weights"], arrays["mean"], arrays["std"]
    basis = arrays.get("basis")
    turns = _turn_features(path, arrays)
    d = meta.get("hidden_size")
    n_agents = len(meta.get("agents", []))
    k = d if basis is None else basis.shape[0]
    if (
        weights.shape != (n_agents + N_ROLES, (k or 0) + turns)
        or mean.shape != (d,)
        or std.shape != (d,)
        or (basis is not None and basis.shape != (k, d))
        or not all(np.isfinite(a).all() for a in arrays.values())
        or (std <= 0).any()
    ):
        raise ConfigError(
            f"weights {path}: arrays do not fit the metadata (weights {weights.shape}, expected "
            f"({n_agents}+{N_ROLES}, {k}+{turns}) for {n_agents} agents, hidden size {d} and "
            f"{turns} turn features)"
        )
    return LinearHead(
        weights.astype(np.float64), mean.astype(np.float64), std.astype(np.float64), basis, turns
    ), meta


def _turn_features(path: Path, arrays: dict[str, Any]) -> int:
    """T of a head with turn indicators (0 for heads saved before them)."""
    import numpy as np

    turns = arrays.pop("turn_features", np.array(0))
    if turns.shape != () or not 0 <= int(turns) <= 1000:
        raise ConfigError(f"weights {path}: 'turn_features' must be one count of turns")
    return int(turns)


def _universal(path: Path, arrays: dict[str, Any], meta: dict[str, Any]) -> Any:
    import numpy as np

    from trinity_cli.core.head import UniversalHead
    from trinity_cli.core.profile import DEFINITION

    profile = meta.get("profile", {})
    if profile.get("definition") != DEFINITION:
        raise ConfigError(
            f"weights {path}: its agents' profiles are defined as {profile.get('definition')!r}; "
            f"this version measures {DEFINITION!r}: use a universal head made for it"
        )
    missing = [k for k in ("params", "mean", "std", "basis") if k not in arrays]
    if missing:
        raise ConfigError(f"weights {path}: array {missing[0]!r} is missing")
    basis, size, turns = (
        arrays["basis"].astype(np.float64), int(profile.get("size", 0)),
        _turn_features(path, arrays),
    )
    k, d = basis.shape
    if (
        arrays["params"].shape != (UniversalHead.size(k, size, turns),)
        or arrays["mean"].shape != (d,)
        or d != meta.get("hidden_size")
        or not all(np.isfinite(a).all() for a in arrays.values())
    ):
        raise ConfigError(
            f"weights {path}: arrays do not fit the metadata (a universal head of {k} components, "
            f"{turns} turn features, profiles of {size} values, hidden size "
            f"{meta.get('hidden_size')})"
        )
    head = UniversalHead(
        arrays["params"].astype(np.float64), arrays["mean"].astype(np.float64),
        arrays["std"].astype(np.float64), basis, np.zeros((0, size)), turns,
    )
    if basis_sha256(head) != profile.get("basis_sha256"):
        raise ConfigError(
            f"weights {path}: its basis does not match the basis_sha256 of its metadata"
        )
    return head


def _plan(path: Path, arrays: dict[str, Any], meta: dict[str, Any]) -> Any:
    """A fixed plan: (agent index, role index) per turn, the last step repeated after it."""
    from trinity_cli.core.head import PlanPolicy

    steps = arrays.get("plan")
    n_agents = len(meta.get("agents", []))
    if (
        steps is None
        or steps.ndim != 2
        or steps.shape[1] != 2
        or not len(steps)
        or not (
            (0 <= steps[:, 0])
            & (steps[:, 0] < n_agents)
            & (0 <= steps[:, 1])
            & (steps[:, 1] < len(ROLE_ORDER))
        ).all()
    ):
        raise ConfigError(
            f"weights {path}: array 'plan' must hold (agent, role) index pairs for its {n_agents} "
            "agents"
        )
    return PlanPolicy(n_agents, tuple((int(a), ROLE_ORDER[int(r)]) for a, r in steps))


def save_head(path: Path, head: Any, meta: dict[str, Any]) -> None:
    """Write arrays and sidecar atomically (temp file + rename), sidecar last."""
    import numpy as np

    from trinity_cli.core.head import PlanPolicy, UniversalHead

    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any]
    if isinstance(head, UniversalHead):
        arrays = {"params": head.params, "mean": head.mean, "std": head.std, "basis": head.basis}
    elif isinstance(head, PlanPolicy):
        arrays = {
            "plan": np.array(
                [[agent, ROLE_ORDER.index(role)] for agent, role in head.plan], dtype=np.int64
            )
        }
    else:
        arrays = {"weights": head.weights, "mean": head.mean, "std": head.std}
        if head.basis is not None:
            arrays["basis"] = head.basis
    if getattr(head, "turn_features", 0):
        arrays["turn_features"] = np.array(head.turn_features, dtype=np.int64)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    os.replace(tmp, path)
    tmp_meta = sidecar(path).with_name(f".{sidecar(path).name}.{os.getpid()}.tmp")
    tmp_meta.write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
    os.replace(tmp_meta, sidecar(path))


def user_heads_dir() -> Path:
    """Where `train` writes heads by default, and where `solve` looks for them."""
    return paths.data_dir() / "heads"


def newest_fitting(directory: Path, backbone: Backbone, pool: Pool) -> tuple[Path | None, int]:
    """The newest head in `directory` whose metadata fits this coordinator and pool (a head
    whose metadata says `"auto_select": false` is used only when named), and how many heads
    were looked at. Newest by the metadata's `created`, then by the file's modification time
    (two heads trained in the same second)."""
    heads = sorted(directory.glob("*.npz")) if directory.is_dir() else []
    fitting = []
    for path in heads:
        try:
            meta = read_metadata(path)
        except ConfigError:
            continue
        if (
            meta.get("auto_select", True)
            and not is_universal(meta)  # a universal head has its own step
            and not mismatches(meta, in_head_format(meta, backbone), pool)
        ):
            fitting.append((str(meta.get("created", "")), path.stat().st_mtime_ns, path))
    return (max(fitting)[2] if fitting else None), len(heads)


def resolve(value: str) -> Path:
    """A head given by the user: an existing path wins, else a shipped head's name, else a
    user head's name; anything else is exit 3 listing the names."""
    path = Path(value).expanduser()
    if path.exists():
        return path
    for directory in (shipped_dir(), user_heads_dir()):
        named = directory / f"{value}.npz"
        if "/" not in value and named.is_file():
            return named
    names = sorted(
        {p.stem for d in (shipped_dir(), user_heads_dir()) if d.is_dir() for p in d.glob("*.npz")}
    )
    raise ConfigError(
        f"weights {value}: no such file ({path.resolve()}), and no head of that name "
        f"(names: {', '.join(names) or 'none'})"
    )


def plan_path(out: Path) -> Path:
    """Where train saves the plan its search started from, beside the head."""
    return out.with_name(f"{out.stem}-plan.npz")


def head_names(weights: str | None) -> list[str | None]:
    """--weights: one head, a comma list, or every head in a directory (by name); None: the one
    solve would choose."""
    if weights is None:
        return [None]
    directory = Path(weights).expanduser()
    if directory.is_dir():
        heads: list[str | None] = [str(p) for p in sorted(directory.glob("*.npz"))]
        if not heads:
            raise UsageError(f"--weights {weights}: the directory holds no heads (*.npz)")
        return heads
    names: list[str | None] = [name.strip() for name in weights.split(",")]
    if not all(names):
        raise UsageError(f"--weights {weights!r}: an empty name in the list")
    return names
