"""GCP backend (google-cloud-compute, imported on first use, REST transport).

One deployment is: an instance with the deployment's labels and a network tag
``advisor-<name>``, the rendered cloud-config as ``user-data`` metadata, the GPU base image
(Canonical's Ubuntu accelerator image with the NVIDIA driver), ``onHostMaintenance=TERMINATE``
(GPU VMs cannot live-migrate), ``guestAccelerators`` only for machine types that do not bundle
their GPUs (A2, A3, A4 and G2 do), spot as ``provisioningModel=SPOT``, and a ``requestId`` derived
from the deployment, zone and type so that a retried insert creates nothing twice. Firewall
rules are made only for ``--allow-cidr`` (the vLLM ports) and ``--ssh-cidr`` (22), each aimed
at the deployment's network tag.

Least privilege (as the AWS instance profile): the instance runs as its own service account
``advisor-NAME@PROJECT.iam.gserviceaccount.com`` (a long name is cut and given a hash: account
ids hold at most 30 characters), never the default compute account. Its only role is
``roles/secretmanager.secretAccessor`` on the API key's secret (and the Hugging Face token's),
granted on each secret's own IAM policy (read-modify-write with the policy's etag). ``down``
takes that binding out again and deletes the account. The instance gets an external IP only
when ``--allow-cidr`` or ``--ssh-cidr`` opens something; without one it reaches apt, pip, the
Hugging Face Hub and Secret Manager only through Cloud NAT on its network (``--network``) in its
region: ``ensure_network`` finds one that serves the subnet or makes the deployment's own
(``--gcp-nat``, see the egress section below); ``down`` removes only a NAT advisor made.

Found again from the cloud: instances and their boot disks carry the labels
``advisor-deployment`` and ``advisor-attempt`` (the provision run that made them); firewall rules,
the NAT router and the service account cannot carry labels, so their exact names say the
deployment and their descriptions begin ``advisor deployment NAME attempt ID``.
``terminate_attempt`` removes only what one attempt made; ``down`` removes instances first
(``terminate_instances``), then the global rules and account (``remove_network``, only once no
instance of the deployment is left; the regional NAT router once none is left in its region);
``leftovers`` lists whatever is still there, bindings on the secrets included.

``endpoint``, ``iam_url``, ``secretmanager_url`` and ``credentials`` are the seams the tests
use: a local HTTP endpoint and anonymous credentials.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from advisor.clouds.base import (
    TAG_ATTEMPT,
    TAG_DEPLOYMENT,
    CloudError,
    LaunchSpec,
    PreflightCheck,
    QuotaStatus,
)
from advisor.clouds.gcp.resources import (
    BILLING_URL,
    CAPACITY,
    CLOUD_PLATFORM,
    IAM_URL,
    LIST_OF_SUBNETWORKS,
    QUOTA,
    SECRET_ACCESSOR,
    SECRETMANAGER_URL,
    Egress,
    Nat,
    _compute,
    _not_found,
    described_owner,
    described_secrets,
    firewall_bodies,
    firewall_names,
    fix_command,
    has_ingress,
    instance_body,
    nat_mode,
    nats_of,
    network_key,
    network_path,
    owner_text,
    request_id,
    router_body,
    router_name,
    sa_display_name,
    sa_email,
    secret_names,
    service_account_body,
    serving,
    update_command,
    with_network,
)
from advisor.errors import UserInputError
from advisor.state import InstanceRow, ResourceRow


class GcpProvider:
    name = "gcp"

    def __init__(self, project: str | None = None, credentials: Any = None,
                 endpoint: str | None = None, timeout_s: float = 600,
                 sleep: Callable[[float], None] = time.sleep, billing_url: str | None = None,
                 iam_url: str | None = None, secretmanager_url: str | None = None,
                 **_: Any) -> None:
        self.billing_url = billing_url or BILLING_URL
        self.iam_url = (iam_url or IAM_URL).rstrip("/")
        self.secretmanager_url = (secretmanager_url or SECRETMANAGER_URL).rstrip("/")
        self.notes: list[str] = []
        self._project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get(
            "CLOUDSDK_CORE_PROJECT")
        self._credentials = credentials
        self._endpoint = endpoint
        self.timeout_s = timeout_s
        self.sleep = sleep
        self._clients: dict[str, Any] = {}

    @property
    def project(self) -> str:
        if self._project is None:
            try:
                import google.auth

                creds, project = google.auth.default()
            except Exception as exc:
                raise CloudError("gcp", "NoCredentials", str(exc), "provider",
                                 hint="run 'gcloud auth application-default login' or set "
                                 "GOOGLE_APPLICATION_CREDENTIALS") from exc
            if not project:
                raise UserInputError("no GCP project given",
                                     hint="pass --project or set GOOGLE_CLOUD_PROJECT")
            self._credentials = self._credentials or creds
            self._project = project
        return self._project

    def _client(self, kind: str) -> Any:
        if kind not in self._clients:
            compute = _compute()
            opts = {"api_endpoint": self._endpoint} if self._endpoint else None
            self._clients[kind] = getattr(compute, kind)(
                credentials=self._credentials, transport="rest", client_options=opts)
        return self._clients[kind]

    def _session(self) -> Any:
        """An AuthorizedSession for the REST APIs that google-cloud-compute does not cover
        (IAM, Secret Manager)."""
        if "rest" not in self._clients:
            from google.auth.transport.requests import AuthorizedSession

            if self._credentials is None:
                import google.auth

                try:
                    self._credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
                except Exception as exc:
                    raise CloudError("gcp", "NoCredentials", str(exc), "provider",
                                     hint="run 'gcloud auth application-default login' or set "
                                     "GOOGLE_APPLICATION_CREDENTIALS") from exc
            self._clients["rest"] = AuthorizedSession(self._credentials)
        return self._clients["rest"]

    def _rest(self, method: str, url: str, body: dict[str, Any] | None = None,
              params: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        from advisor.clouds.base import check_deadline

        check_deadline("gcp")
        try:
            from advisor.clouds.base import CONNECT_TIMEOUT_S, read_timeout_s

            r = self._session().request(method, url, json=body, params=params,
                                        timeout=(CONNECT_TIMEOUT_S, read_timeout_s()))
        except Exception as exc:
            raise self.classify(exc) from exc
        try:
            doc = r.json()
        except ValueError:
            doc = {}
        return r.status_code, doc if isinstance(doc, dict) else {}

    @staticmethod
    def _rest_error(status: int, doc: dict[str, Any], what: str) -> CloudError:
        err = doc.get("error") or {}
        code = str(err.get("status") or f"HTTP{status}")
        msg = f"{what}: {err.get('message') or status}"
        if status in (401, 403):
            return CloudError("gcp", code, msg, "provider",
                              hint="the credentials need to create service accounts "
                              "(roles/iam.serviceAccountAdmin) and set IAM policies on secrets "
                              "(roles/secretmanager.admin), with the IAM and Secret Manager "
                              "APIs enabled")
        return CloudError("gcp", code, msg, "fatal")

    def _sa_url(self, email: str) -> str:
        return f"{self.iam_url}/v1/projects/{self.project}/serviceAccounts/{email}"

    def _secret_url(self, secret: str) -> str:
        return f"{self.secretmanager_url}/v1/projects/{self.project}/secrets/{secret}"

    # -- errors -----------------------------------------------------------------------------
    def classify(self, exc: BaseException) -> BaseException:
        from google.api_core import exceptions as gexc

        if isinstance(exc, CloudError | UserInputError):
            return exc
        if not isinstance(exc, gexc.GoogleAPICallError):
            import google.auth.exceptions as aexc

            if isinstance(exc, aexc.GoogleAuthError):
                return CloudError("gcp", type(exc).__name__, str(exc), "provider",
                                  hint="check the GCP credentials")
            return exc
        codes: list[str] = []
        resp = getattr(exc, "response", None)
        for e in getattr(getattr(resp, "error", None), "errors", None) or []:
            codes.append(str(getattr(e, "code", "")))
        for e in getattr(exc, "errors", None) or []:
            if isinstance(e, dict):
                codes += [str(e.get("reason", "")), str(e.get("code", ""))]
            else:
                codes.append(str(getattr(e, "code", "") or getattr(e, "reason", "")))
        codes = [c for c in codes if c]
        upper = {c.upper() for c in codes}
        msg = exc.message or str(exc)
        code = codes[0] if codes else type(exc).__name__
        if upper & CAPACITY or "does not have enough resources" in msg:
            return CloudError("gcp", next(iter(sorted(upper & CAPACITY)), code), msg, "zone")
        if upper & QUOTA or "Quota '" in msg:
            return CloudError("gcp", next(iter(sorted(upper & QUOTA)), code), msg, "region",
                              hint="request more GPU quota for the region (IAM & Admin > "
                              "Quotas)")
        if exc.code in (401, 403):
            return CloudError("gcp", code, msg, "provider",
                              hint="check that the credentials may use Compute Engine in "
                              "this project")
        if exc.code == 404 and "machineType" in msg:
            return CloudError("gcp", code, msg, "zone")
        return CloudError("gcp", code, msg, "fatal")

    def _do(self, fn: Callable[..., Any], **kw: Any) -> Any:
        """One google-cloud-compute call: the command's deadline first, then bounded like
        every cloud call (google-api-core's own default lets one call run for minutes)."""
        from advisor.clouds.base import CONNECT_TIMEOUT_S, check_deadline, read_timeout_s

        check_deadline("gcp")
        kw.setdefault("timeout", CONNECT_TIMEOUT_S + read_timeout_s())
        try:
            return fn(**kw)
        except Exception as exc:
            raise self.classify(exc) from exc

    def _wait(self, op: Any) -> None:
        from advisor.clouds.base import check_deadline, remaining_s

        check_deadline("gcp")  # the operation's polls are not _do calls: bounded here
        left = remaining_s()
        try:
            op.result(timeout=self.timeout_s if left is None else min(self.timeout_s,
                                                                     max(1.0, left)))
        except Exception as exc:
            raise self.classify(exc) from exc

    # -- requests ---------------------------------------------------------------------------
    def request(self, spec: LaunchSpec, zone: str | None) -> dict[str, Any]:
        spec = with_network(spec)
        z = zone or f"{spec.region}-<zone>"
        project = self._project or "<project>"
        email = sa_email(spec.deployment, project)
        calls: list[dict[str, Any]] = [{"call": "iam.projects.serviceAccounts.create",
                                        "name": f"projects/{project}",
                                        "body": service_account_body(spec)}]
        for secret in secret_names(spec):
            calls.append({
                "call": "secretmanager.projects.secrets.setIamPolicy",
                "resource": f"projects/{project}/secrets/{secret}",
                "body": {"policy": {
                    "bindings": [{"role": SECRET_ACCESSOR,
                                  "members": [f"serviceAccount:{email}"]}],
                    "etag": "<from getIamPolicy>"}},
                "note": "read-modify-write: the secret's other bindings are kept"})
        calls += [{"call": "compute.firewalls.insert", "body": b} for b in firewall_bodies(spec)]
        calls += self._nat_calls(spec, project)
        calls.append({"call": "compute.instances.insert", "zone": z,
                      "requestId": request_id(spec.vm_name, z, spec.instance_type),
                      "body": instance_body(spec, z, email)})
        out: dict[str, Any] = {"provider": "gcp", "project": project, "region": spec.region,
                               "zone": zone, "calls": calls}
        if not has_ingress(spec):
            out["notes"] = [self._nat_note(spec)]
        return out

    @staticmethod
    def _nat_calls(spec: LaunchSpec, project: str) -> list[dict[str, Any]]:
        """The egress step of the dry run: nothing with an external IP; else the look-up
        (routers.list in the region, unless --gcp-nat create) and the router insert (unless
        existing-only). Routers reference:
        https://cloud.google.com/compute/docs/reference/rest/v1/routers"""
        if has_ingress(spec):
            return []
        mode = nat_mode(spec)
        net = network_path(spec.options.get("network"))
        out: list[dict[str, Any]] = []
        if mode != "create":
            out.append({"call": "compute.routers.list", "project": network_key(net, project)[0],
                        "region": spec.region,
                        "note": f"a Cloud NAT on {net} that serves the instance's subnet in "
                        f"{spec.region} is used as found (advisor never removes it)"
                        + ("; none: provision stops with the gcloud commands that make one"
                           if mode == "existing-only" else "")})
        if mode != "existing-only":
            body = router_body(spec, net, owner_text(spec))
            out.append({"call": "compute.routers.insert", "region": spec.region,
                        "requestId": "<a new UUID per insert, sent again on its retries>",
                        "body": body,
                        "note": ("made for the deployment ('advisor down' removes it)"
                                 if mode == "create" else "only when the look-up finds none; "
                                 "'advisor down' removes it")})
        return out

    @staticmethod
    def _nat_note(spec: LaunchSpec) -> str:
        """What the dry run says about egress (no call made)."""
        net = network_path(spec.options.get("network")).rsplit("/", 1)[-1]
        mode = nat_mode(spec)
        head = (f"GCP: {spec.deployment} has no external IP (no --allow-cidr/--ssh-cidr): it "
                "reaches apt, pip, the Hugging Face Hub and Secret Manager only through Cloud "
                f"NAT on network {net!r} in {spec.region}")
        if mode == "create":
            return head + f": advisor makes {router_name(spec.deployment)} (--gcp-nat create)"
        if mode == "existing-only":
            return head + (": one must be there (--gcp-nat existing-only); without one "
                           "provision stops and says how to make it")
        return head + (f": one found there is used, else advisor makes "
                       f"{router_name(spec.deployment)} ('advisor down' removes only that one)")

    def _egress_note(self, spec: LaunchSpec, egress: Egress) -> str | None:
        """What ``provision`` says about the egress it found or made."""
        if egress.kind == "external-ip":
            return None
        net = network_path(spec.options.get("network")).rsplit("/", 1)[-1]
        head = (f"GCP: {spec.deployment} has no external IP (no --allow-cidr/--ssh-cidr): it "
                "reaches apt, pip, the Hugging Face Hub and Secret Manager through Cloud NAT")
        nat = egress.nat
        other = described_owner(nat.description)[0] if nat is not None else None
        if nat is not None and other is not None and other != spec.deployment:
            # known limit: the NAT is the other deployment's, and goes with it
            return (f"{head} {nat.router}, found on network {net!r} in {spec.region}: advisor "
                    f"made it for deployment {other}, and 'advisor down {other}' removes it "
                    f"(then {spec.deployment} has no egress; its install is done by then)")
        if nat is not None and not self._ours(nat.description, spec.deployment):
            return (f"{head} {nat.router}/{nat.name}, found on network {net!r} in "
                    f"{spec.region} (not advisor's: never removed by advisor)")
        return (f"{head} {router_name(spec.deployment)}, which advisor made on network {net!r} "
                f"in {spec.region} ('advisor down' removes it)")

    @staticmethod
    def _ours(description: str, deployment: str, attempt: str | None = None) -> bool:
        dep, att = described_owner(description)
        return dep == deployment and (not attempt or att == attempt)

    # -- look-ups ---------------------------------------------------------------------------
    def zones(self, spec: LaunchSpec) -> list[str | None]:
        compute = _compute()
        req = compute.AggregatedListMachineTypesRequest(
            project=self.project, filter=f'name = "{spec.instance_type}"')
        out = set()
        for scope, listed in self._do(self._client("MachineTypesClient").aggregated_list,
                                      request=req):
            zone = scope.split("/")[-1]
            if zone.startswith(spec.region + "-") and listed.machine_types:
                out.add(zone)
        return sorted(out)

    def check_quota(self, spec: LaunchSpec) -> QuotaStatus:
        from advisor.clouds.gcp.quota import check_quota

        return check_quota(self, spec)

    def preflight(self, spec: LaunchSpec) -> list[PreflightCheck]:
        """Credentials, each secret and advisor's right to grant it, quota, the image and
        egress, checked before anything is made (:mod:`advisor.clouds.gcp.preflight`)."""
        from advisor.clouds.gcp.preflight import preflight

        return preflight(self, spec)

    def preflight_plan(self, spec: LaunchSpec) -> list[PreflightCheck]:
        from advisor.clouds.gcp.preflight import plan

        return plan(self, spec)

    def console_output(self, instance: InstanceRow) -> str | None:
        """Serial port 1 of the instance (where cloud-init and advisor's boot lines go):
        instances.getSerialPortOutput, whose ``contents`` hold the last 1 MB or so
        (https://cloud.google.com/compute/docs/reference/rest/v1/instances/getSerialPortOutput).
        None when there is nothing yet, no such instance, or no permission to read it."""
        if not instance.zone:
            return None
        req = _compute().GetSerialPortOutputInstanceRequest(
            project=self.project, zone=instance.zone, instance=instance.id, port=1)
        try:
            out = self._do(self._client("InstancesClient").get_serial_port_output, request=req)
        except CloudError as err:
            if _not_found(err) or err.scope == "provider":
                return None
            raise
        return str(out.contents or "") or None

    def find(self, deployment: str, region: str) -> list[InstanceRow]:
        return [self._row(i, region, zone) for zone, i in self._labelled(deployment, region)]

    @staticmethod
    def _row(i: Any, region: str, zone: str) -> InstanceRow:
        nic = i.network_interfaces[0] if i.network_interfaces else None
        public = None
        if nic is not None and nic.access_configs:
            public = nic.access_configs[0].nat_i_p or None
        status = str(i.status).lower()
        # GCP's TERMINATED is a stopped VM that still exists (and still holds its disk)
        state = "stopped" if status == "terminated" else status
        return InstanceRow(id=str(i.name), provider="gcp", region=region, zone=zone,
                           instance_type=str(i.machine_type).split("/")[-1], state=state,
                           private_ip=(nic.network_i_p or None) if nic else None,
                           public_ip=public)

    # -- changes ----------------------------------------------------------------------------
    def ensure_network(self, spec: LaunchSpec) -> list[ResourceRow]:
        """The service account and its bindings, the firewall rules, and egress: an instance
        without an external IP needs a Cloud NAT, found (looked up first: an ``existing-only``
        refusal comes before anything is made) or made last."""
        spec = with_network(spec)
        compute = _compute()
        egress = self._egress(spec)
        refusal = self._egress_refusal(spec, egress)
        if refusal is not None:
            raise refusal
        out = [ResourceRow(kind="service-account", id=self._service_account(spec),
                           region=spec.region)]
        fw = self._client("FirewallsClient")
        for body in firewall_bodies(spec):
            try:
                op = fw.insert(project=self.project,
                               firewall_resource=compute.Firewall.from_json(json.dumps(body)))
                self._wait(op)
            except Exception as exc:
                err = self.classify(exc)
                if not (isinstance(err, CloudError) and "alreadyExists" in (err.code + err.detail)
                        or "already exists" in str(err)):
                    raise err from exc
            out.append(ResourceRow(kind="firewall", id=body["name"], region=spec.region))
        if egress.kind == "make":
            out.append(self._make_nat(spec))
        elif egress.nat is not None and self._ours(egress.nat.description, spec.deployment):
            out.append(ResourceRow(kind="nat-router", id=egress.nat.router, region=spec.region))
        note = self._egress_note(spec, egress)
        if note is not None and note not in self.notes:
            self.notes.append(note)
        return out

    # -- egress (Cloud NAT) -----------------------------------------------------------------
    def _egress(self, spec: LaunchSpec) -> Egress:
        """How the instance will reach the internet (``spec`` with its network as a path): an
        external IP, a NAT found, one to make, or none (see :class:`nat.Egress`)."""
        if has_ingress(spec):
            return Egress("external-ip")
        mode = nat_mode(spec)
        if mode == "create":
            return Egress("make")
        key = network_key(network_path(spec.options.get("network")), self.project)
        nats = self._nats(key[0], spec.region)
        subnets: list[str] | None = None
        if any(n.network == key and n.ranges == LIST_OF_SUBNETWORKS for n in nats):
            subnets = self._subnets(key, spec.region)
        found = serving(nats, key, subnets)
        if found is not None:
            return Egress("found", nat=found)
        others = tuple(n for n in nats if n.network == key)
        if key[0] != self.project:
            return Egress("shared-vpc", others=others, subnets=tuple(subnets or ()))
        if others:
            return Egress("conflict", others=others, subnets=tuple(subnets or ()))
        return Egress("make" if mode == "auto" else "missing")

    def _egress_refusal(self, spec: LaunchSpec, egress: Egress) -> CloudError | None:
        """The refusal (scope ``region``: another region's network may have its NAT) for an
        egress advisor may not or cannot provide, with the gcloud command that fixes it."""
        fix = self._egress_fix(spec, egress)
        if fix is None:
            return None
        net = network_key(network_path(spec.options.get("network")), self.project)
        what = {"missing": "and --gcp-nat existing-only makes none",
                "shared-vpc": f"and advisor makes none in another project ({net[0]})",
                "conflict": "(the network's NAT configs there list other subnets, and a NAT "
                "for all subnets may not sit beside them)"}[egress.kind]
        return CloudError("gcp", "NoCloudNAT", f"no Cloud NAT serves network {net[1]!r} in "
                          f"{spec.region} {what}: without an external IP the instance could "
                          "not reach apt, pip or the Hugging Face Hub", "region", hint=fix,
                          kind="error")

    def _egress_fix(self, spec: LaunchSpec, egress: Egress) -> str | None:
        net = network_key(network_path(spec.options.get("network")), self.project)
        if egress.kind in ("missing", "shared-vpc"):
            return fix_command(net[0], net[1], spec.region)
        if egress.kind == "conflict":
            listed = [n for n in egress.others if n.ranges == LIST_OF_SUBNETWORKS]
            if listed and egress.subnets:
                missing = [s for s in egress.subnets if s not in listed[0].subnets]
                return update_command(listed[0], net[0], missing)
            return ("give the instance's subnet a Cloud NAT (gcloud compute routers nats "
                    f"update … --region {spec.region}), or pass --allow-cidr/--ssh-cidr")
        return None

    def _nats(self, project: str, region: str) -> list[Nat]:
        """Every NAT config of every router in ``region`` (routers.list)."""
        compute = _compute()
        req = compute.ListRoutersRequest(project=project, region=region)
        out: list[Nat] = []
        for r in self._do(self._client("RoutersClient").list, request=req):
            out += nats_of(json.loads(compute.Router.to_json(r)), region, project)
        return out

    def _subnets(self, network: tuple[str, str], region: str) -> list[str]:
        """Names of ``network``'s subnets in ``region`` (subnetworks.list,
        https://cloud.google.com/compute/docs/reference/rest/v1/subnetworks/list)."""
        compute = _compute()
        req = compute.ListSubnetworksRequest(project=network[0], region=region)
        return [str(s.name) for s in self._do(self._client("SubnetworksClient").list, request=req)
                if network_key(str(s.network), network[0]) == network]

    def _router(self, region: str, name: str) -> dict[str, Any] | None:
        """routers.get as REST JSON; None when there is none of that name."""
        compute = _compute()
        try:
            r = self._do(self._client("RoutersClient").get, project=self.project, region=region,
                         router=name)
        except CloudError as err:
            if _not_found(err):
                return None
            raise
        return dict(json.loads(compute.Router.to_json(r)))

    def _make_nat(self, spec: LaunchSpec) -> ResourceRow:
        """The deployment's router with one NAT config (routers.insert with a requestId: a
        retried insert makes nothing twice). A router of that name from an earlier
        attempt is reused; one advisor did not make is a refusal."""
        compute = _compute()
        body = router_body(spec, network_path(spec.options.get("network")), owner_text(spec))
        # a new id per insert (retries of this request send it again): a router the same
        # attempt removed (a multi-node group moving zones) is made again, not answered from
        # the first insert's operation
        rid = str(uuid.uuid4())
        try:
            req = compute.InsertRouterRequest(
                project=self.project, region=spec.region, request_id=rid,
                router_resource=compute.Router.from_json(json.dumps(body)))
            op = self._do(self._client("RoutersClient").insert, request=req)
            self._wait(op)
        except CloudError as err:
            if "alreadyexists" not in (err.code + err.detail).lower().replace(" ", ""):
                raise
            found = self._router(spec.region, body["name"])
            if found is None or not self._ours(str(found.get("description", "")),
                                               spec.deployment):
                raise CloudError("gcp", "ALREADY_EXISTS", f"a router {body['name']} exists in "
                                 f"{spec.region} that advisor did not create", "fatal",
                                 hint="choose another --name") from err
        return ResourceRow(kind="nat-router", id=body["name"], region=spec.region)

    def _remove_nat(self, deployment: str, region: str, attempt: str | None = None
                    ) -> list[str]:
        """The deployment's router (and its NAT) in ``region`` when advisor made it (and
        ``attempt`` did, when given); a NAT advisor found is never touched."""
        name = router_name(deployment)
        found = self._router(region, name)
        if found is None or not self._ours(str(found.get("description", "")), deployment,
                                           attempt):
            return []
        try:
            self._wait(self._do(self._client("RoutersClient").delete, project=self.project,
                                region=region, router=name))
        except CloudError as err:
            if not _not_found(err):
                raise
        return [f"nat:{region}/{name}"]

    def _service_account(self, spec: LaunchSpec) -> str:
        """The deployment's service account, made once, and its one role on each secret."""
        body = service_account_body(spec)
        email = sa_email(spec.deployment, self.project)
        status, doc = self._rest("POST", f"{self.iam_url}/v1/projects/{self.project}/"
                                 "serviceAccounts", body)
        if status == 409:  # a second run: ours, or someone else's of the same name?
            status, doc = self._rest("GET", self._sa_url(email))
            if status == 200 and doc.get("displayName") != sa_display_name(spec.deployment):
                raise CloudError("gcp", "ALREADY_EXISTS", f"a service account {email} exists "
                                 "that advisor did not create", "fatal",
                                 hint="choose another --name")
        if status != 200:
            raise self._rest_error(status, doc, f"creating service account {email}")
        for secret in secret_names(spec):
            self._grant(secret, f"serviceAccount:{email}")
        return email

    def _grant(self, secret: str, member: str) -> None:
        """``member`` gets the accessor role on ``secret``: getIamPolicy, add, setIamPolicy with
        the etag read (a concurrent change answers 409 and is read again)."""
        url = self._secret_url(secret)
        for attempt in range(8):
            status, policy = self._rest("GET", url + ":getIamPolicy",
                                        params={"options.requestedPolicyVersion": "3"})
            if status == 404:
                raise UserInputError(f"GCP secret {secret!r} does not exist in project "
                                     f"{self.project}", hint=f"create it first: gcloud secrets "
                                     f"create {secret} --data-file=-")
            if status != 200:
                raise self._rest_error(status, policy, f"reading the IAM policy of {secret}")
            bindings = policy.setdefault("bindings", [])
            mine = next((b for b in bindings if b.get("role") == SECRET_ACCESSOR
                         and "condition" not in b), None)
            if mine is not None and member in mine.get("members", []):
                return
            if mine is None:
                bindings.append({"role": SECRET_ACCESSOR, "members": [member]})
            else:
                mine.setdefault("members", []).append(member)
            status, doc = self._rest("POST", url + ":setIamPolicy", {"policy": policy})
            if status == 200:
                return
            msg = str((doc.get("error") or {}).get("message", ""))
            if status == 409 and attempt < 7:
                continue  # the etag moved on: read it again
            if status == 400 and "does not exist" in msg and attempt < 7:
                self.sleep(2.0 * (attempt + 1))  # a new account takes a moment to be known
                continue
            raise self._rest_error(status, doc, f"granting {SECRET_ACCESSOR} on {secret}")

    def _revoke(self, secret: str, email: str) -> None:
        """Take ``email`` (and bindings of earlier accounts of that email, now ``deleted:``)
        out of the accessor role on ``secret``; a missing secret has nothing to take."""
        url = self._secret_url(secret)
        member, deleted = f"serviceAccount:{email}", f"deleted:serviceAccount:{email}?uid="
        for _ in range(8):
            status, policy = self._rest("GET", url + ":getIamPolicy",
                                        params={"options.requestedPolicyVersion": "3"})
            if status in (403, 404):
                return  # no secret left, or none we may read: the binding goes with the account
            if status != 200:
                raise self._rest_error(status, policy, f"reading the IAM policy of {secret}")
            changed = False
            kept = []
            for b in policy.get("bindings", []):
                members = b.get("members", [])
                if b.get("role") == SECRET_ACCESSOR:
                    left = [m for m in members if m != member and not m.startswith(deleted)]
                    changed |= left != members
                    if not left:
                        continue
                    b = {**b, "members": left}
                kept.append(b)
            if not changed:
                return
            status, doc = self._rest("POST", url + ":setIamPolicy",
                                     {"policy": {**policy, "bindings": kept}})
            if status == 200:
                return
            if status != 409:
                raise self._rest_error(status, doc, f"removing {email} from {secret}")

    def launch(self, spec: LaunchSpec, zone: str | None) -> InstanceRow:
        compute = _compute()
        assert zone is not None, "GCP instances live in a zone"
        call = self.request(spec, zone)["calls"][-1]
        req = compute.InsertInstanceRequest(
            project=self.project, zone=zone, request_id=call["requestId"],
            instance_resource=compute.Instance.from_json(json.dumps(call["body"])))
        op = self._do(self._client("InstancesClient").insert, request=req)
        self._wait(op)
        inst = self._do(self._client("InstancesClient").get, project=self.project, zone=zone,
                        instance=spec.vm_name)
        return self._row(inst, spec.region, zone)

    def catalog_facts(self, regions: list[str], doc: dict[str, Any]) -> list[Any]:
        """What the machine-type and Cloud Billing Catalog APIs state about every GPU machine
        type offered in ``regions`` (for ``advisor catalog refresh``)."""
        from advisor.clouds.gcp.refresh import catalog_facts

        return catalog_facts(self, regions, doc)

    def terminate(self, deployment: str, region: str) -> list[str]:
        return (self.terminate_instances(deployment, region)
                + self.remove_network(deployment, region))

    def terminate_attempt(self, deployment: str, region: str, attempt: str) -> list[str]:
        """Only what one provision attempt made: instances labelled with its ``advisor-attempt``,
        firewall rules and the service account whose description names it. Another attempt's
        rules or account (reused by this one) are left alone."""
        return (self.terminate_instances(deployment, region, attempt)
                + self.remove_network(deployment, region, attempt))

    def _labelled(self, deployment: str, region: str | None = None,
                  attempt: str | None = None) -> list[tuple[str, Any]]:
        """(zone, instance) labelled with the deployment (and ``attempt``), in ``region`` or
        anywhere, in any state."""
        compute = _compute()
        req = compute.AggregatedListInstancesRequest(
            project=self.project, filter=f'labels.{TAG_DEPLOYMENT} = "{deployment}"')
        out = []
        for scope, listed in self._do(self._client("InstancesClient").aggregated_list,
                                      request=req):
            zone = scope.split("/")[-1]
            if region is not None and not zone.startswith(region + "-"):
                continue
            for i in listed.instances:
                if i.labels.get(TAG_DEPLOYMENT) != deployment:
                    continue
                if attempt and i.labels.get(TAG_ATTEMPT) != attempt:
                    continue
                out.append((zone, i))
        return out

    def terminate_instances(self, deployment: str, region: str,
                            attempt: str | None = None) -> list[str]:
        """The deployment's instances in ``region`` (only ``attempt``'s, when given); each
        delete is waited for."""
        removed = []
        client = self._client("InstancesClient")
        for zone, i in self._labelled(deployment, region, attempt):
            try:
                self._wait(self._do(client.delete, project=self.project, zone=zone,
                                    instance=i.name))
            except CloudError as err:
                if not _not_found(err):
                    raise
            removed.append(str(i.name))
        return removed

    def _firewalls(self, deployment: str, attempt: str | None = None) -> list[str]:
        """The deployment's firewall rules (global): one of its exact names and a description
        that names it (and ``attempt``, when given)."""
        compute = _compute()
        names = firewall_names(deployment)
        req = compute.ListFirewallsRequest(project=self.project,
                                           filter=f'name = "advisor-{deployment}-*"')
        out = []
        for rule in self._do(self._client("FirewallsClient").list, request=req):
            if str(rule.name) not in names:
                continue
            dep, att = described_owner(str(rule.description))
            if dep != deployment or (attempt and att != attempt):
                continue
            out.append(str(rule.name))
        return out

    def remove_network(self, deployment: str, region: str,
                       attempt: str | None = None) -> list[str]:
        """The firewall rules and the service account (with its bindings) of the deployment
        (only those ``attempt`` made, when given) — once no instance of the deployment is left in
        any region: both are global, shared by every region's instances. The NAT router advisor
        made in ``region`` goes once no instance of the deployment is left in that region."""
        anywhere = self._labelled(deployment)
        removed = []
        if not any(zone.startswith(region + "-") for zone, _i in anywhere):
            removed += self._remove_nat(deployment, region, attempt)
        if anywhere:
            return removed
        fw = self._client("FirewallsClient")
        for name in self._firewalls(deployment, attempt):
            try:
                self._wait(self._do(fw.delete, project=self.project, firewall=name))
            except CloudError as err:
                if not _not_found(err):
                    raise
            removed.append(f"firewall:{name}")
        return removed + self._remove_service_account(deployment, attempt)

    def _our_account(self, deployment: str, attempt: str | None = None
                     ) -> tuple[str, dict[str, Any]] | None:
        """(email, account) of the deployment's service account when advisor made it (and
        ``attempt`` did, when given); None otherwise."""
        email = sa_email(deployment, self.project)
        status, doc = self._rest("GET", self._sa_url(email))
        if status == 404:
            return None
        if status != 200:
            raise self._rest_error(status, doc, f"reading service account {email}")
        if doc.get("displayName") != sa_display_name(deployment):
            return None
        if attempt and described_owner(str(doc.get("description", "")))[1] != attempt:
            return None
        return email, doc

    def _remove_service_account(self, deployment: str, attempt: str | None = None
                                ) -> list[str]:
        """The deployment's service account and its bindings, once no instance of the
        deployment is left in any region; an account advisor did not make (or, with
        ``attempt``, another attempt made) is left alone."""
        ours = self._our_account(deployment, attempt)
        if ours is None:
            return []
        email, doc = ours
        if self._labelled(deployment):
            return []  # still used in another region
        for secret in described_secrets(str(doc.get("description", ""))):
            self._revoke(secret, email)
        status, doc = self._rest("DELETE", self._sa_url(email))
        if status not in (200, 404):
            raise self._rest_error(status, doc, f"deleting service account {email}")
        return [f"service-account:{email}"]

    def leftovers(self, deployment: str, region: str) -> list[str]:
        """What still carries the deployment's label or name: its instances in ``region`` (any
        state), the NAT router advisor made there, and — global, named without a region — its
        firewall rules, its service account and that account's bindings on the secrets its
        description names."""
        left = [f"{region}:{i.name}" for _z, i in self._labelled(deployment, region)]
        left += [f"firewall:{n}" for n in self._firewalls(deployment)]
        router = self._router(region, router_name(deployment))
        if router is not None and self._ours(str(router.get("description", "")), deployment):
            left.append(f"nat:{region}/{router_name(deployment)}")
        ours = self._our_account(deployment)
        if ours is not None:
            email, doc = ours
            left.append(f"service-account:{email}")
            member = f"serviceAccount:{email}"
            for secret in described_secrets(str(doc.get("description", ""))):
                status, policy = self._rest("GET", self._secret_url(secret) + ":getIamPolicy",
                                            params={"options.requestedPolicyVersion": "3"})
                if status == 200 and any(member in b.get("members", [])
                                         for b in policy.get("bindings", [])):
                    left.append(f"binding:{secret}:{email}")
        return left
