"""The ``advisor`` command line: parse, call the SDK, print. Nothing else lives here."""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import inspect
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from advisor._version import __version__
from advisor.errors import AdvisorError

#: Click's own control-flow exceptions (help, usage errors, --version): let them through.
#: Typer >= 0.29 vendors Click, older releases use the click package; both expose these
#: through typer's public names, and ClickException is BadParameter's ancestor in both.
_CLICK_FLOW: tuple[type[BaseException], ...] = (
    typer.Exit, typer.Abort,
    *(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"),
)


_USAGE_ERROR: tuple[type[BaseException], ...] = tuple(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def _bare_group_help(exc: BaseException, ctx: Any) -> None:
    """A group run without a command (``advisor``, ``advisor catalog``): its help on stdout,
    exit 2. Click reports that as a usage error whose message is the help text."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # by name: click's and typer's vendored one
        typer.echo(exc.format_message())  # type: ignore[attr-defined]
        ctx.exit(2)


class _AdvisorGroup(TyperGroup):
    """Turns every AdvisorError into one line on stderr and its exit code."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        args = _debug_first(args)
        try:
            return super().parse_args(ctx, args)
        except _USAGE_ERROR as exc:
            _bare_group_help(exc, ctx)
            raise
        except BrokenPipeError:  # ``advisor --help | head``
            _stdout_gone()
            raise typer.Exit(_SIGPIPE_EXIT) from None

    def invoke(self, ctx: Any) -> Any:  # a click Context (vendored or not)
        try:
            return super().invoke(ctx)
        except AdvisorError as exc:
            if _debug(ctx):
                raise
            from advisor.cli.output import error

            error(exc.message, exc.hint)
            ctx.exit(exc.exit_code)
        except _USAGE_ERROR as exc:  # a bad option value: one line, like every other error
            _bare_group_help(exc, getattr(exc, "ctx", None) or ctx)
            if _debug(ctx):
                raise
            from advisor.cli.output import error

            sub = getattr(getattr(exc, "ctx", None), "command_path", "advisor")
            error(exc.format_message(), f"see '{sub} --help'")  # type: ignore[attr-defined]
            ctx.exit(2)
        except _CLICK_FLOW:
            raise
        except KeyboardInterrupt as exc:
            name = getattr(exc, "name", None)  # provisioning.Interrupted: a launch was under way
            if isinstance(name, str):
                from advisor.cli.output import error

                error(f"interrupted while launching {name}: an instance may already run, "
                      f"tagged advisor-deployment={name}",
                      f"'advisor status {name} --reconcile' finds it, 'advisor down {name}' "
                      "removes it")
            ctx.exit(130)
        except BrokenPipeError:  # stdout's reader left (| head): stop quietly, as cat does
            _stdout_gone()
            ctx.exit(_SIGPIPE_EXIT)
        except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
            if _debug(ctx):
                raise
            from advisor.cli.output import error

            error(f"internal error: {type(exc).__name__}: {exc}",
                  "run again with --debug for the traceback, and report it")
            ctx.exit(1)


#: the exit status of a command that the shell saw killed by SIGPIPE (128 + 13)
_SIGPIPE_EXIT = 141


def _debug_first(args: list[str]) -> list[str]:
    """``--debug`` anywhere before ``--`` (``advisor recommend ... --debug``) becomes the
    root option it is: moved to the front, where the root callback reads it."""
    cut = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:cut]:
        return args
    return ["--debug", *(a for a in args[:cut] if a != "--debug"), *args[cut:]]


def _stdout_gone() -> None:
    """Point stdout at /dev/null, so that the flush at exit writes nowhere rather than
    raising BrokenPipeError again (the recipe of Python's signal module documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (a test runner's buffer)
        pass


def _debug(ctx: typer.Context) -> bool:
    root = ctx.find_root()
    return bool((root.obj or {}).get("debug")) or os.environ.get("ADVISOR_DEBUG") == "1"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"advisor {__version__}")
        raise typer.Exit()


def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show tracebacks on errors (also accepted after the command).")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    ctx.obj = {"debug": debug}


#: sub-apps (name -> module under advisor.cli with an ``app``), then the commands (name ->
#: module, function), in the order help lists them after typer puts commands first
_GROUPS: dict[str, str] = {"catalog": "catalog", "models": "models"}
_COMMANDS: dict[str, tuple[str, str]] = {
    "fit": ("fit", "fit_cmd"),
    "perf": ("recommend", "perf_cmd"),
    "recommend": ("recommend", "recommend_cmd"),
    "plan": ("fleet", "plan_cmd"),
    "topology": ("topology", "topology_cmd"),
    "doctor": ("doctor", "doctor_cmd"),
    "render": ("render", "render_cmd"),
    "provision": ("provision", "provision_cmd"),
    "status": ("provision", "status_cmd"),
    "down": ("provision", "down_cmd"),
    "ticket": ("ticket", "ticket_cmd"),
}
#: root options that take no value (skipped when looking for the command a run asks for)
_ROOT_FLAGS = ("--debug",)


def _evaluated(func: Any) -> Any:
    """``func`` with its annotations evaluated once, as typer would evaluate them. typer reads
    a command's signature twice each time it builds the CLI and (PEP 563) compiles and
    evaluates every string annotation on each read; evaluated here, it reads objects."""
    notes = getattr(func, "__annotations__", None)
    if notes and any(isinstance(v, str) for v in notes.values()):
        func.__annotations__ = inspect.get_annotations(func, eval_str=True)
    return func


def _listed() -> None:
    """Stands for every command in the summary CLI, which only lists them."""


def _make_app(names: list[str] | None = None, *, summary: bool = False) -> typer.Typer:
    """The CLI with every command, or with only ``names``: a run of one command then imports
    that command's module alone (each imports its heavy modules inside the command).

    ``summary``: every command by name and help text but without its options, which is all a
    run that names no command (``advisor --help``, ``--version``, a typo) shows; typer then
    reads no command's signature."""
    new = typer.Typer(
        cls=_AdvisorGroup,
        name="advisor",
        help="Pick the cloud instance that serves an LLM best with vLLM, and run it NUMA-local.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # click's plain help and usage errors: typer's rich formatting imports rich,
        # markdown-it and rich.traceback (~0.2 s) on every --help
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    new.callback()(_evaluated(_root))
    wanted = names if names is not None else [*_GROUPS, *_COMMANDS]
    for name in _GROUPS:
        if name in wanted:
            sub: typer.Typer = importlib.import_module(f"advisor.cli.{_GROUPS[name]}").app
            if summary:
                sub = typer.Typer(help=sub.info.help)
            for info in sub.registered_commands:
                _evaluated(info.callback)
            new.add_typer(sub, name=name)
    for name, (module, func) in _COMMANDS.items():
        if name in wanted:
            cmd = getattr(importlib.import_module(f"advisor.cli.{module}"), func)
            if summary:
                new.command(name, help=inspect.getdoc(cmd))(_listed)
            else:
                new.command(name)(_evaluated(cmd))
    return new


def _command_of(args: list[str]) -> str | None:
    """The command (or sub-app) a run names, when that one alone need be loaded; None for
    help, --version, no command or an unknown one: the whole CLI answers those."""
    for arg in args:
        if arg in _ROOT_FLAGS:
            continue
        return arg if arg in _COMMANDS or arg in _GROUPS else None
    return None


if TYPE_CHECKING:
    #: the whole CLI (built on first use: ``import advisor.cli`` loads no command module)
    app: typer.Typer


def __getattr__(name: str) -> Any:
    if name == "app":
        value = _make_app()
        globals()["app"] = value  # once built, a plain attribute
        return value
    raise AttributeError(f"module 'advisor.cli' has no attribute {name!r}")


@contextlib.contextmanager
def _pydantic_plugins_off() -> Iterator[None]:
    """No pydantic plugins for the run (as typer does while it builds its own validators):
    finding them scans the metadata of every installed distribution (~10 ms) when the first
    model is built, and they only observe validation. ``PYDANTIC_DISABLE_PLUGINS=`` (empty)
    or any other value set beforehand is left as it is."""
    if "PYDANTIC_DISABLE_PLUGINS" in os.environ:
        yield
        return
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    try:
        yield
    finally:
        os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code.

    Without ``argv`` (the ``advisor`` script, ``python -m advisor``) the process ends after
    the run, and the objects it made are left to the OS: the cyclic garbage collector's
    pass over them at interpreter exit is skipped (~30 ms); atexit handlers still run."""
    if argv is None:
        atexit.register(gc.freeze)  # runs before the exit-time collection, which then skips all
    args = argv if argv is not None else sys.argv[1:]
    name = _command_of(args)
    if name is not None:
        cli = _make_app([name])
    elif any(a in _COMMANDS or a in _GROUPS for a in args):  # e.g. -h recommend: all decide
        cli = __getattr__("app")
    else:  # no command can run: what the CLI lists is enough
        cli = _make_app(summary=True)
    try:
        try:
            with _pydantic_plugins_off():
                cli(args=args, prog_name="advisor", standalone_mode=True)
        finally:
            sys.stdout.flush()  # here, where a closed pipe can be answered, not at exit
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BrokenPipeError:
        _stdout_gone()
        return _SIGPIPE_EXIT
    return 0
