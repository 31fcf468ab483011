"""Two error types the CLI turns into one line on stderr: bad input (exit 2) and a switch or
network that failed (exit 3); and the one way every input file is opened and read.

Anything the user can get wrong (a file, a node, a field, a flag) raises `InputError` with a
message that names the culprit; the CLI turns it into ``innet: <message>`` on stderr and exit
status 2 instead of a traceback. A switch that cannot be reached, refuses a request or goes
away raises a `NetworkError` (the P4Runtime client's `SwitchError`): the same one line, exit
status 3, so a script can tell "fix your input" from "look at the network". Bugs stay
ordinary exceptions and keep their tracebacks.

Messages quote what the user wrote (file names, node ids, values), which may hold newlines,
control characters, lone surrogates or a hundred thousand characters. `one_line` escapes the
first three and elides the middle of the last, so every message stays one line of at most
`MAX_MESSAGE` characters; `quote` does the same for one value inside a message, and
`elide_join` for a list of them (a cycle of 100,000 nodes).

`open_input` is the only way a path the user gives is opened: it refuses anything but a
regular file (a FIFO would block forever, /dev/zero never ends, a directory or a symlink loop
has nothing to read) and a file larger than the caller's bound, before reading a byte.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from innet.memory import available_memory, gib

EXIT_INPUT = 2  # bad input: a flag, a file, a field
EXIT_NETWORK = 3  # a switch or the network failed
MAX_MESSAGE = 300  # characters of one error line, "innet: " included
MAX_QUOTED = 60  # characters of one quoted name or value inside a message
MAX_SOURCE = 150  # characters of the file name that starts a message: the path matters most

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    """What repr writes for a character it does not print: controls, line and paragraph
    separators, lone surrogates (no UTF-8 stream can encode them), unassigned code points."""
    if ch.isprintable():
        return ch
    return _ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else
                                f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else
                                f"\\U{ord(ch):08x}")


def printable(text: str) -> str:
    """`text` with every character repr would escape escaped the same way."""
    return text if text.isprintable() else "".join(map(_escape, text))


def elide(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its start and end around a count of
    what was left out (the start names the culprit, the end often says what is wrong)."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(f"...[{len(text)} chars]..."))
    head, tail = keep - keep // 3, keep // 3
    return f"{text[:head]}...[{len(text) - keep} chars]...{text[len(text) - tail:]}"


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` as one printable line of at most `limit` characters: line breaks, control
    characters and lone surrogates escaped (as repr does), the middle elided with a count."""
    return elide(printable(text), limit)


def quote(value: object, limit: int = MAX_QUOTED) -> str:
    """A name or value quoted for a message: repr (so escaped and visibly a string), with its
    middle elided past `limit` characters."""
    return elide(printable(repr(value)), limit)


def elide_join(items: Iterable[str], sep: str = " -> ", keep: int = 4,
               limit: int = MAX_QUOTED) -> str:
    """`items` joined by `sep`, each elided to `limit`; past 2 x `keep` of them only the first
    and last `keep` are shown, with the count of the others between."""
    shown = list(items)
    if len(shown) > 2 * keep:
        middle = f"... ({len(shown) - 2 * keep} more)"
        shown = [*shown[:keep], middle, *shown[-keep:]]
    return sep.join(one_line(s, limit) for s in shown)


