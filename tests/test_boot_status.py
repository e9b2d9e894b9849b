"""Issue 27 item 4 (status part): ``boot_status`` folds each running instance's serial console
(:mod:`advisor.bootstatus`) into one phrase, from provider doubles, and never raises. The AWS
console and the CLI run against moto in tests/providers/test_boot_status_cli.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from advisor.provisioning import boot_failed, boot_status
from advisor.state import InstanceRow, Store

T0 = 1_733_330_000


def ev(step: str, state: str, t: float = T0, **kw: Any) -> str:
    return "advisor-boot: " + json.dumps({"v": 1, "step": step, "state": state, "t": t, **kw})


CONSOLES = {
    "booting": "\n".join(["[    0.0] Linux version 6.8", ev("apt", "running"),
                          ev("install vllm", "running", T0 + 60)]),
    "serving": "\n".join([ev("install vllm", "running"), ev("install", "done", T0 + 300),
                          ev("vllm", "serving", T0 + 400, replica=0),
                          ev("vllm", "serving", T0 + 410, replica=1)]),
    "half": "\n".join([ev("install", "done"), ev("vllm", "serving", replica=0)]),
    "failed": "\n".join([ev("install vllm", "running"),
                         ev("install vllm", "failed", T0 + 90, exit=1,
                            tail="ERROR: No matching distribution found for vllm==0.11.0")]),
}


class Console:
    """A provider double with a console (or an error) per instance id."""

    name = "aws"

    def __init__(self, texts: dict[str, str | None | Exception]) -> None:
        self.texts = texts
        self.asked: list[str] = []

    def console_output(self, instance: InstanceRow) -> str | None:
        self.asked.append(instance.id)
        got = self.texts[instance.id]
        if isinstance(got, Exception):
            raise got
        return got


class NoConsole:
    name = "aws"


def deployment(tmp_path, ids=("i-1",), status="running", replicas=2):
    st = Store(tmp_path / "s.db")
    st.begin("boot", "aws", "llama-3-8b", 8192, {
        "plans": {"aws:g6e.12xlarge": {"tp": 2, "replicas": replicas, "nodes": len(ids)}}})
    st.intent("boot", "aws", "g6e.12xlarge", "us-east-1", "us-east-1a")
    for i in ids:
        st.record_instance("boot", InstanceRow(id=i, provider="aws", region="us-east-1",
                                               zone="us-east-1a", instance_type="g6e.12xlarge",
                                               state="running"))
    if status != "running":
        st.set_status("boot", status)
    return st.require("boot")


@pytest.mark.parametrize(("console", "want"), [
    ("booting", "booting: install vllm (1 min)"),
    ("serving", "serving"),
    ("half", "serving 1 of 2 replicas"),  # the replicas counted from the stored plan
    ("failed", "failed: install vllm (exit 1): ERROR: No matching distribution found for "
               "vllm==0.11.0"),
])
def test_the_console_folds_into_one_phrase(tmp_path, console, want):
    dep = deployment(tmp_path)
    got = boot_status(dep, backends={"aws": Console({"i-1": CONSOLES[console]})},
                      now=T0 + 90)
    assert got == want
    assert boot_failed(got) is (console == "failed")


def test_nothing_yet_and_unreadable_consoles_never_fail(tmp_path):
    dep = deployment(tmp_path)
    assert boot_status(dep, backends={"aws": Console({"i-1": None})}) == "booting: no report yet"
    from advisor.clouds.base import CloudError

    denied = CloudError("aws", "UnauthorizedOperation", "not allowed", "provider")
    got = boot_status(dep, backends={"aws": Console({"i-1": denied})})
    assert got == "unknown (aws: UnauthorizedOperation: not allowed)" and not boot_failed(got)
    assert boot_status(dep, backends={"aws": Console({"i-1": RuntimeError("")})}) == (
        "unknown (RuntimeError)")

    def no_sdk(_name: str) -> Any:
        from advisor.errors import UserInputError

        raise UserInputError("the aws SDK is not installed (boto3)")

    assert boot_status(dep, backends=no_sdk) == "unknown (the aws SDK is not installed (boto3))"


def test_no_console_capability_or_not_running_reads_nothing(tmp_path):
    assert boot_status(deployment(tmp_path), backends={"aws": NoConsole()}) is None
    p = Console({"i-1": CONSOLES["failed"]})
    dep = deployment(tmp_path / "down", status="failed")
    assert boot_status(dep, backends={"aws": p}) is None and p.asked == []


def test_a_multi_node_deployment_fails_when_any_instance_failed(tmp_path):
    dep = deployment(tmp_path, ids=("i-head", "i-w1"), replicas=1)
    p = Console({"i-head": CONSOLES["half"], "i-w1": CONSOLES["failed"]})
    got = boot_status(dep, backends={"aws": p})
    assert got is not None and got.startswith("failed: install vllm (exit 1)")
    assert got.endswith("(on i-w1)")
    ok = Console({"i-head": CONSOLES["half"], "i-w1": CONSOLES["booting"]})
    assert boot_status(dep, backends={"aws": ok}) == "serving"  # the head's replicas
