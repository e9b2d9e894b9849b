"""Deployment states, as an explicit transition table: (state in the file, what the cloud holds
by tag, action) -> (status, instance rows, resources) afterwards, and what ``status`` shows.

The provider is the scripted fake of tests/test_provisioning.py with a cloud behind it: what
``find`` answers by tag, what ``terminate`` removes, and a launch that can be cut short the way
a killed process would be (before or after the cloud made the instance).
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.provisioning import Question, down, provision, status
from advisor.state import InstanceRow, ResourceRow, Store
from tests.small_catalog import small_catalog
from tests.test_provisioning import Scripted

NAME = "d1"
TYPE = "g6e.xlarge"


def row(id_: str, region: str = "us-east-1", state: str = "running") -> InstanceRow:
    return InstanceRow(id=id_, provider="aws", region=region, zone=f"{region}a",
                       instance_type=TYPE, state=state, public_ip="198.51.100.9")


class Cloud(Scripted):
    """Scripted, plus the instances the cloud holds under the deployment's tag, per region."""

    def __init__(self, held: dict[str, list[InstanceRow]] | None = None,
                 crash: str | None = None) -> None:
        super().__init__({"us-east-1": ["us-east-1a"], "us-west-2": ["us-west-2a"]}, {})
        self.held: dict[str, list[InstanceRow]] = {r: list(v) for r, v in (held or {}).items()}
        self.crash = crash
        self.asked: list[str] = []

    def find(self, deployment: str, region: str) -> list[InstanceRow]:
        self.asked.append(region)
        return list(self.held.get(region, []))

    def terminate(self, deployment: str, region: str) -> list[str]:
        self.terminated.append(region)
        return [i.id for i in self.held.pop(region, [])] + [f"sg-{region}"]

    def launch(self, spec: Any, zone: str | None) -> InstanceRow:
        self.launched.append(str(zone))
        if self.crash == "before-create":
            raise KeyboardInterrupt  # the process dies before the cloud made anything
        made = row(f"i-{zone}", spec.region, "pending")
        self.held.setdefault(spec.region, []).append(made)
        if self.crash == "after-create":
            raise KeyboardInterrupt  # ... or after, before the instance was written down
        return made


# -- the states the table starts from, written the way provisioning writes them ------------------
def crashed_launch(st: Store) -> None:
    """Intent recorded, no instance row: a launch cut short between the call and its result."""
    st.begin(NAME, "aws", "llama-3-8b", 8192)
    st.record_resource(NAME, ResourceRow(kind="security-group", id="sg-1", region="us-east-1"))
    st.intent(NAME, "aws", TYPE, "us-east-1", "us-east-1a")


def running(st: Store) -> None:
    crashed_launch(st)
    st.record_instance(NAME, row("i-1"))


def failed(st: Store) -> None:
    st.begin(NAME, "aws", "llama-3-8b", 8192)
    st.intent(NAME, "aws", TYPE, "us-east-1", "us-east-1a")
    st.forget_resources(NAME)
    st.set_status(NAME, "failed", "every attempt failed")


def is_down(st: Store) -> None:
    running(st)
    st.set_instances_state(NAME, "terminated")
    st.forget_resources(NAME)
    st.set_status(NAME, "down", "down: removed i-1")


START = {"crashed launch": crashed_launch, "running": running, "failed": failed,
         "down": is_down}

#: (start, what the cloud holds by tag, action) ->
#:     (status, {instance id: state} rows, resources left, regions terminated)
TABLE: list[tuple[str, dict[str, list[InstanceRow]], str, str, dict[str, str], list[str],
                  list[str]]] = [
    # a crashed launch is healed by asking the cloud: its tag says whether the instance exists
    ("crashed launch", {"us-east-1": [row("i-9")]}, "reconcile", "running",
     {"i-9": "running"}, ["sg-1"], []),
    ("crashed launch", {}, "reconcile", "failed", {}, ["sg-1"], []),
    ("crashed launch", {"us-east-1": [row("i-9", state="terminated")]}, "reconcile", "failed",
     {"i-9": "terminated"}, ["sg-1"], []),
    ("crashed launch", {"us-east-1": [row("i-9", state="shutting-down")]}, "reconcile",
     "failed", {"i-9": "terminated"}, ["sg-1"], []),
    # a running deployment stays running while its instance lives, fails when it is gone
    ("running", {"us-east-1": [row("i-1")]}, "reconcile", "running", {"i-1": "running"},
     ["sg-1"], []),
    ("running", {"us-east-1": [row("i-1", state="stopped")]}, "reconcile", "running",
     {"i-1": "stopped"}, ["sg-1"], []),
    ("running", {}, "reconcile", "failed", {"i-1": "terminated"}, ["sg-1"], []),
    # failed stays failed with nothing there, and is running again when the tag finds one
    ("failed", {}, "reconcile", "failed", {}, [], []),
    ("failed", {"us-east-1": [row("i-7")]}, "reconcile", "running", {"i-7": "running"}, [], []),
    # down is final for reconcile: the cloud is not even asked
    ("down", {"us-east-1": [row("i-8")]}, "reconcile", "down", {"i-1": "terminated"}, [], []),
    # down terminates in every region the deployment touched, then forgets its resources
    ("running", {"us-east-1": [row("i-1")]}, "down", "down", {"i-1": "terminated"}, [],
     ["us-east-1"]),
    ("crashed launch", {"us-east-1": [row("i-9")]}, "down", "down", {}, [], ["us-east-1"]),
    ("failed", {}, "down", "down", {}, [], ["us-east-1"]),
    ("down", {}, "down", "down", {"i-1": "terminated"}, [], ["us-east-1"]),
]