def finite_number(value: object) -> bool:
    """A JSON number that is a finite float once converted: not a boolean, not NaN or an
    infinity, and no integer past float's range (math.isfinite raises OverflowError on
    10**400, which JSON's integers allow)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return abs(value) <= sys.float_info.max
    return math.isfinite(value)


class NetworkError(Exception):
    """A switch or the network failed (unreachable, refused, gone); the message names it."""


class InputError(ValueError):
    """Bad input from the user: the message names the file, node or field at fault.

    The message is made one line and bounded here, so it prints the same wherever it is
    caught (the CLI's top level, a per-switch report)."""

    def __init__(self, message: str, *, source: str | os.PathLike[str] | None = None) -> None:
        # a Path is as good a source as its text: the commands name the files they write so
        self.source = os.fspath(source) if source is not None else None
        where = f"{one_line(self.source, MAX_SOURCE)}: " if self.source else ""
        super().__init__(one_line(where + message, MAX_MESSAGE - len("innet: ")))


# ---------------------------------------------------------------------------------------------
# Reading what the user names

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


@contextmanager
def open_input(path: str | Path, *, what: str = "file",
               max_bytes: int | None = None, too_large: str = "") -> Iterator[BinaryIO]:
    """The user's regular file `path`, opened for reading, or an InputError naming it.

    Opened without blocking (a FIFO would otherwise wait forever for a writer), then checked
    on the open descriptor (no race with a rename): a directory, FIFO, device or socket is
    refused, as is a file larger than `max_bytes` (with `too_large` saying why), before
    anything is read. A symlink loop or a missing file is one line too.
    """
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = ("a symlink loop" if exc.errno == errno.ELOOP
               else f"cannot read {what}: {exc.strerror}")
        raise InputError(why, source=source) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{_kind(info.st_mode)}, not a regular {what}: give the path of "
                             f"a {what}", source=source)
        if max_bytes is not None and info.st_size > max_bytes:
            raise InputError(f"{info.st_size / 1e6:.4g} MB, more than the {max_bytes / 1e6:.4g}"
                             f" MB a {what} may have here{too_large}", source=source)
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


READ_CHUNK = 1 << 20


def read_at_most(f: BinaryIO, max_bytes: int) -> bytes:
    """What `f` holds, read until its end or until more than `max_bytes` have come.

    Not `f.read(max_bytes + 1)`: a buffered reader allocates the whole size it is asked for
    before it reads, and the bound here is a share of the machine's memory (a P4Info file
    read that way asked for 1.2 GB, the peak of every `net up`)."""
    chunks: list[bytes] = []
    total = 0
    while total <= max_bytes:
        chunk = f.read(min(READ_CHUNK, max_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_bytes(path: str | Path, max_bytes: int, *, what: str = "file", too_large: str = "",
               stdin: bool = False) -> bytes:
    """All of a user's regular file (or standard input for "-" when `stdin`), refusing one
    larger than `max_bytes` before reading it (for stdin: once more than that has come)."""
    if stdin and str(path) == "-":
        data = read_at_most(sys.stdin.buffer, max_bytes)
        if len(data) > max_bytes:
            raise InputError(f"more than {max_bytes / 1e6:.4g} MB on standard input"
                             f"{too_large}", source="-")
        return data
    try:
        with open_input(path, what=what, max_bytes=max_bytes, too_large=too_large) as f:
            data = read_at_most(f, max_bytes)
    except OSError as exc:  # a read error after a good open (EIO, a file gone stale)
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    if len(data) > max_bytes:  # it grew while we read it
        raise InputError(f"grew past {max_bytes / 1e6:.4g} MB while being read", source=str(path))
    return data


def text_limit() -> int:
    """Bytes of a JSON file this machine can parse: a document takes 10-20 times its size
    once parsed into Python objects."""
    return available_memory() // 20


def read_text(path: str | Path) -> str:
    """A user's file (or "-", standard input) as text; an unreadable one is an InputError
    naming it. A file whose parse would not fit in memory is refused before it is read. A
    UTF-8 byte order mark (which some editors write) is dropped."""
    limit = text_limit()
    data = read_bytes(path, limit, stdin=True,
                      too_large=f": parsing it would need about {gib(20 * limit)} of memory")
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise InputError(f"not a UTF-8 text file (byte {exc.start})", source=str(path)) from None
    return text.removeprefix("\ufeff")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(doc: Any) -> str | None:
    """The first string of the parsed document holding a lone surrogate (JSON's \\ud800
    escapes decode to one; it is not Unicode text and no output can print it)."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def parse_json(text: str, source: str | None) -> Any:
    """JSON, or an InputError that names the file and the line."""
    try:
        doc = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} at line {exc.lineno}",
                         source=source) from None
    except RecursionError:
        raise InputError("not valid JSON here: nested too deeply", source=source) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise InputError(f"not valid JSON: {exc}", source=source) from None
    if _SURROGATE_ESCAPE.search(text):
        bad = _lone_surrogate(doc)
        if bad is not None:
            raise InputError(f"the string {quote(bad)} holds a lone UTF-16 surrogate: not "
                             "Unicode text", source=source)
    return doc


def read_json(path: str | Path) -> Any:
    """Every input file of innet is read through here, so every one fails the same way."""
    return parse_json(read_text(path), str(path))
