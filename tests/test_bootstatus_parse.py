"""advisor.bootstatus: the console lines an instance prints about its first boot, read back.

The lines below are in the exact shape templates/vllm-report.sh prints (the boot harness feeds
the real ones through the same functions in tests/boot/test_boot.py); here the folding rules
are pinned: newest by time, not by line; failures before progress; garbage ignored.
"""

from __future__ import annotations

import json

from advisor.bootstatus import TAIL_MAX, describe, parse, parse_event


def line(state: str, step: str, t: float | None, **kw: object) -> str:
    ev: dict[str, object] = {"v": 1, "step": step, "state": state, "tail": ""}
    if t is not None:
        ev["t"] = t
    ev.update(kw)
    return "[  12.3] cloud-init[136]: advisor-boot: " + json.dumps(ev, separators=(",", ":"))


def test_install_progress_in_minutes_since_the_first_event():
    text = "\n".join([line("running", "check python", 1000.0),
                      line("running", "create venv", 1001.5),
                      line("running", "install vllm", 1003.0)])
    st = parse(text)
    assert st.started == 1000.0
    assert describe(st, now=1000.0 + 4 * 60 + 59) == "booting: install vllm (4 min)"
    assert describe(st) == "booting: install vllm"


def test_a_lagging_copy_of_an_older_line_does_not_win():
    # /dev/console got "install vllm" first; cloud-init's copy of "create venv" arrives later
    text = "\n".join([line("running", "create venv", 1001.5),
                      line("running", "install vllm", 1003.0),
                      line("running", "create venv", 1001.5)])
    assert parse(text).install.step == "install vllm"  # type: ignore[union-attr]


def test_a_failed_step_names_itself_its_code_and_last_line():
    text = "\n".join([line("running", "install vllm", 10.0),
                      line("failed", "install vllm", 250.0, exit=1,
                           tail="ERROR: No matching distribution found for vllm==0.11.0")])
    assert describe(parse(text)) == ("failed: install vllm (exit 1): ERROR: No matching "
                                     "distribution found for vllm==0.11.0")


def test_replicas_serving_counted_and_a_dead_one_is_a_failure():
    done = [line("done", "install", 300.0)]
    one = done + [line("serving", "vllm", 400.0, replica=0)]
    assert describe(parse("\n".join(done)), now=360.0) == "booting: starting vllm (1 min)"
    assert describe(parse("\n".join(one)), replicas=2) == "serving 1 of 2 replicas"
    both = one + [line("serving", "vllm", 410.0, replica=1)]
    assert describe(parse("\n".join(both)), replicas=2) == "serving"
    dead = both + [line("exited", "vllm", 420.0, replica=1, exit=1,
                        tail="RuntimeError: Failed to infer device type")]
    assert describe(parse("\n".join(dead)), replicas=2) == (
        "failed: replica 1 (vllm) (exit 1): RuntimeError: Failed to infer device type")
    # the restarted replica that serves again is serving again
    back = dead + [line("serving", "vllm", 450.0, replica=1)]
    assert describe(parse("\n".join(back)), replicas=2) == "serving"


def test_nothing_yet_and_garbage_are_not_a_state():
    assert describe(parse("")) == "booting: no report yet"
    junk = "\n".join([
        "advisor-boot: {not json",
        'advisor-boot: {"v":2,"step":"x","state":"running"}',        # another format version
        'advisor-boot: {"v":1,"step":"x","state":"exploded"}',       # unknown state
        'advisor-boot: {"v":1,"step":7,"state":"running"}',          # step not text
        'advisor-boot: {"v":1,"step":"x","state":"running","replica":-1}',
        'advisor-boot: {"v":1,"step":"x","state":"running","exit":"1"}',
        'advisor-boot: {"v":1,"step":"x","state":"running","t":"soon"}',
        "advisor-boot: []",
    ])
    assert parse(junk).install is None and parse(junk).replicas == {}


def test_a_tail_is_one_cut_line():
    ev = parse_event(line("failed", "install vllm", 1.0, exit=2, tail="a\nb " + "x" * 1000))
    assert ev is not None and "\n" not in ev.tail and len(ev.tail) == TAIL_MAX