@pytest.mark.parametrize("start,held,action,want_status,want_rows,want_resources,want_terminated",
                         TABLE, ids=[f"{r[0]}-{r[2]}-{i}" for i, r in enumerate(TABLE)])
def test_transition_table(tmp_path, start, held, action, want_status, want_rows,
                          want_resources, want_terminated):
    st = Store(tmp_path / "s.db")
    START[start](st)
    cloud = Cloud(held)
    if action == "reconcile":
        (dep,) = status(NAME, reconcile=True, store=st, backends={"aws": cloud})
        assert cloud.asked == ([] if start == "down" else ["us-east-1"])
    else:
        res = down(NAME, store=st, backends={"aws": cloud})
        assert res.regions == ["us-east-1"]
        dep = st.require(NAME)
    assert cloud.terminated == want_terminated
    assert dep.status == want_status
    assert {i.id: i.state for i in dep.instances} == want_rows
    assert [r.id for r in dep.resources] == want_resources
    # what a plain `status` shows afterwards is what was written, without asking the cloud
    again = Cloud()
    (shown,) = status(NAME, store=st, backends={"aws": again})
    assert again.asked == []
    assert (shown.status, {i.id: i.state for i in shown.instances}) == (want_status, want_rows)


def test_reconcile_says_what_it_found(tmp_path):
    st = Store(tmp_path / "s.db")
    crashed_launch(st)
    status(NAME, reconcile=True, store=st, backends={"aws": Cloud({"us-east-1": [row("i-9")]})})
    last = st.events(NAME)[-1]
    assert (last.kind, last.message) == ("status",
                                         "reconciled: i-9 running (found by tag: i-9)")
    st2 = Store(tmp_path / "s2.db")
    running(st2)
    status(NAME, reconcile=True, store=st2, backends={"aws": Cloud()})
    kinds = [(e.kind, e.message) for e in st2.events(NAME)[-2:]]
    assert kinds == [("reconcile", "i-1 no longer exists"),
                     ("status", "reconciled: nothing runs for this deployment")]


def test_reconcile_and_down_reach_every_region_of_the_intents(tmp_path):
    st = Store(tmp_path / "s.db")
    st.begin(NAME, "aws", "llama-3-8b", 8192)
    st.intent(NAME, "aws", TYPE, "us-east-1", "us-east-1a")
    st.record_resource(NAME, ResourceRow(kind="security-group", id="sg-w", region="eu-west-1"))
    st.intent(NAME, "aws", TYPE, "us-west-2", "us-west-2a")  # the last intent: us-west-2
    cloud = Cloud({"us-east-1": [row("i-9")]})
    (dep,) = status(NAME, reconcile=True, store=st, backends={"aws": cloud})
    # the deployment's region first, then every other region its events name, in order
    assert cloud.asked == ["us-west-2", "us-east-1", "eu-west-1"]
    assert dep.status == "running" and [i.id for i in dep.instances] == ["i-9"]
    # the instance found moved the deployment's region to us-east-1
    res = down(NAME, store=st, backends={"aws": cloud})
    assert cloud.terminated == res.regions == ["us-east-1", "eu-west-1", "us-west-2"]
    assert res.removed == ["i-9", "sg-us-east-1", "sg-eu-west-1", "sg-us-west-2"]
    dep = st.require(NAME)
    assert (dep.status, [i.state for i in dep.instances], dep.resources) == (
        "down", ["terminated"], [])
    assert st.events(NAME)[-1].message == (
        "down: removed i-9, sg-us-east-1, sg-eu-west-1, sg-us-west-2")


