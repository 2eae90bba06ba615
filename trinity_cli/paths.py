"""Where trinity keeps its files. `TRINITY_HOME` relocates all of them (the tests use it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def home() -> Path | None:
    value = os.environ.get("TRINITY_HOME")
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    root = home()
    if root is not None:
        return root / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir("trinity"))


def cache_dir() -> Path:
    root = home()
    if root is not None:
        return root / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir("trinity"))


def data_dir() -> Path:
    """The user's own records: the run log, trained heads."""
    root = home()
    if root is not None:
        return root / "data"
    import platformdirs

    return Path(platformdirs.user_data_dir("trinity"))


def shipped(name: str) -> Path:
    """A top-level folder of the repository (weights/, examples/) that the wheel ships inside
    the package; a source tree has it beside the package."""
    from importlib import resources

    packaged = Path(str(resources.files("trinity_cli"))) / name
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / name


def unwritable(folder: Path) -> str | None:
    """Why a run could not write in `folder` (made if missing), or None: a file or a link to
    nothing on its path, or no permission where it would be made. Checked before any work."""
    target = folder.absolute()
    existing = next(p for p in (target, *target.parents) if p.exists() or p.is_symlink())
    if not existing.exists():
        return f"{existing} is a link to nothing"
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return (
            f"cannot write in {existing}"
            if existing == target
            else f"{folder} does not exist and cannot be made in {existing}"
        )
    return None


def numbered(stem: str) -> Iterator[str]:
    """`stem`, `stem-2`, `stem-3`, …: the names a run tries in turn for a file that must not
    replace an earlier one."""
    yield stem
    for n in range(2, 10_000):
        yield f"{stem}-{n}"
