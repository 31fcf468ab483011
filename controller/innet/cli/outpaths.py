"""Output paths checked before any work: a folder where a folder is wanted, a writable place.

The commands write results after seconds or minutes of work; a typo in `--out` or `-o` must
fail at once, in one line naming the flag, not as a traceback at the end. These are argparse
types (`type=output_dir("--out")`), so the error reads like every other bad flag; commands
then create the folder or write the file as before.
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Callable
from pathlib import Path

IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def _nearest_existing(path: Path) -> Path:
    """The path itself or its closest ancestor that exists (what a mkdir -p would start at)."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_creatable(path: Path) -> str | None:
    """Why `path` cannot be created as a folder or file, or None if it can."""
    base = _nearest_existing(path.parent if not path.exists() else path)
    if base != path.absolute() and not base.is_dir():
        return f"{base} is a file, not a folder"
    if not os.access(base, os.W_OK | os.X_OK) or _read_only(base):
        return f"{base} is not writable"
    return None


_SPECIAL = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
            (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _not_a_file(path: Path) -> str | None:
    """What an existing non-regular file is (a device such as /dev/full, a FIFO, a socket):
    writing results there fails, blocks or loses them after the work, so it is refused."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    for test, what in _SPECIAL:
        if test(mode):
            return what
    return None


def _read_only(path: Path) -> bool:
    """Whether `path` is on a read-only file system (root passes every os.access check, but
    not this one)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_output_dir(text: str) -> Path:
    """A folder to write into: existing, or creatable; never an existing file."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, got an empty path")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; give a folder (it is created if "
                                         "missing)")
    why = _check_creatable(path)
    if why:
        raise argparse.ArgumentTypeError(f"cannot write into {text}: {why}")
    return path


def check_output_file(text: str, suffixes: tuple[str, ...] | None = None) -> Path:
    """A file to (over)write: not a folder, in a folder that exists and is writable."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file name, got an empty path")
    path = Path(text)
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    special = _not_a_file(path)
    if special:
        raise argparse.ArgumentTypeError(f"cannot write {text}: it is {special}, not a file")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise argparse.ArgumentTypeError(f"{text}: the name must end in one of "
                                         f"{', '.join(suffixes)} (it sets the format)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: no folder {parent}")
    if _read_only(parent) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {text}: not writable")
    if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: {parent} is not writable")
    return path


def output_dir(text: str) -> Path:
    """argparse type: a folder to write results into (created if missing)."""
    return check_output_dir(text)


def output_file(suffixes: tuple[str, ...] | None = None) -> Callable[[str], Path]:
    """argparse type: a file to write, optionally with one of `suffixes` (e.g. images)."""

    def parse(text: str) -> Path:
        return check_output_file(text, suffixes)

    parse.__name__ = "output file"
    return parse


image_file = output_file(IMAGE_SUFFIXES)
image_file.__name__ = "image file"
