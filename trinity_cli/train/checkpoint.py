"""Training checkpoints: written atomically (temp file + rename) after every `tell`.

A pickled SepCMA drops its RNG; the loop reseeds it every generation from (seed, generation),
so a resumed run asks the same candidates as an uninterrupted one.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from trinity_cli.errors import ConfigError
from trinity_cli.paths import numbered

VERSION = 1
# Every class a checkpoint holds (`save`'s state): unpickling any other global could run code of
# the file's choosing, so `read` refuses it.
HELD = {
    ("cmaes._sepcma", "SepCMA"), ("numpy", "dtype"), ("numpy", "ndarray"),
    *(
        (module, name)
        for module in ("numpy.core.multiarray", "numpy._core.multiarray")  # numpy 1 and 2
        for name in ("_reconstruct", "scalar")
    ),
    *(("trinity_cli.core.head", name) for name in ("LinearHead", "UniversalHead", "PlanPolicy")),
    ("trinity_cli.core.roles", "Role"), ("trinity_cli.train.es", "Start"),
    ("trinity_cli.train.fixed", "FixedPlan"),
}


class _Foreign(pickle.UnpicklingError):
    pass


class _CheckpointUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in HELD:
            raise _Foreign(f"it holds {module}.{name}, which no checkpoint does")
        return super().find_class(module, name)


def checkpoint_path(out: Path) -> Path:
    return out.with_suffix(".ckpt")


def save(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        pickle.dump({"version": VERSION, **state}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def load(path: Path, fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The state saved at `path`, refused when made with other settings than `fingerprint`."""
    state = read(path)
    if state.get("fingerprint") != fingerprint:
        changed = [k for k in fingerprint if state.get("fingerprint", {}).get(k) != fingerprint[k]]
        raise ConfigError(
            f"--resume: checkpoint {path} was made with other settings ({', '.join(changed)})"
        )
    return state


def read(path: Path) -> dict[str, Any]:
    """The state saved at `path`, whatever its settings (plan_job checks this much before any
    work); every way it can fail is a ConfigError."""
    try:
        with open(path, "rb") as handle:
            state = _CheckpointUnpickler(handle).load()
    except FileNotFoundError:
        raise ConfigError(f"--resume: no checkpoint at {path}") from None
    except OSError as exc:
        raise ConfigError(f"--resume: {path} cannot be read: {exc.strerror or exc}") from None
    except _Foreign as exc:
        raise ConfigError(f"--resume: {path} is refused: {exc}") from None
    except (  # what rebuilding an allowed state from other bytes raises
        pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, TypeError,
        IndexError, KeyError,
    ):
        what = "it is damaged" if written_by_train(path) else "it is no checkpoint train wrote"
        raise ConfigError(f"--resume: {path} cannot be read: {what}") from None
    if not isinstance(state, dict) or state.get("version") != VERSION:
        raise ConfigError(f"--resume: checkpoint {path} has an unknown format")
    return state


def default_out(pool_source: str, tasks: str, resume: bool) -> Path:
    """`<pool>-<tasks>[-N].npz` in the user heads folder: the first free name (no head, no
    checkpoint), or with --resume the newest that has a checkpoint."""
    from trinity_cli.heads.files import user_heads_dir
    from trinity_cli.pool.spec import BUILTIN_POOL

    base = (
        f"{'default' if pool_source == BUILTIN_POOL else Path(pool_source).stem}-{Path(tasks).stem}"
    )
    names = [user_heads_dir() / f"{stem}.npz" for stem in numbered(base)]
    if resume:
        started = [n for n in names if checkpoint_path(n).exists()]
        if not started:
            raise ConfigError(
                f"--resume: no run of {base} to continue in {user_heads_dir()} (name it with --out)"
            )
        return started[-1]
    return next(n for n in names if not n.exists() and not checkpoint_path(n).exists())


def written_by_train(path: Path) -> bool:
    """Whether the file begins as `save` writes (a pickle, protocol 2 or later), read without
    unpickling it."""
    with open(path, "rb") as handle:
        return handle.read(1) == b"\x80"


def unfinished(out: Path) -> bool:
    """A checkpoint that no head was written after: a fresh run there would overwrite it."""
    checkpoint = checkpoint_path(out)
    return checkpoint.exists() and not (
        out.exists() and out.stat().st_mtime >= checkpoint.stat().st_mtime
    )


def interrupted_note(out: Path, cached: bool = True) -> str:
    """What a user stopping `train` (Ctrl-C) keeps, and how to go on."""
    if unfinished(out):
        return (
            f"{checkpoint_path(out)} keeps every generation done: the same command with "
            f"--out {out} --resume continues it"
        )
    return "stopped before the first generation ended: nothing to resume" + (
        " (the turns made so far are cached, so running it again is quicker)" if cached else ""
    )
