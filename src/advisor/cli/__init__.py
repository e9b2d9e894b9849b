"""The ``advisor`` command line: parse, call the SDK, print. Nothing else lives here."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from advisor import __version__
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


class _AdvisorGroup(TyperGroup):
    """Turns every AdvisorError into one line on stderr and its exit code."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        args = _debug_first(args)
        try:
            return super().parse_args(ctx, args)
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
            if _debug(ctx):
                raise
            from advisor.cli.output import error

            sub = getattr(getattr(exc, "ctx", None), "command_path", "advisor")
            error(exc.format_message(), f"see '{sub} --help'")  # type: ignore[attr-defined]
            ctx.exit(2)
        except _CLICK_FLOW:
            raise
        except KeyboardInterrupt:
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


app = typer.Typer(
    cls=_AdvisorGroup,
    name="advisor",
    help="Pick the cloud instance that serves an LLM best with vLLM, and run it NUMA-local.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"advisor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show tracebacks on errors (also accepted after the command).")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    ctx.obj = {"debug": debug}


from advisor.cli import catalog as _catalog  # noqa: E402
from advisor.cli import fit as _fit  # noqa: E402
from advisor.cli import fleet as _fleet  # noqa: E402
from advisor.cli import models as _models  # noqa: E402
from advisor.cli import provision as _provision  # noqa: E402
from advisor.cli import recommend as _recommend  # noqa: E402
from advisor.cli import render as _render  # noqa: E402
from advisor.cli import ticket as _ticket  # noqa: E402
from advisor.cli import topology as _topology  # noqa: E402

app.add_typer(_catalog.app, name="catalog")
app.add_typer(_models.app, name="models")
app.command("fit")(_fit.fit_cmd)
app.command("perf")(_recommend.perf_cmd)
app.command("recommend")(_recommend.recommend_cmd)
app.command("plan")(_fleet.plan_cmd)
app.command("topology")(_topology.topology_cmd)
app.command("render")(_render.render_cmd)
app.command("provision")(_provision.provision_cmd)
app.command("status")(_provision.status_cmd)
app.command("down")(_provision.down_cmd)
app.command("ticket")(_ticket.ticket_cmd)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code."""
    try:
        try:
            app(args=argv if argv is not None else sys.argv[1:], prog_name="advisor",
                standalone_mode=True)
        finally:
            sys.stdout.flush()  # here, where a closed pipe can be answered, not at exit
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BrokenPipeError:
        _stdout_gone()
        return _SIGPIPE_EXIT
    return 0
