"""What an instance says about its own first boot, and how ``advisor status`` reads it.

The install script and the replicas' reporter (``templates/advisor-install.sh``,
``templates/vllm-report.sh``) print one line per event to the instance's serial console, which
every cloud lets its owner read without logging in (AWS ``GetConsoleOutput``, GCP
``getSerialPortOutput``, Azure boot diagnostics)::

    advisor-boot: {"v":1,"step":"pip install","state":"failed","exit":1,"t":1733330000,
                   "tail":"ERROR: ..."}

``state`` is ``running`` (a step began), ``done`` (the install finished), ``failed`` (a step or a
replica exited non-zero; ``exit`` and ``tail``, the last line of its log, say how),
``serving`` (replica ``replica`` answered /health) or ``exited`` (replica ``replica``'s vLLM
process ended). The same object, without the prefix, is kept on the instance in
``/var/lib/advisor/boot-status.json``. Nothing secret is ever printed: the scripts never read
the key, and ``tail`` is cut to one line of at most :data:`TAIL_MAX` characters.

Pure: no I/O. The newest line of each kind wins; a console that lost its beginning (clouds keep
the last 64 KiB or so) still gives the latest state.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

PREFIX = "advisor-boot: "
TAIL_MAX = 300
STATES = ("running", "done", "failed", "serving", "exited")
_LINE = re.compile(r"advisor-boot: (\{.*\})\s*$")


@dataclass(frozen=True)
class BootEvent:
    step: str
    state: str
    t: float | None = None
    exit: int | None = None
    tail: str = ""
    replica: int | None = None


@dataclass
class BootStatus:
    """The newest install event, and the newest event of each replica."""

    install: BootEvent | None = None
    replicas: dict[int, BootEvent] = field(default_factory=dict)
    #: when the first install event was seen (the install's start), epoch seconds
    started: float | None = None


def parse_event(line: str) -> BootEvent | None:
    """One console line -> event, or None for any other line (or a garbled one)."""
    m = _LINE.search(line)
    if m is None:
        return None
    try:
        d = json.loads(m.group(1))
    except ValueError:
        return None
    if not isinstance(d, dict) or d.get("v") != 1 or d.get("state") not in STATES:
        return None
    step, tail = d.get("step"), d.get("tail", "")
    t, code, replica = d.get("t"), d.get("exit"), d.get("replica")
    if not isinstance(step, str) or not isinstance(tail, str):
        return None
    if t is not None and not isinstance(t, (int, float)):
        return None
    if code is not None and not isinstance(code, int):
        return None
    if replica is not None and (not isinstance(replica, int) or not 0 <= replica < 4096):
        return None
    return BootEvent(step=step[:80], state=d["state"], t=t, exit=code,
                     tail=" ".join(tail.split())[:TAIL_MAX], replica=replica)


def parse(console: str) -> BootStatus:
    """Every ``advisor-boot:`` line of a console printout, folded into the latest state.

    Events are ordered by their time ``t`` (seconds, with milliseconds), not by line: each
    install event reaches the console twice (written to /dev/console at once, and copied by
    cloud-init from the script's output, which can lag), so a line further down may be older.
    Events without a time keep their line order after the timed ones before them."""
    out = BootStatus()
    events: list[tuple[float, int, BootEvent]] = []
    last_t = float("-inf")
    for n, line in enumerate(console.splitlines()):
        ev = parse_event(line)
        if ev is None:
            continue
        last_t = ev.t if ev.t is not None else last_t
        events.append((last_t, n, ev))
    for _, _, ev in sorted(events, key=lambda x: (x[0], x[1])):
        if ev.replica is not None:
            out.replicas[ev.replica] = ev
            continue
        if ev.t is not None and (out.started is None or ev.t < out.started):
            out.started = ev.t
        out.install = ev
    return out


def _minutes(seconds: float) -> str:
    return f"{max(0, int(seconds // 60))} min"


def describe(status: BootStatus, now: float | None = None, replicas: int | None = None) -> str:
    """One phrase for ``advisor status``: ``booting: installing vllm (4 min)``, ``serving``,
    ``serving 1 of 2 replicas``, ``failed: pip install (exit 1): <last line>``, or
    ``booting: no report yet``."""
    failed = [e for e in ([status.install] if status.install else []) if e.state == "failed"]
    failed += [e for _, e in sorted(status.replicas.items()) if e.state in ("failed", "exited")]
    if failed:
        e = failed[0]
        what = e.step if e.replica is None else f"replica {e.replica} ({e.step})"
        code = f" (exit {e.exit})" if e.exit is not None else ""
        return f"failed: {what}{code}" + (f": {e.tail}" if e.tail else "")
    serving = sum(1 for e in status.replicas.values() if e.state == "serving")
    if serving and (replicas is None or serving >= replicas):
        return "serving"
    if serving:
        return f"serving {serving} of {replicas} replicas"
    if status.install is None:
        return "booting: no report yet"
    e = status.install
    since = f" ({_minutes(now - status.started)})" if now and status.started else ""
    if e.state == "done":
        return f"booting: starting vllm{since}"
    return f"booting: {e.step}{since}"
