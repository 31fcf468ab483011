"""Progress bars, only when someone watches: on a terminal, never in a log or a pipe.

A bar written to a file or a pipe is a stream of carriage-return frames (a demo's log fills
with them), so every bar of innet comes from here and is drawn only when standard error is a
terminal. `bar(...)` takes tqdm's arguments; `show=False` turns a bar off even then.
"""

from __future__ import annotations

import sys
from typing import Any


def on_terminal() -> bool:
    """Whether standard error, where the bars go, is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


def bar(*args: Any, show: bool = True, **kwargs: Any) -> Any:
    """tqdm(*args, **kwargs) on standard error, disabled unless `show` and on a terminal."""
    from tqdm import tqdm

    kwargs.pop("disable", None)
    kwargs.pop("file", None)
    return tqdm(*args, disable=not (show and on_terminal()), file=sys.stderr, **kwargs)
