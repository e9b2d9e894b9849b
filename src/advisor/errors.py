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

from collections.abc import Iterable
from difflib import get_close_matches


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
        self.kind = kind
        self.name = name
        self.suggestions = close
        super().__init__(message, hint)


class ModelConfigError(UserInputError):
    """A model config.json that cannot be read or lacks a field."""


class OperationError(AdvisorError):
    """A well-formed request that failed while being carried out."""

    exit_code = 1
