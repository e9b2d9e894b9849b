"""One declaration per parameter: every SDK keyword and CLI option that shares a name with a
field of advisor.Question has that field's type, value set and default, and is checked against
it, so no function accepts what another refuses."""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any, get_args

import pytest
import typer.main
from pydantic import ValidationError
from pydantic_core import PydanticUndefined

import advisor
from advisor.choices import KvCacheDtype, Objective
from advisor.cli import app
from advisor.core.question import Question

FIELDS = Question.model_fields
NS = {n: getattr(advisor, n) for n in advisor.__all__}

#: a keyword that shares a field's name on purpose with another default, and why
OWN_DEFAULTS = {
    # one replica at a fixed number of sequences (advisor perf), not a deployment's users
    ("estimate", "concurrency"): 1,
}


def _without_none(tp: Any) -> Any:
    args = [a for a in get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (types.UnionType, typing.Union) and len(args) == 1:
        return args[0]
    return tp


def _sdk_functions() -> list[tuple[str, Any]]:
    return [(n, getattr(advisor, n)) for n in advisor.__all__
            if inspect.isfunction(getattr(advisor, n))]


def _shared() -> list[tuple[str, str, Any, Any]]:
    """(function, keyword, its resolved annotation, its default) for every shared name."""
    rows = []
    for fname, fn in _sdk_functions():
        hints = typing.get_type_hints(fn, globalns={**vars(inspect.getmodule(fn)), **NS})
        for p in inspect.signature(fn).parameters.values():
            if p.name in FIELDS:
                rows.append((fname, p.name, hints[p.name], p.default))
    return rows


def test_enough_is_shared_to_mean_something():
    names = {(f, k) for f, k, _, _ in _shared()}
    for pair in [("recommend", "kv_cache_dtype"), ("fit", "kv_cache_dtype"),
                 ("estimate", "kv_cache_dtype"), ("fleet", "max_tpot_ms"),
                 ("render_files", "vllm_version"), ("provision", "vllm_version"),
                 ("recommend", "objective"), ("ticket", "ctx")]:
        assert pair in names, pair


@pytest.mark.parametrize(("fname", "name", "hint", "default"), _shared(),
                         ids=[f"{f}.{k}" for f, k, _, _ in _shared()])
def test_sdk_keyword_has_the_fields_type_and_default(fname, name, hint, default):
    field = FIELDS[name]
    # a function may require what the question leaves optional, or leave optional what the
    # question requires (ticket: the workload is optional) — never another type
    assert _without_none(hint) == _without_none(field.annotation), (fname, name, hint)
    if default is inspect.Parameter.empty:
        return
    want = OWN_DEFAULTS.get((fname, name), None if field.default is PydanticUndefined
                            else field.default)
    assert default == want, (fname, name, default)


def _cli_options() -> list[tuple[str, str, Any]]:
    group = typer.main.get_command(app)  # typer's own click: read by duck typing
    rows = []
    for cname, cmd in sorted(group.commands.items()):
        cmds = ([(f"{cname} {s}", c) for s, c in cmd.commands.items()]
                if hasattr(cmd, "commands") else [(cname, cmd)])
        for full, c in cmds:
            for p in c.params:
                if p.name in FIELDS and getattr(p, "param_type_name", "") == "option":
                    rows.append((full, p.name, p))
    return rows


def test_cli_options_have_the_fields_defaults_and_list_the_value_sets():
    rows = _cli_options()
    assert {(c, n) for c, n, _ in rows} >= {("recommend", "kv_cache_dtype"),
                                            ("fit", "kv_cache_dtype"), ("perf", "kv_cache_dtype"),
                                            ("recommend", "objective")}
    for command, name, opt in rows:
        field = FIELDS[name]
        if field.default is not PydanticUndefined and field.default is not None:
            if command == "perf" and name == "concurrency":
                continue  # one replica's sequences, as estimate (OWN_DEFAULTS)
            assert opt.default == field.default, (command, name, opt.default)
        choices = {"kv_cache_dtype": KvCacheDtype, "objective": Objective}.get(name)
        if choices is not None:
            assert all(v in (opt.help or "") for v in get_args(choices)), (command, opt.help)


BAD = {"kv_cache_dtype": "fp8_x", "objective": "fastest", "vllm_version": "", "ctx": 0}


@pytest.mark.parametrize(("fname", "name"), sorted({(f, k) for f, k, _, _ in _shared()
                                                    if k in BAD}))
def test_every_function_refuses_what_the_field_refuses(fname, name):
    """The same bad value, the same one-line refusal, whichever function gets it (before any
    work: no catalog entry, file or cloud is touched)."""
    fn = getattr(advisor, fname)
    args: dict[str, Any] = {"model": "llama-3-8b", "ctx": 8192}
    params = inspect.signature(fn).parameters
    positional = {"fit": ("llama-3-8b", "H100-SXM"), "estimate": ("llama-3-8b", "H100-SXM"),
                  "ticket": ("aws:p5.48xlarge",)}.get(fname, ())
    if positional:
        args = {"ctx": 8192} if fname == "ticket" else {}
        if fname == "ticket":
            args["model"] = "llama-3-8b"
        if fname == "estimate":
            args = {"input_len": 128, "output_len": 16}
    if fname == "fleet":
        args["rps"] = 5.0
    if fname == "fleet_curve":
        args.update(rps_from=1.0, rps_to=5.0)
    args = {k: v for k, v in args.items() if k in params}
    args[name] = BAD[name]
    with pytest.raises(advisor.UserInputError) as e:
        fn(*positional, **args)
    assert f"--{name.replace('_', '-')}" in str(e.value) and "\n" not in str(e.value)


def test_ask_is_recommend_for_a_question_built_once():
    q = advisor.Question(model="qwen3-8b", ctx=8192, rps=5.0, providers=["aws", "gcp"])
    asked = advisor.ask(q, top=3)
    kw = {k: v for k, v in q.model_dump().items() if v is not None}
    said = advisor.recommend(**kw, top=3)
    assert [(r.provider, r.instance, r.plan.tp) for r in asked] == \
           [(r.provider, r.instance, r.plan.tp) for r in said]
    # a copy with an update is checked again (pydantic's model_copy does not validate)
    with pytest.raises(advisor.UserInputError, match="--kv-cache-dtype"):
        advisor.ask(q.model_copy(update={"kv_cache_dtype": "fp8_x"}))
    with pytest.raises(ValidationError, match="finite"):  # the model itself, as pydantic does
        advisor.Question(model="qwen3-8b", ctx=8192, rps=float("nan"))
