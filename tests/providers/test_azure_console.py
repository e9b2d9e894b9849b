"""Azure boot diagnostics as the instance's console (issue 27): advisor's VMs have it on managed
storage; ``console_output`` asks retrieveBootDiagnosticsData for the serial log's SAS URI and
GETs it without credentials; ``advisor.bootstatus`` reads its ``advisor-boot:`` lines. The fake
serves the blob on https://127.0.0.1 only; every failure is None."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("azure.mgmt.compute")
pytest.importorskip("azure.mgmt.network")

from advisor import bootstatus  # noqa: E402
from advisor.clouds.azure.resources import CONSOLE_MAX_CHARS, fetch_blob  # noqa: E402
from advisor.clouds.base import BootConsole  # noqa: E402
from advisor.state import InstanceRow  # noqa: E402
from tests.providers.fake_azure import BLOB_HOST, FakeArm  # noqa: E402
from tests.providers.test_azure import SIZE, azure, launch, sku, with_vaults  # noqa: E402


def line(**event: Any) -> str:
    return "advisor-boot: " + json.dumps({"v": 1, **event})


CONSOLE = "\n".join([
    "[    0.000000] Linux version 6.5.0-1025-azure",
    "cloud-init[1234]: Cloud-init v. 24.1 running 'modules:final'",
    line(step="apt", state="running", t=1733330000),
    line(step="pip install", state="running", t=1733330060),
    line(step="pip install", state="failed", exit=1, t=1733330300,
         tail="ERROR: No matching distribution found for vllm==0.11.0"),
    "Ubuntu 22.04.5 LTS h100-nvl ttyS0",
]) + "\n"


@pytest.fixture
def arm():
    return with_vaults(FakeArm(skus=[sku("eastus")]))


def row(vm: str = "h100-nvl") -> InstanceRow:
    return InstanceRow(id=vm, provider="azure", region="eastus", zone="1", instance_type=SIZE,
                       state="running")


def test_vms_are_made_with_managed_boot_diagnostics(arm, tmp_path):
    assert launch(arm, tmp_path).status == "launched"
    [vm] = arm.puts("virtualMachines")
    # enabled, and no storageUri: managed storage (no storage account to make or remove)
    assert vm["properties"]["diagnosticsProfile"] == {"bootDiagnostics": {"enabled": True}}


def test_the_serial_log_is_read_and_its_boot_lines_parsed(arm, tmp_path):
    launch(arm, tmp_path)
    arm.consoles["h100-nvl"] = CONSOLE
    p = azure(arm)
    capable: BootConsole = p  # the capability's shape (mypy)
    text = capable.console_output(row())
    assert text == CONSOLE
    st = bootstatus.parse(text)
    assert st.install is not None and st.install.state == "failed" and st.started == 1733330000
    assert bootstatus.describe(st) == ("failed: pip install (exit 1): ERROR: No matching "
                                       "distribution found for vllm==0.11.0")
    [(url, headers)] = arm.blob_requests
    assert url.startswith(f"https://{BLOB_HOST}/") and "sig=" in url
    # a SAS URI is its own authorization: the ARM token never goes to a storage host
    assert not {h.lower() for h in headers} & {"authorization", "x-ms-authorization-auxiliary"}
    posts = [p_ for m, p_, _ in arm.log if m == "POST"]
    assert posts == ["/subscriptions/00000000-0000-0000-0000-00000000abcd/resourceGroups/"
                     "advisor-h100-nvl/providers/Microsoft.Compute/virtualMachines/h100-nvl/"
                     "retrieveBootDiagnosticsData"]


def test_serving_replicas_and_a_worker(tmp_path):
    arm = with_vaults(FakeArm(skus=[sku("eastus")]))
    launch(arm, tmp_path, name="two")
    # a worker (NAME-wN) lives in its deployment's group
    [vm] = [v for v in arm.resources.values() if v.get("type") is None and
            "/virtualMachines/" in v["id"]]
    worker = json.loads(json.dumps(vm))
    worker["id"] = vm["id"].replace("/two", "/two-w1")
    worker["name"] = "two-w1"
    arm.resources[worker["id"].lower()] = worker
    arm.consoles["two-w1"] = "\n".join([
        line(step="install", state="done", t=1),
        line(step="vllm", state="serving", replica=0, t=2),
        line(step="vllm", state="serving", replica=1, t=3)])
    text = azure(arm).console_output(row("two-w1"))
    assert text is not None
    assert bootstatus.describe(bootstatus.parse(text), replicas=2) == "serving"
    assert bootstatus.describe(bootstatus.parse(text), replicas=3) == "serving 2 of 3 replicas"


def test_a_long_log_keeps_its_newest_part(arm, tmp_path):
    launch(arm, tmp_path)
    noise = "x" * 100 + "\n"
    arm.consoles["h100-nvl"] = noise * (CONSOLE_MAX_CHARS // len(noise) + 100) + CONSOLE
    text = azure(arm).console_output(row())
    assert text is not None and len(text) == CONSOLE_MAX_CHARS and text.endswith(CONSOLE)
    assert bootstatus.parse(text).install.state == "failed"  # type: ignore[union-attr]


def test_no_report_yet(arm, tmp_path):
    launch(arm, tmp_path)
    arm.consoles["h100-nvl"] = "[    0.000000] Linux version 6.5.0-1025-azure\n"
    text = azure(arm).console_output(row())
    assert bootstatus.describe(bootstatus.parse(text or "")) == "booting: no report yet"


def _answer(arm: FakeArm, match: str, status: int, body: Any) -> None:
    def before(n: int, request: Any) -> Any:
        if match in request.url:
            return arm._response(request, status, body)
        return None

    arm.before = before


@pytest.mark.parametrize("case", ["no blob yet", "no vm", "diagnostics off", "arm error",
                                  "blob error", "http uri", "non-json"])
def test_every_failure_is_none(arm, tmp_path, case):
    launch(arm, tmp_path)
    arm.consoles["h100-nvl"] = CONSOLE
    vm = "h100-nvl"
    if case == "no blob yet":
        arm.consoles.clear()
    elif case == "no vm":
        vm = "other"
    elif case == "diagnostics off":
        [key] = [k for k in arm.resources if k.endswith("/virtualmachines/h100-nvl")]
        arm.resources[key]["properties"].pop("diagnosticsProfile")
    elif case == "arm error":
        _answer(arm, "retrieveBootDiagnosticsData", 500, {"error": {"code": "InternalError"}})
    elif case == "blob error":
        _answer(arm, BLOB_HOST, 503, {"error": {"code": "ServerBusy"}})
    elif case == "http uri":  # only an https URI is fetched
        _answer(arm, "retrieveBootDiagnosticsData", 200, {
            "serialConsoleLogBlobUri": f"http://{BLOB_HOST}/bootdiagnostics-fake/"
                                       "h100-nvl.serialconsole.log?sig=x"})
    elif case == "non-json":
        _answer(arm, "retrieveBootDiagnosticsData", 200, None)
    assert azure(arm).console_output(row(vm)) is None
    if case in ("no vm", "diagnostics off", "arm error", "http uri", "non-json"):
        assert arm.blob_requests == []


def test_fetch_blob_refuses_what_is_not_https():
    # no transport is ever built for these: nothing is fetched
    for uri in ("http://127.0.0.1/x", "file:///etc/passwd", "ftp://127.0.0.1/x", "https:///x",
                "not a uri"):
        assert fetch_blob(None, uri) is None


def test_a_dying_process_is_not_swallowed(arm, tmp_path):
    launch(arm, tmp_path)

    class Killed(BaseException):
        pass

    def die(n: int, request: Any) -> Any:
        raise Killed

    arm.before = die
    with pytest.raises(Killed):
        azure(arm).console_output(row())


def test_advisor_status_reads_it(arm, tmp_path):
    """provision, then the orchestrator's boot_status (what ``advisor status`` shows) reads the
    VM's boot diagnostics: failed with the step's last line, then serving once it serves."""
    from advisor.provisioning import boot_status, provision
    from advisor.state import Store

    st = Store(tmp_path / "s.db")
    res = provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                    instance=f"azure:{SIZE}", name="h100-nvl",
                    api_key_ref="azure-kv:advisor-vault/vllm-api-key",
                    backends={"azure": azure(arm)}, store=st)
    assert res.status == "launched"
    dep = st.require("h100-nvl")
    assert boot_status(dep, backends={"azure": azure(arm)}) == "booting: no report yet"
    arm.consoles["h100-nvl"] = CONSOLE
    assert boot_status(dep, backends={"azure": azure(arm)}) == (
        "failed: pip install (exit 1): ERROR: No matching distribution found for vllm==0.11.0")
    arm.consoles["h100-nvl"] = "\n".join([line(step="install", state="done", t=1)] + [
        line(step="vllm", state="serving", replica=r, t=2) for r in range(8)])
    assert boot_status(dep, backends={"azure": azure(arm)}) == "serving"


def test_a_users_resource_group(arm, tmp_path):
    """With --resource-group the VM is looked for there, and only there."""
    from advisor.provisioning import provision
    from advisor.state import Store

    key = "/subscriptions/00000000-0000-0000-0000-00000000abcd/resourcegroups/team-rg"
    arm.resources[key] = {"id": key, "name": "team-rg", "location": "eastus",
                          "tags": {"owner": "team"}, "properties": {}}
    mine = azure(arm, resource_group="team-rg")
    provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
              instance=f"azure:{SIZE}", name="in-team",
              api_key_ref="azure-kv:advisor-vault/vllm-api-key", backends={"azure": mine},
              store=Store(tmp_path / "s.db"))
    arm.consoles["in-team"] = CONSOLE
    arm.log.clear()
    assert azure(arm, resource_group="team-rg").console_output(row("in-team")) == CONSOLE
    assert [p for m, p, _ in arm.log if m == "POST"][0].split("/")[4] == "team-rg"
