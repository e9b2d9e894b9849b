"""The one error tree of advisor.

Every error a user can meet is an :class:`AdvisorError`. Each carries a one-line
``message`` (what is wrong) and a ``hint`` (what to do about it). The CLI prints
``error: <message>`` and ``hint: <hint>`` on stderr and exits with ``exit_code``;
a traceback is shown only with ``--debug``.

::

    AdvisorError                      exit 1 unless a subclass says otherwise
    ├── UserInputError                exit 2: the input is wrong, fix it and retry
    │   ├── CatalogError              a catalog file, entry or field is broken
    │   ├── NotFoundError             an alias / instance / GPU the catalog lacks
    │   └── ModelConfigError          a config.json that cannot be read or is incomplete
    └── OperationError                exit 1: a well-formed request failed while running
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterable
from difflib import get_close_matches
from typing import Any, TypeVar


class AdvisorError(Exception):
    """Base of every error advisor raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        # One line each: a message spanning lines would break the one-line contract.
        self.message = " ".join(str(message).split())
        self.hint = " ".join(str(hint).split()) if hint else None
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class UserInputError(AdvisorError):
    """The request itself is wrong; the user can fix it."""

    exit_code = 2


class CatalogError(UserInputError):
    """A catalog file, entry or field is broken.

    ``where`` is ``file: entry: field`` (the parts that are known).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        entry: str | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.file = file
        self.entry = entry
        self.field = field
        where = ": ".join(p for p in (file, entry, field) if p)
        super().__init__(f"{where}: {message}" if where else message, hint)


class NotFoundError(UserInputError):
    """A name that the catalog does not hold; suggests the closest ones."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str | None = None):
        known = list(known)
        close = get_close_matches(name, known, n=3, cutoff=0.5)
        if not close:
            lowered = name.lower()
            close = [k for k in known if lowered and lowered in k.lower()][:3]
        message = f"unknown {kind} {name!r}"
        if close:
            message += f"; did you mean {', '.join(repr(c) for c in close)}?"
        elif hint is None and known:  # nothing close: say what there is
            names = sorted(known)
            hint = "known: " + ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
        self.kind = kind
        self.name = name
        self.suggestions = close
        super().__init__(message, hint)


class ModelConfigError(UserInputError):
    """A model config.json that cannot be read or lacks a field."""


class OperationError(AdvisorError):
    """A well-formed request that failed while being carried out."""

    exit_code = 1


# -- the SDK's types at the door --------------------------------------------------------------
_F = TypeVar("_F", bound=Callable[..., Any])

#: annotation words the door checks (others pass: pydantic models check themselves)
_SIMPLE: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "None": lambda v: v is None,
    "Path": lambda v: isinstance(v, os.PathLike),
    "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "dict[str, Any]": lambda v: isinstance(v, dict),
}


def _word_test(word: str, names: dict[str, Any]) -> Callable[[Any], bool] | None:
    """The test for one annotation word: a simple one, or a class the function's module
    names (``Deployment``, ``Mapping[str, str]`` -> its base class); None: not checked."""
    import collections.abc as abc

    if word in _SIMPLE:
        return _SIMPLE[word]
    base = word.split("[", 1)[0].strip()
    found = names.get(base, getattr(abc, base, None))
    if isinstance(found, type):
        return lambda v: isinstance(v, found)
    return None


def _checker(annotation: object, names: dict[str, Any]) -> Callable[[Any], bool] | None:
    """A test for a string annotation whose every alternative can be tested (``str | None``,
    ``Deployment``), else None."""
    if not isinstance(annotation, str):
        return None
    words, depth, start = [], 0, 0
    for i, ch in enumerate(annotation):  # split on the top level's '|' only
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "|" and depth == 0:
            words.append(annotation[start:i].strip())
            start = i + 1
    words.append(annotation[start:].strip())
    tests = [_word_test(w, names) for w in words]
    if not words or any(t is None for t in tests):
        return None
    return lambda v: any(t(v) for t in tests if t is not None)


def typed(func: _F) -> _F:
    """An SDK function whose simply-typed arguments (str, int, float, bool, paths, lists of
    str, and unions of them) are checked at the call: a wrong type is a UserInputError naming
    the parameter — never an AttributeError from deep inside (a wrong keyword name stays
    Python's TypeError)."""
    sig = inspect.signature(func)
    import builtins

    names = {**vars(builtins), **getattr(func, "__globals__", {})}
    checks = {n: c for n, p in sig.parameters.items()
              if (c := _checker(p.annotation, names)) is not None}

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return func(*args, **kwargs)  # let Python word the wrong call
        for name, value in bound.arguments.items():
            check = checks.get(name)
            if check is not None and not check(value):
                want = sig.parameters[name].annotation
                raise UserInputError(f"{name} must be {want}, not {type(value).__name__}",
                                     hint=f"see help(advisor.{func.__name__})")
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