@pytest.mark.parametrize("crash,held_after,reconciled", [
    ("after-create", ["i-us-east-1a"], "running"),
    ("before-create", [], "failed"),
])
def test_a_killed_launch_leaves_an_intent_that_reconcile_resolves(tmp_path, crash, held_after,
                                                                  reconciled):
    st = Store(tmp_path / "s.db")
    cloud = Cloud(crash=crash)
    with pytest.raises(KeyboardInterrupt):
        provision("llama-3-8b", 8192, instance=f"aws:{TYPE}", name=NAME,
                  catalog=small_catalog(), backends={"aws": cloud}, store=st,
                  question=Question(allow_small_host=True))
    dep = st.require(NAME)
    # the crashed-launch state: launching, an intent as the last word before the Ctrl-C is
    # recorded (a SIGKILL writes nothing after the intent: tests/faults), no instance row
    assert dep.status == "launching" and dep.instances == []
    assert [e.kind for e in st.events(NAME)][-2:] == ["intent", "interrupted"]
    assert [i.id for i in cloud.held.get("us-east-1", [])] == held_after
    # what was made for the region stays while an instance runs there, and goes otherwise
    assert cloud.terminated == ([] if held_after else ["us-east-1"])
    assert [r.id for r in dep.resources] == (["sg-us-east-1"] if held_after else [])
    (dep,) = status(NAME, reconcile=True, store=st, backends={"aws": cloud})
    assert dep.status == reconciled
    assert [i.id for i in dep.instances] == held_after
    gone = down(NAME, store=st, backends={"aws": cloud})
    assert gone.removed == [*held_after, "sg-us-east-1"]
    (shown,) = status(NAME, store=st)
    assert shown.status == "down" and all(i.state == "terminated" for i in shown.instances)
    assert cloud.held == {}


@pytest.mark.parametrize("state,counts", [
    # gone or going, in each cloud's words (lower-cased): not alive
    ("terminated", False), ("shutting-down", False), ("deleting", False), ("deleted", False),
    ("failed", False), ("Terminated", False),
    # everything else is an instance that exists
    ("pending", True), ("running", True), ("stopping", True), ("stopped", True),
    ("starting", True), ("provisioning", True), ("staging", True), ("unknown", True)])
def test_which_instance_states_count_as_alive(state, counts):
    from advisor.clouds.base import alive

    inst = row("i-1", state=state)
    assert alive([inst]) == ([inst] if counts else [])


def refusing(asked: list[str]) -> Any:
    """A confirm callback that keeps each question in ``asked`` and answers no."""
    def no(summary: str) -> bool:
        asked.append(summary)
        return False
    return no


def test_down_asks_first_and_does_nothing_when_refused(tmp_path):
    from advisor.errors import UserInputError

    st = Store(tmp_path / "s.db")
    running(st)
    cloud = Cloud({"us-east-1": [row("i-1")]})
    asked: list[str] = []
    no = refusing(asked)

    with pytest.raises(UserInputError, match="nothing removed: not confirmed"):
        down(NAME, store=st, backends={"aws": cloud}, confirm=no)
    assert asked == ["terminate deployment 'd1' (aws, us-east-1) and remove its firewall rules"]
    assert cloud.terminated == [] and st.require(NAME).status == "running"
    res = down(NAME, store=st, backends={"aws": cloud}, confirm=lambda _s: True)
    assert res.removed == ["i-1", "sg-us-east-1"] and st.require(NAME).status == "down"


def test_down_of_an_unknown_name_says_so_and_names_the_close_ones_before_the_sweep(tmp_path):
    """A typo of a deployment's name has no record, so down would sweep every region of every
    cloud for its tag: the question says the name is unknown and which known names are close,
    so the user can refuse before a single region is asked."""
    from advisor.errors import UserInputError

    st = Store(tmp_path / "s.db")
    st.begin("llama-prod", "aws", "llama-3-8b", 8192)
    st.begin("qwen-staging", "gcp", "qwen3-8b", 8192)
    cloud = Cloud({"us-east-1": [row("i-1")]})
    asked: list[str] = []
    no = refusing(asked)

    with pytest.raises(UserInputError, match="not confirmed"):
        down("llama-prdo", store=st, backends={"aws": cloud}, confirm=no, provider="aws")
    assert asked[0].startswith("no deployment 'llama-prdo' in advisor's state (did you mean "
                               "'llama-prod'?); terminate everything tagged")
    assert cloud.terminated == [] and cloud.asked == []
    asked.clear()
    with pytest.raises(UserInputError, match="not confirmed"):
        down("zzz", store=st, backends={"aws": cloud}, confirm=no, provider="aws")
    assert asked[0].startswith("no deployment 'zzz' in advisor's state; terminate")
