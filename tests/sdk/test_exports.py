"""The SDK can be type-checked by its users: the package is marked typed, and every model a
public function returns (or a public model holds) is importable from ``advisor`` itself.
(``mypy --strict examples/`` against the installed package runs in .ci/run.)"""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path

from pydantic import BaseModel

import advisor


def _classes(tp: object) -> set[type]:
    """The advisor classes a (resolved) annotation mentions."""
    found: set[type] = set()
    if isinstance(tp, type) and tp.__module__.startswith("advisor"):
        found.add(tp)
    for arg in typing.get_args(tp):
        found |= _classes(arg)
    return found


def _ns() -> dict[str, object]:
    ns: dict[str, object] = {}
    for name in advisor.__all__:
        ns[name] = getattr(advisor, name)
    return ns


def test_the_package_is_marked_typed():
    assert (Path(advisor.__file__).parent / "py.typed").is_file()


def test_every_returned_model_is_exported():
    # what a function returns, directly or in a container/union (the models nested inside those
    # are reached as attributes and need no import to be used)
    exported = {id(getattr(advisor, n)) for n in advisor.__all__}
    missing: dict[str, set[str]] = {}
    seen: set[type] = set()
    todo: list[tuple[str, type]] = []
    for name in advisor.__all__:
        obj = getattr(advisor, name)
        if isinstance(obj, types.FunctionType):
            mod = inspect.getmodule(obj)
            hints = typing.get_type_hints(obj, globalns={**vars(mod), **_ns()})
            for cls in _classes(hints.get("return")):
                todo.append((name, cls))
    while todo:
        where, cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if id(cls) not in exported and issubclass(cls, BaseModel):
            missing.setdefault(cls.__name__, set()).add(where)
    assert not missing, f"returned but not importable from advisor: {missing}"


def test_render_result_is_typed_not_any():
    hints = typing.get_type_hints(advisor.RenderResult, globalns=_ns())
    assert hints["instance"] is advisor.InstanceType
    assert hints["plan"] is advisor.Plan
    assert typing.get_args(hints["commands"]) == (advisor.LaunchLine,)
