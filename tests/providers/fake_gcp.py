"""A local Compute Engine REST endpoint, enough for advisor's GCP backend: instances (insert with
requestId, get, delete, aggregated list with a label filter), machine types (aggregated list),
regions (quotas) and firewalls. Every request body is kept for the tests to assert on; errors
come back the way Compute Engine reports them (a DONE operation carrying ``error.errors``).

The same server answers the two other REST APIs the backend calls, on their own paths: IAM
(``/v1/projects/P/serviceAccounts``: create, get, delete, with IAM's account-id rules) and
Secret Manager's ``secrets.getIamPolicy`` / ``setIamPolicy`` (etags checked, members that name
an unknown account of the project refused the way IAM refuses them), ``secrets.get`` (metadata)
and ``secrets.testIamPermissions`` (the subset held; ``denied`` takes permissions away).

Issue 27 adds, each shaped as the Compute Engine REST v1 reference shows it: routers
(https://cloud.google.com/compute/docs/reference/rest/v1/routers: ``get``, ``list``,
``insert`` with ``requestId``, ``delete``, ``aggregatedList`` keyed ``regions/R``), with the
RouterNat rule that a NAT for all subnets may not sit beside another NAT config on the same
network and region; ``subnetworks.list`` (…/v1/subnetworks/list); ``images.get`` and
``images.getFromFamily`` (…/v1/images; the default GPU family is there unless a test takes it
out) and ``instances.getSerialPortOutput`` (…/v1/instances/getSerialPortOutput: ``contents``,
``start``, ``next``) answering what a test puts in ``serial``."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

BASE = "https://www.googleapis.com/compute/v1/"


class FakeCompute:
    def __init__(self, zones: dict[str, list[str]] | None = None) -> None:
        #: machine type -> zones offering it
        self.zones = zones or {}
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self.firewalls: dict[str, dict[str, Any]] = {}
        self.quotas: dict[str, list[dict[str, Any]]] = {}
        #: zone -> (code, message, http status) to fail inserts with
        self.fail: dict[str, tuple[str, str, int]] = {}
        #: zone -> error for workers only (instance names ending in -wN): a group that half fits
        self.fail_workers: dict[str, tuple[str, str, int]] = {}
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []
        #: machine type -> {guestCpus, memoryMb, accelerators} for machineTypes listings
        self.machine_specs: dict[str, dict[str, Any]] = {}
        #: the Cloud Billing Catalog's Compute Engine SKUs
        self.skus: list[dict[str, Any]] = []
        self.seen_request_ids: dict[str, dict[str, Any]] = {}
        #: IAM: email -> service account
        self.service_accounts: dict[str, dict[str, Any]] = {}
        #: Secret Manager: secret name -> its IAM policy (a secret not here does not exist)
        self.secrets: dict[str, dict[str, Any]] = {}
        #: secret -> how many getIamPolicy reads are followed by someone else's change (the
        #: etag read is then stale: setIamPolicy answers 409 ABORTED)
        self.races: dict[str, int] = {}
        #: how many setIamPolicy calls naming a new account answer "does not exist" (IAM's
        #: propagation delay)
        self.unknown_account_for = 0
        #: Compute Engine: (region, router name) -> router, as routers.get answers it
        self.routers: dict[tuple[str, str], dict[str, Any]] = {}
        #: (region, subnet name) -> subnetwork (name, network URL, ipCidrRange)
        self.subnetworks: dict[tuple[str, str], dict[str, Any]] = {}
        #: (image project, "family/F" or image name) -> image
        self.images: dict[tuple[str, str], dict[str, Any]] = {
            ("ubuntu-os-accelerator-images",
             "family/ubuntu-accelerator-2204-amd64-with-nvidia-580"): {
                "kind": "compute#image", "name": "ubuntu-accelerator-2204-amd64-with-nvidia-"
                "580-v20261120", "family": "ubuntu-accelerator-2204-amd64-with-nvidia-580",
                "status": "READY"}}
        #: (zone, instance name) -> what serial port 1 says
        self.serial: dict[tuple[str, str], str] = {}
        #: secret -> the permissions testIamPermissions leaves out
        self.denied: dict[str, set[str]] = {}
        self._n = 0
        #: every request answered so far (the fault suite counts a provision's calls with it)
        self.calls = 0
        #: fault hook: called as fault(n, method, path) before request n (1-based) is handled;
        #: an answer (status, body) is sent instead of the real one, None lets it through
        self.fault: Callable[[int, str, str], tuple[int, dict[str, Any]] | None] | None = None
        self._lock = threading.Lock()

    # -- operations -------------------------------------------------------------------------
    def _op(self, project: str, zone: str | None, target: str, kind: str,
            error: tuple[str, str, int] | None = None) -> dict[str, Any]:
        self._n += 1
        op: dict[str, Any] = {"kind": "compute#operation", "id": str(1000 + self._n),
                              "name": f"operation-{self._n}", "operationType": kind,
                              "status": "DONE", "progress": 100,
                              "targetLink": BASE + f"projects/{project}/{target}"}
        if zone:
            op["zone"] = BASE + f"projects/{project}/zones/{zone}"
        if error:
            code, message, status = error
            op["error"] = {"errors": [{"code": code, "message": message}]}
            op["httpErrorStatusCode"] = status
            op["httpErrorMessage"] = {503: "SERVICE UNAVAILABLE", 403: "FORBIDDEN"}.get(
                status, "ERROR")
        return op

    def handle(self, method: str, path: str, query: dict[str, list[str]],
               body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.calls += 1
            n = self.calls
        if self.fault is not None and (injected := self.fault(n, method, path)) is not None:
            return injected
        self.requests.append((method, path + ("?" + "&".join(
            f"{k}={v[0]}" for k, v in query.items()) if query else ""), body))
        if path == "/v1/services/6F81-5844-456A/skus":  # the Cloud Billing Catalog, paged by 2
            start = int(query.get("pageToken", ["0"])[0])
            page = {"skus": self.skus[start:start + 2]}
            if start + 2 < len(self.skus):
                page["nextPageToken"] = str(start + 2)
            return 200, page
        if sa := re.match(r"^/v1/projects/([^/]+)/serviceAccounts(?:/([^/]+))?$", path):
            return self._iam(method, sa.group(1), sa.group(2), body)
        if sp := re.match(r"^/v1/projects/([^/]+)/secrets/([^/:]+):(getIamPolicy|setIamPolicy)$",
                          path):
            return self._secret_policy(sp.group(1), sp.group(2), sp.group(3), body)
        if st := re.match(r"^/v1/projects/([^/]+)/secrets/([^/:]+)(:testIamPermissions)?$",
                          path):
            project, secret = st.group(1), st.group(2)
            if secret not in self.secrets:
                return self._error(404, "NOT_FOUND", f"Secret [projects/{project}/secrets/"
                                   f"{secret}] not found or has no versions.")
            if st.group(3):  # TestIamPermissionsResponse: the subset held, {} for none
                asked = (body or {}).get("permissions", [])
                held = [x for x in asked if x not in self.denied.get(secret, set())]
                return 200, ({"permissions": held} if held else {})
            return 200, {"name": f"projects/{project}/secrets/{secret}",
                         "replication": {"automatic": {}},
                         "createTime": "2026-11-01T00:00:00Z", "etag": '"1"'}
        m = re.match(r"^/compute/v1/projects/([^/]+)/(.*)$", path)
        if not m:
            return 404, {"error": {"code": 404, "message": "not found"}}
        project, rest = m.groups()
        if (z := re.match(r"^zones/([^/]+)/instances$", rest)) and method == "POST":
            zone = z.group(1)
            rid = query.get("requestId", [""])[0]
            if rid and rid in self.seen_request_ids:
                return 200, self.seen_request_ids[rid]
            assert body is not None
            worker = re.search(r"-w\d+$", body["name"]) is not None
            failure = self.fail.get(zone) or (self.fail_workers.get(zone) if worker else None)
            if failure:
                op = self._op(project, zone, f"zones/{zone}/instances/{body['name']}", "insert",
                              failure)
            else:
                n = len(self.instances)
                inst = {**body, "id": str(5000 + n), "status": "RUNNING",
                        "zone": BASE + f"projects/{project}/zones/{zone}",
                        "machineType": BASE + f"projects/{project}/{body['machineType']}",
                        "networkInterfaces": [{**nic, "networkIP": "10.128.0.7",
                                               "accessConfigs": [
                                                   {**ac, "natIP": "198.51.100.7"}
                                                   for ac in nic.get("accessConfigs", [])]}
                                              for nic in body.get("networkInterfaces", [])]}
                for nic in inst["networkInterfaces"]:
                    nic["networkIP"] = f"10.128.0.{7 + n}"
                self.instances[(zone, body["name"])] = inst
                op = self._op(project, zone, f"zones/{zone}/instances/{body['name']}", "insert")
            if rid:
                self.seen_request_ids[rid] = op
            return 200, op
        if z := re.match(r"^zones/([^/]+)/instances/([^/]+)/serialPort$", rest):
            key = (z.group(1), z.group(2))
            if key not in self.instances:
                return 404, {"error": {"code": 404, "message": f"The resource '{rest}' was not "
                                       "found", "errors": [{"reason": "notFound"}]}}
            text = self.serial.get(key, "")
            return 200, {"kind": "compute#serialPortOutput", "contents": text, "start": "0",
                         "next": str(len(text.encode())),
                         "selfLink": BASE + f"projects/{project}/{rest}"}
        if z := re.match(r"^zones/([^/]+)/instances/([^/]+)$", rest):
            key = (z.group(1), z.group(2))
            if key not in self.instances:
                return 404, {"error": {"code": 404, "message": f"The resource '{rest}' was not "
                                       "found", "errors": [{"reason": "notFound"}]}}
            if method == "DELETE":
                del self.instances[key]
                return 200, self._op(project, key[0], rest, "delete")
            return 200, self.instances[key]
        if rest == "aggregated/instances":
            flt = query.get("filter", [""])[0]
            want = re.match(r'labels\.([a-z0-9_-]+) = "([^"]*)"', flt)
            items: dict[str, Any] = {}
            for (zone, _), inst in sorted(self.instances.items()):
                if want and inst.get("labels", {}).get(want.group(1)) != want.group(2):
                    continue
                items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(inst)
            return 200, {"kind": "compute#instanceAggregatedList", "items": items}
        if rest == "aggregated/machineTypes":
            flt = query.get("filter", [""])[0]
            name = re.match(r'name = "([^"]*)"', flt)
            pattern = re.match(r'name eq "([^"]*)"', flt)  # RE2, whole-name match
            items: dict[str, Any] = {}
            for mt, zones in self.zones.items():
                if name and name.group(1) != mt:
                    continue
                if pattern and not re.fullmatch(pattern.group(1), mt):
                    continue
                for zone in zones:
                    items.setdefault(f"zones/{zone}", {"machineTypes": []})["machineTypes"].append(
                        {"name": mt, "zone": zone, **self.machine_specs.get(mt, {})})
            return 200, {"kind": "compute#machineTypeAggregatedList", "items": items}
        if r := re.match(r"^regions/([^/]+)$", rest):
            return 200, {"kind": "compute#region", "name": r.group(1),
                         "quotas": self.quotas.get(r.group(1), [])}
        if r := re.match(r"^regions/([^/]+)/routers(?:/([^/]+))?$", rest):
            return self._routers(project, r.group(1), r.group(2), method, query, body)
        if rest == "aggregated/routers":
            items: dict[str, Any] = {}
            for (region, _), router in sorted(self.routers.items()):
                items.setdefault(f"regions/{region}", {"routers": []})["routers"].append(router)
            return 200, {"kind": "compute#routerAggregatedList", "items": items}
        if r := re.match(r"^regions/([^/]+)/subnetworks$", rest):
            return 200, {"kind": "compute#subnetworkList", "items": [
                s for (region, _), s in sorted(self.subnetworks.items())
                if region == r.group(1)]}
        if im := re.match(r"^global/images/(family/[^/]+|[^/]+)$", rest):
            image = self.images.get((project, im.group(1)))
            if image is None:
                return 404, {"error": {"code": 404, "message": f"The resource 'projects/"
                                       f"{project}/{rest}' was not found",
                                       "errors": [{"reason": "notFound"}]}}
            return 200, image
        if rest == "global/firewalls":
            if method == "POST":
                assert body is not None
                if body["name"] in self.firewalls:
                    return 409, {"error": {"code": 409, "message": f"The resource "
                                           f"'{body['name']}' already exists",
                                           "errors": [{"reason": "alreadyExists"}]}}
                self.firewalls[body["name"]] = body
                return 200, self._op(project, None, f"global/firewalls/{body['name']}",
                                     "insert")
            return 200, {"kind": "compute#firewallList", "items": list(self.firewalls.values())}
        if (f := re.match(r"^global/firewalls/([^/]+)$", rest)) and method == "DELETE":
            self.firewalls.pop(f.group(1), None)
            return 200, self._op(project, None, rest, "delete")
        return 404, {"error": {"code": 404, "message": f"no route {method} {rest}"}}


    # -- routers (Cloud NAT) -------------------------------------------------------------------
    def _routers(self, project: str, region: str, name: str | None, method: str,
                 query: dict[str, list[str]], body: dict[str, Any] | None
                 ) -> tuple[int, dict[str, Any]]:
        def not_found(what: str) -> tuple[int, dict[str, Any]]:
            return 404, {"error": {"code": 404, "message": f"The resource 'projects/{project}/"
                                   f"regions/{region}/routers/{what}' was not found",
                                   "errors": [{"reason": "notFound"}]}}

        def full(url: str) -> str:  # partial URLs come back whole
            if url.startswith("http"):
                return url
            return BASE + (url if url.startswith("projects/") else f"projects/{project}/{url}")

        if name is None and method == "POST":
            assert body is not None
            rid = query.get("requestId", [""])[0]
            if rid and rid in self.seen_request_ids:
                return 200, self.seen_request_ids[rid]
            if (region, body["name"]) in self.routers:
                return 409, {"error": {"code": 409, "message": f"The resource 'projects/"
                                       f"{project}/regions/{region}/routers/{body['name']}' "
                                       "already exists", "errors": [{"reason": "alreadyExists"}]}}
            router = {**body, "kind": "compute#router", "id": str(7000 + len(self.routers)),
                      "region": BASE + f"projects/{project}/regions/{region}",
                      "network": full(body.get("network", "")),
                      "selfLink": BASE + f"projects/{project}/regions/{region}/routers/"
                      f"{body['name']}",
                      "nats": [{**n, "subnetworks": [
                          {**sub, "name": full(sub["name"])}
                          for sub in n.get("subnetworks", [])]} if n.get("subnetworks") else n
                               for n in body.get("nats", [])]}
            # RouterNat.sourceSubnetworkIpRangesToNat: with ALL_SUBNETWORKS_* "there should not
            # be any other Router.Nat section in any Router for this network in this region"
            # (the wording of GCP's refusal is not documented; this one quotes the reference)
            beside = [n for (reg, _), r in self.routers.items() if reg == region
                      and r.get("network") == router["network"] for n in r.get("nats", [])]
            every = [n for n in router["nats"] if str(n.get("sourceSubnetworkIpRangesToNat",
                                                             "")).startswith("ALL_SUBNETWORKS")]
            if beside and (every or any(str(n.get("sourceSubnetworkIpRangesToNat", ""))
                                        .startswith("ALL_SUBNETWORKS") for n in beside)):
                return 400, {"error": {"code": 400, "message": "Invalid value for field "
                                       "'resource.nats[0]': there should not be any other "
                                       "Router.Nat section in any Router for this network in "
                                       "this region.", "errors": [{"reason": "invalid"}]}}
            self.routers[(region, body["name"])] = router
            op = self._op(project, None, f"regions/{region}/routers/{body['name']}", "insert")
            op["region"] = BASE + f"projects/{project}/regions/{region}"
            if rid:
                self.seen_request_ids[rid] = op
            return 200, op
        if name is None:
            return 200, {"kind": "compute#routerList", "items": [
                r for (reg, _), r in sorted(self.routers.items()) if reg == region]}
        if (region, name) not in self.routers:
            return not_found(name)
        if method == "DELETE":
            del self.routers[(region, name)]
            op = self._op(project, None, f"regions/{region}/routers/{name}", "delete")
            op["region"] = BASE + f"projects/{project}/regions/{region}"
            return 200, op
        return 200, self.routers[(region, name)]

    # -- IAM and Secret Manager ----------------------------------------------------------------
    @staticmethod
    def _error(code: int, status: str, message: str) -> tuple[int, dict[str, Any]]:
        return code, {"error": {"code": code, "message": message, "status": status}}

    def _iam(self, method: str, project: str, email: str | None,
             body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        if email is None and method == "POST":
            assert body is not None
            account = body["accountId"]
            # IAM: 6-30 characters, lower-case letters, digits and '-', a letter first
            if not re.fullmatch(r"[a-z]([-a-z0-9]{4,28})[a-z0-9]", account):
                return self._error(400, "INVALID_ARGUMENT", f"Invalid account id {account}")
            email = f"{account}@{project}.iam.gserviceaccount.com"
            if email in self.service_accounts:
                return self._error(409, "ALREADY_EXISTS", f"Service account {account} already "
                                   f"exists within project projects/{project}.")
            sa = {"name": f"projects/{project}/serviceAccounts/{email}", "projectId": project,
                  "uniqueId": str(100000000000000000000 + len(self.service_accounts)),
                  "email": email, **body.get("serviceAccount", {})}
            self.service_accounts[email] = sa
            return 200, sa
        if email is None:
            return 200, {"accounts": list(self.service_accounts.values())}
        if email not in self.service_accounts:
            return self._error(404, "NOT_FOUND", f"Unknown service account {email}")
        if method == "DELETE":
            del self.service_accounts[email]
            return 200, {}
        return 200, self.service_accounts[email]

    def _secret_policy(self, project: str, secret: str, verb: str,
                       body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        if secret not in self.secrets:
            return self._error(404, "NOT_FOUND", f"Secret [projects/{project}/secrets/{secret}] "
                               "not found or has no versions.")
        policy = self.secrets[secret]
        if verb == "getIamPolicy":
            answer = json.loads(json.dumps(policy))
            if self.races.get(secret):
                self.races[secret] -= 1
                policy.setdefault("bindings", []).append(
                    {"role": "roles/secretmanager.viewer", "members": ["user:racer@example.com"]})
                policy["etag"] = policy.get("etag", "BwA") + "x"
            return 200, answer
        assert body is not None
        new = body["policy"]
        if new.get("etag") != policy.get("etag"):
            return self._error(409, "ABORTED", "There were concurrent policy changes. Please "
                               "retry the whole read-modify-write with exponential backoff.")
        for b in new.get("bindings", []):
            for m in b.get("members", []):
                email = m.removeprefix("serviceAccount:")
                if (m.startswith("serviceAccount:") and email.endswith(
                        f"@{project}.iam.gserviceaccount.com")
                        and (email not in self.service_accounts or self.unknown_account_for)):
                    self.unknown_account_for = max(0, self.unknown_account_for - 1)
                    return self._error(400, "INVALID_ARGUMENT",
                                       f"Service account {email} does not exist.")
        self.secrets[secret] = {**new, "etag": policy.get("etag", "BwA") + "1"}
        return 200, self.secrets[secret]


@contextmanager
def serve(fake: FakeCompute) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            url = urlparse(self.path)
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n) if n else b""
            body = json.loads(raw) if raw else None
            status, answer = fake.handle(self.command, url.path, parse_qs(url.query), body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _any

        def log_message(self, *_: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}"
    finally:
        srv.shutdown()
        srv.server_close()


#: a secret's IAM policy as its creator leaves it (one owner, no accessor)
OWNER = {"role": "roles/secretmanager.admin", "members": ["user:owner@example.com"]}


@contextmanager
def serving_with_secrets(fake: FakeCompute) -> Iterator[FakeCompute]:
    """``fake`` served on 127.0.0.1 (its address as ``fake.url``) with advisor's default API-key
    and HF-token secrets in place, as the egress and preflight tests start from."""
    for secret in ("advisor-vllm-api-key", "advisor-hf-token"):
        fake.secrets[secret] = {"version": 1, "etag": "BwA", "bindings": [dict(OWNER)]}
    with serve(fake) as url:
        fake.url = url  # type: ignore[attr-defined]
        yield fake


def provider_for(fake: FakeCompute) -> Any:
    """A GcpProvider talking only to ``fake`` (anonymous credentials, no sleeping)."""
    from google.auth.credentials import AnonymousCredentials

    from advisor.clouds.gcp.compute import GcpProvider

    url = fake.url  # type: ignore[attr-defined]
    return GcpProvider(project="proj", credentials=AnonymousCredentials(), endpoint=url,
                       iam_url=url, secretmanager_url=url, sleep=lambda _s: None)
