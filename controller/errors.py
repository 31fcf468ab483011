"""One error type for bad user input, so the CLI can print one line and exit 2.

Anything the user can get wrong (a file, a node, a field, a flag) raises `InputError` with a
message that names the culprit; the CLI turns it into ``innet: <message>`` on stderr and exit
status 2 instead of a traceback. Bugs stay ordinary exceptions and keep their tracebacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class InputError(ValueError):
    """Bad input from the user: the message names the file, node or field at fault."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)


def read_text(path: str | Path) -> str:
    """A user's file as text; an unreadable one is an InputError naming it."""
    p = Path(path)
    try:
        size = p.stat().st_size if p.is_file() else 0
    except OSError:
        size = 0
    if size:
        from controller.limits import check_memory

        # a JSON document takes 10-20 times its size once parsed into Python objects
        check_memory(f"reading {p} ({size / 1e6:.4g} MB)", 20 * size, flag=None)
    try:
        return p.read_text()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(p)) from None
    except UnicodeDecodeError:
        raise InputError("not a text file", source=str(p)) from None


def parse_json(text: str, source: str | None) -> Any:
    """JSON, or an InputError that names the file and the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} at line {exc.lineno}",
                         source=source) from None
    except RecursionError:
        raise InputError("not valid JSON here: nested too deeply", source=source) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise InputError(f"not valid JSON: {exc}", source=source) from None


def read_json(path: str | Path) -> Any:
    """Every input file of innet is read through here, so every one fails the same way."""
    return parse_json(read_text(path), str(path))
