"""Bounded input: every file advisor reads goes through here.

A file is read only when it is a regular file (not ``/dev/zero``, a FIFO, a socket or a
directory) and no larger than its limit; the limit is checked with ``stat`` before reading and
again by the read itself (a file that grows, or one whose size the kernel does not state, as
in sysfs and ``/proc``, is never read past ``limit + 1`` bytes). JSON is checked for nesting
depth before it is parsed. Every refusal is a :class:`~advisor.errors.UserInputError`: one
line, exit 2, with a hint.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from advisor.errors import UserInputError

#: the deepest JSON nesting accepted (config.json files nest 3-4 levels; the probe 3)
MAX_JSON_DEPTH = 64
#: default size limit of a file a user hands advisor
DEFAULT_LIMIT = 4 * 1024 * 1024

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


def _shown(path: Path | str) -> str:
    text = str(path)
    return text if len(text) <= 120 else text[:117] + "..."


def read_bytes(path: str | Path, *, limit: int = DEFAULT_LIMIT, what: str = "file",
               hint: str | None = None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (else UserInputError)."""
    shown = f"{what} {_shown(path)}" if what else _shown(path)
    try:
        p = Path(path)
        st = os.stat(p)
    except FileNotFoundError as exc:
        raise UserInputError(f"{shown}: cannot read: no such file", hint=hint) from exc
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, ELOOP, a NUL byte in the name
        raise UserInputError(f"{shown}: cannot read: "
                             f"{getattr(exc, 'strerror', None) or exc}", hint=hint) from exc
    if stat.S_ISDIR(st.st_mode):
        raise UserInputError(f"{shown}: is a directory, not a file", hint=hint)
    if not stat.S_ISREG(st.st_mode):
        raise UserInputError(f"{shown}: not a regular file (a device, FIFO or socket)",
                             hint=hint or "give a regular file")
    if st.st_size > limit:
        raise UserInputError(f"{shown}: {st.st_size:,} bytes, more than the {limit:,} "
                             "accepted", hint=hint)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
                raise UserInputError(f"{shown}: not a regular file", hint=hint)
            chunks: list[bytes] = []
            got = 0
            while got <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise UserInputError(f"{shown}: cannot read: {exc.strerror or exc}", hint=hint) from exc
    if got > limit:
        raise UserInputError(f"{shown}: more than the {limit:,} bytes accepted", hint=hint)
    return b"".join(chunks)


def read_text(path: str | Path, *, limit: int = DEFAULT_LIMIT, what: str = "file",
              hint: str | None = None, errors: str = "strict") -> str:
    """The UTF-8 text of ``path`` (bounded as :func:`read_bytes`)."""
    data = read_bytes(path, limit=limit, what=what, hint=hint)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        shown = f"{what} {_shown(path)}" if what else _shown(path)
        raise UserInputError(f"{shown}: not UTF-8 text (byte {exc.start})", hint=hint) from exc


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text (strings skipped)."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(_STRINGS.sub("", text)):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def loads_json(text: str, *, what: str = "JSON", hint: str | None = None,
               max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parsed JSON, refused (UserInputError) when nested deeper than ``max_depth`` or invalid.
    NaN and Infinity literals are refused too: JSON has none."""
    if json_depth(text) > max_depth:
        raise UserInputError(f"{what}: JSON nested deeper than {max_depth} levels", hint=hint)

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        # json.loads keeps the last of two equal keys: a config.json that says
        # hidden_size twice would be sized on whichever came last, silently
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"the key {key[:60]!r} appears twice in one object")
            out[key] = value
        return out

    try:
        return json.loads(text, parse_constant=no_constant, object_pairs_hook=no_duplicates)
    except RecursionError as exc:
        raise UserInputError(f"{what}: JSON nested too deeply", hint=hint) from exc
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise UserInputError(f"{what}: not valid JSON"
                             + (f" (line {line}: {getattr(exc, 'msg', exc)})" if line
                                else f": {exc}"), hint=hint) from exc


def read_json(path: str | Path, *, limit: int = DEFAULT_LIMIT, what: str = "file",
              hint: str | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A bounded JSON file, parsed."""
    text = read_text(path, limit=limit, what=what, hint=hint)
    shown = f"{what} {_shown(path)}" if what else _shown(path)
    return loads_json(text, what=shown, hint=hint, max_depth=max_depth)


def check_out_dir(out: Path, flag: str = "--out") -> None:
    """``out`` can be created (or is an empty folder) in a writable parent: refuse before any
    work, so that nothing is half-written."""
    shown = _shown(out)
    try:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UserInputError(f"{flag} {shown} exists and is not an empty folder",
                                 hint="give a new folder; advisor does not overwrite files")
        parent = out.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{flag} {shown}: cannot use it: "
                             f"{getattr(exc, 'strerror', None) or exc}",
                             hint="give a new folder in a writable place") from exc
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UserInputError(f"{flag} {shown}: {parent} is not a writable folder",
                             hint="give a new folder in a writable place")
