"""A user's P4 program compiled for BMv2 by p4c-bm2-ss, once per content.

`compile_program(source)` returns the BMv2 JSON and P4Info of a P4_16 v1model program from a
cache keyed by what the compiler would read: the program as p4c's preprocessor expands it
(the main file and every file it includes, v1model.p4 among them), the compiler's version and
the options. Editing an included file therefore recompiles; running the same program twice
does not. p4c runs in the source's folder on the file's bare name, so the JSON records the
same relative source paths wherever the cache lives, and equal sources give equal outputs
(and one pipeline cookie: a switch already running the program is not reloaded).

A program p4c refuses is one InputError line naming the file and line of the first error and
where p4c's full output was kept.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from innet.errors import InputError

P4C = "p4c-bm2-ss"
OPTIONS = ("--std", "p4-16", "--arch", "v1model")
TIMEOUT = 600.0  # a big program on a busy machine; p4c hangs on nothing we know of

# "basic.p4(81): [--Werror=type-error] error: Field tttl is not a member of header ipv4_t"
_P4C_ERROR = re.compile(r"^(?P<file>[^\s():]+)\((?P<line>\d+)\):.*?\berror: (?P<msg>.+)$")
# the preprocessor's: "inc.p4:1:10: fatal error: nope.p4: No such file or directory"
_CPP_ERROR = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: "
                        r"(?P<msg>.+)$")
_ANY_ERROR = re.compile(r"\berror: (?P<msg>.+)$")


@dataclass(frozen=True, slots=True)
class Compiled:
    """A compiled program: what `--program X.json --p4info X.p4info.txtpb` would name."""

    bmv2_json: Path
    p4info: Path
    log: Path  # p4c's output (warnings included)
    cached: bool  # found in the cache, p4c not run


def default_cache_dir() -> Path:
    """$INNET_CACHE_DIR/p4c, else $XDG_CACHE_HOME/innet/p4c, else ~/.cache/innet/p4c."""
    base = os.environ.get("INNET_CACHE_DIR")
    if base:
        return Path(base) / "p4c"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "innet" / "p4c"


def first_error(log: str, source: Path) -> str:
    """The first error p4c (or its preprocessor) reported, as `FILE:LINE: message`; FILE as
    the user would name it (p4c ran in the source's folder, so its paths are relative to it)."""
    for line in log.splitlines():
        m = _P4C_ERROR.match(line.strip()) or _CPP_ERROR.match(line.strip())
        if m:
            where = Path(m["file"])
            if not where.is_absolute():
                where = source.parent / where
            return f"{where}:{m['line']}: {m['msg'].strip()}"
    for line in log.splitlines():
        m = _ANY_ERROR.search(line)
        if m:
            return f"{source}: {m['msg'].strip()}"
    tail = [line for line in log.splitlines() if line.strip()]
    return f"{source}: {tail[-1].strip() if tail else 'p4c failed without a message'}"


@functools.lru_cache(maxsize=4)
def p4c_version(exe: str) -> str:
    """`p4c-bm2-ss --version`'s text: part of the cache key (a new compiler recompiles)."""
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    return (proc.stdout + proc.stderr).strip()


def _find_p4c(p4c: str) -> str:
    exe = shutil.which(p4c)
    if exe is None:
        raise InputError(f"{p4c} (p4c, the P4 compiler for BMv2) is not on PATH: install it "
                         "(setup.sh, docs/guide.md) or compile elsewhere and give --program "
                         "X.json --p4info X.p4info.txtpb")
    return exe


def cache_key(preprocessed: bytes, version: str) -> str:
    """What decides the outputs: the expanded program, the compiler and its options."""
    h = hashlib.sha256()
    for part in (version.encode(), " ".join(OPTIONS).encode(), preprocessed):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:24]


def compile_program(source: str | Path, cache_dir: str | Path | None = None, *,
                    p4c: str = P4C, timeout: float = TIMEOUT) -> Compiled:
    """The compiled program of `source` (a .p4 file), compiled now or found in the cache."""
    src = Path(source)
    if not src.is_file():
        raise InputError("no such P4 program file", source=str(src))
    exe = _find_p4c(p4c)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot make the compile cache: {exc.strerror}",
                         source=str(cache)) from None
    version = p4c_version(exe)
    stem = src.name.removesuffix(".p4")
    pre = _run(exe, [*OPTIONS, "-E", src.name], src, timeout)
    # p4c -E exits 1 even when it preprocessed the program: judge by what it printed
    if not pre.stdout.strip() or b"error" in pre.stderr:
        # no expanded program to key on: keep the log under the main file's own hash
        key = cache_key(src.read_bytes(), version)
        return _failed(cache / f"{key}.failed.log", pre.stderr, src)
    key = cache_key(pre.stdout, version)
    done = cache / key
    out = Compiled(done / f"{stem}.json", done / f"{stem}.p4info.txtpb", done / "p4c.log",
                   True)
    if out.bmv2_json.is_file() and out.p4info.is_file():
        return out
    work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=cache))
    proc = _run(exe, [*OPTIONS, "-o", str(work / out.bmv2_json.name), "--p4runtime-files",
                      str(work / out.p4info.name), src.name], src, timeout)
    log = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
    (work / "p4c.log").write_text(log)
    if proc.returncode != 0:
        failed = cache / f"{key}.failed.log"
        shutil.rmtree(work, ignore_errors=True)
        return _failed(failed, log.encode(), src)
    try:
        work.rename(done)  # atomic: a reader sees all of it or none
    except OSError:  # another process compiled the same program meanwhile: keep its copy
        shutil.rmtree(work, ignore_errors=True)
    return Compiled(out.bmv2_json, out.p4info, out.log, False)


def _run(exe: str, args: list[str], src: Path, timeout: float
         ) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run([exe, *args], cwd=src.parent, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InputError(f"{P4C} did not finish within {timeout:g} s", source=str(src)) from None


def _failed(log_path: Path, log: bytes, src: Path) -> Compiled:
    text = log.decode(errors="replace")
    log_path.write_text(text)
    raise InputError(f"{first_error(text, src)} (p4c's full output: {log_path})")
