"""One error type for bad user input, so the CLI can print one line and exit 2.

Anything the user can get wrong (a file, a node, a field, a flag) raises `InputError` with a
message that names the culprit; the CLI turns it into ``innet: <message>`` on stderr and exit
status 2 instead of a traceback. Bugs stay ordinary exceptions and keep their tracebacks.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user: the message names the file, node or field at fault."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)
