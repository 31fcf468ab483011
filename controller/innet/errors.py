"""Two error types the CLI turns into one line on stderr: bad input (exit 2) and a switch or
network that failed (exit 3).

Anything the user can get wrong (a file, a node, a field, a flag) raises `InputError` with a
message that names the culprit; the CLI turns it into ``innet: <message>`` on stderr and exit
status 2 instead of a traceback. A switch that cannot be reached, refuses a request or goes
away raises a `NetworkError` (the P4Runtime client's `SwitchError`): the same one line, exit
status 3, so a script can tell "fix your input" from "look at the network". Bugs stay
ordinary exceptions and keep their tracebacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from innet.memory import available_memory, gib

EXIT_INPUT = 2  # bad input: a flag, a file, a field
EXIT_NETWORK = 3  # a switch or the network failed


class NetworkError(Exception):
    """A switch or the network failed (unreachable, refused, gone); the message names it."""


class InputError(ValueError):
    """Bad input from the user: the message names the file, node or field at fault."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)


def read_text(path: str | Path) -> str:
    """A user's file as text; an unreadable one is an InputError naming it. A file whose
    parse would not fit in memory is refused before it is read (and a device or pipe that
    never ends, like /dev/zero, is cut off at that size instead of read until memory runs out).
    """
    p = Path(path)
    # a JSON document takes 10-20 times its size once parsed into Python objects
    limit = available_memory() // 20
    try:
        if p.is_file() and p.stat().st_size > limit:
            raise InputError(f"{p.stat().st_size / 1e6:.4g} MB: parsing it would need about "
                             f"{gib(20 * p.stat().st_size)} of memory, more than the "
                             f"{gib(20 * limit)} available here", source=str(p))
        with p.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(p)) from None
    if len(data) > limit:
        raise InputError(f"more than {limit / 1e6:.4g} MB: too large to parse in the memory "
                         "available here", source=str(p))
    try:
        return data.decode()
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
