"""GCP preflight (issue 27, item 6): what ``provision`` checks before it makes anything.

Each check is one :class:`~advisor.clouds.base.PreflightCheck`; a failure is one line with its
fix (a gcloud command where there is one). ``ok`` None: could not be asked (no permission to
read it, a transient error): said, not a refusal. The calls, in order:

* ``credentials`` — compute ``regions.get`` of the deployment's region (the call quota makes
  anyway; https://cloud.google.com/compute/docs/reference/rest/v1/regions/get). A refusal of it
  ends the preflight there: every later check would fail the same way.
* ``secret`` — per ``gcp-secret:`` reference, Secret Manager ``projects.secrets.get`` (the
  secret's metadata, never its value;
  https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/get).
* ``secret-access`` — the instance's service account reads the secret through a binding
  advisor adds at launch (getIamPolicy + setIamPolicy on the secret), so the caller must hold
  both permissions: ``projects.secrets.testIamPermissions``
  (https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/testIamPermissions),
  which answers the subset held (an empty object for none).
* ``quota`` — :func:`advisor.clouds.gcp.quota.check_quota`.
* ``image`` — ``images.getFromFamily`` for a family, ``images.get`` for an image
  (https://cloud.google.com/compute/docs/reference/rest/v1/images/getFromFamily, …/images/get).
* ``egress`` — an external IP, a Cloud NAT found, one advisor will make, or none
  (the egress section of :mod:`advisor.clouds.gcp.compute`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from advisor.clouds.base import CloudError, LaunchSpec, PreflightCheck
from advisor.clouds.gcp.options import CREDENTIALS_HINT
from advisor.clouds.gcp.resources import _not_found
from advisor.errors import UserInputError

if TYPE_CHECKING:
    from advisor.clouds.gcp.compute import GcpProvider

#: the permissions advisor's grant at launch needs on each secret (Secret Manager IAM
#: permissions, https://cloud.google.com/secret-manager/docs/access-control)
SECRET_PERMISSIONS = ("secretmanager.secrets.getIamPolicy", "secretmanager.secrets.setIamPolicy")
#: the Google APIs behind each check, for "API not enabled" answers
COMPUTE_API = "compute.googleapis.com"
SECRETMANAGER_API = "secretmanager.googleapis.com"
_IMAGE = re.compile(r"^(?:https://www\.googleapis\.com/compute/v1/)?(?:projects/([^/]+)/)?"
                    r"global/images/(family/)?([^/]+)\Z")


def _disabled(text: str) -> bool:
    """An answer that says the API is off in the project (403 SERVICE_DISABLED /
    accessNotConfigured: "… API has not been used in project … or it is disabled")."""
    low = text.lower()
    return ("has not been used" in low or "is disabled" in low or "service_disabled" in low
            or "accessnotconfigured" in low)


def _enable(api: str, project: str) -> str:
    return f"gcloud services enable {api} --project {project}"


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def credentials(p: GcpProvider, spec: LaunchSpec) -> PreflightCheck:
    try:
        project = p.project
    except UserInputError as exc:
        return PreflightCheck(name="credentials", ok=False, detail=str(exc),
                              fix=exc.hint or "pass --project or set GOOGLE_CLOUD_PROJECT")
    except CloudError as exc:
        return PreflightCheck(name="credentials", ok=False, detail=exc.detail,
                              fix=exc.hint or CREDENTIALS_HINT)
    try:
        p._do(p._client("RegionsClient").get, project=project, region=spec.region)
    except CloudError as exc:
        if _disabled(exc.detail):
            return PreflightCheck(name="credentials", ok=False,
                                  detail=f"the Compute Engine API is off in {project}: "
                                  f"{exc.detail[:160]}", fix=_enable(COMPUTE_API, project))
        if exc.scope == "provider":
            return PreflightCheck(name="credentials", ok=False,
                                  detail=f"project {project} refused: {exc.detail[:160]}",
                                  fix=f"{CREDENTIALS_HINT}; the account needs Compute Engine "
                                  f"in {project} (e.g. roles/compute.instanceAdmin.v1)")
        if _not_found(exc):
            return PreflightCheck(name="credentials", ok=False,
                                  detail=f"project {project} or region {spec.region} not found",
                                  fix="check --project (gcloud projects list) and the region")
        return PreflightCheck(name="credentials", ok=None,
                              detail=f"could not ask Compute Engine: {exc.detail[:160]}")
    return PreflightCheck(name="credentials", ok=True,
                          detail=f"Compute Engine answers for project {project}")


def secret_checks(p: GcpProvider, spec: LaunchSpec) -> list[PreflightCheck]:
    from advisor.clouds.gcp.resources import SECRET_ACCESSOR, sa_email, secret_names

    out: list[PreflightCheck] = []
    project = p.project
    account = sa_email(spec.deployment, project)
    for secret in secret_names(spec):
        url = p._secret_url(secret)
        try:
            status, doc = p._rest("GET", url)
        except CloudError as exc:
            out.append(PreflightCheck(name="secret", ok=None, detail=f"{secret}: could not "
                                      f"ask Secret Manager: {exc.detail[:160]}"))
            continue
        msg = str((doc.get("error") or {}).get("message", ""))
        if status == 404:
            out.append(PreflightCheck(
                name="secret", ok=False, detail=f"secret {secret} does not exist in {project}",
                fix=f"printf %s \"$VALUE\" | gcloud secrets create {secret} --project "
                f"{project} --data-file=-"))
            continue
        if status == 403 and _disabled(msg):
            out.append(PreflightCheck(name="secret", ok=False, detail=f"the Secret Manager API "
                                      f"is off in {project}",
                                      fix=_enable(SECRETMANAGER_API, project)))
            continue
        if status != 200:
            out.append(PreflightCheck(name="secret", ok=None, detail=f"{secret}: metadata not "
                                      f"readable (HTTP {status}: {msg[:120]})"))
        else:
            out.append(PreflightCheck(name="secret", ok=True, detail=f"secret {secret} exists"))
        try:
            status, doc = p._rest("POST", url + ":testIamPermissions",
                                  {"permissions": list(SECRET_PERMISSIONS)})
        except CloudError as exc:
            out.append(PreflightCheck(name="secret-access", ok=None,
                                      detail=f"{secret}: could not ask: {exc.detail[:160]}"))
            continue
        if status != 200:
            out.append(PreflightCheck(name="secret-access", ok=None, detail=f"{secret}: "
                                      f"permissions not testable (HTTP {status})"))
            continue
        held = set(doc.get("permissions") or [])
        missing = [x for x in SECRET_PERMISSIONS if x not in held]
        if missing:
            out.append(PreflightCheck(
                name="secret-access", ok=False,
                detail=f"advisor may not grant {account} {SECRET_ACCESSOR} on {secret}: the "
                f"credentials lack {', '.join(missing)}",
                fix=f"gcloud secrets add-iam-policy-binding {secret} --project {project} "
                "--member=<your principal, e.g. user:you@example.com> "
                "--role=roles/secretmanager.admin"))
        else:
            out.append(PreflightCheck(name="secret-access", ok=True, detail=f"advisor may grant "
                                      f"{account} {SECRET_ACCESSOR} on {secret}"))
    return out


def quota(p: GcpProvider, spec: LaunchSpec) -> PreflightCheck:
    q = p.check_quota(spec)
    if not q.checked:
        return PreflightCheck(name="quota", ok=None, detail=q.detail)
    if not q.ok:
        return PreflightCheck(name="quota", ok=False, detail=q.detail,
                              fix="request more at https://console.cloud.google.com/iam-admin/"
                              f"quotas?project={p.project} (Compute Engine API, "
                              f"region {spec.region})")
    return PreflightCheck(name="quota", ok=True, detail=q.detail)


def image_ref(spec: LaunchSpec, project: str) -> tuple[str, str | None, str | None]:
    """(image project, family, image) of the spec's image."""
    from advisor.clouds.gcp.resources import IMAGE

    m = _IMAGE.match(spec.image or IMAGE)
    if m is None:
        return project, None, None
    return m.group(1) or project, m.group(3) if m.group(2) else None, \
        None if m.group(2) else m.group(3)


def image(p: GcpProvider, spec: LaunchSpec) -> PreflightCheck:
    iproject, family, name = image_ref(spec, p.project)
    client = p._client("ImagesClient")
    what = f"family {family}" if family else f"image {name}"
    try:
        if family:
            img = p._do(client.get_from_family, project=iproject, family=family)
        elif name:
            img = p._do(client.get, project=iproject, image=name)
        else:
            return PreflightCheck(name="image", ok=None, detail=f"{spec.image!r} not understood")
    except CloudError as exc:
        if _not_found(exc):
            listing = (f"--filter=family:{family}" if family else "--no-standard-images")
            return PreflightCheck(name="image", ok=False,
                                  detail=f"{what} not found in project {iproject}",
                                  fix=f"pass --image with one that exists: gcloud compute "
                                  f"images list --project {iproject} {listing}")
        return PreflightCheck(name="image", ok=None, detail=f"{what} in {iproject} not "
                              f"readable: {exc.detail[:160]}")
    state = str(getattr(getattr(img, "deprecated", None), "state", "") or "")
    if state in ("OBSOLETE", "DELETED"):  # Image.deprecated.state (images reference)
        return PreflightCheck(name="image", ok=False, detail=f"{what} is {state}",
                              fix="pass --image with a current image")
    return PreflightCheck(name="image", ok=True, detail=f"{what} in {iproject}: {img.name}")


def egress(p: GcpProvider, spec: LaunchSpec) -> PreflightCheck:
    from advisor.clouds.gcp.resources import has_ingress, nat_mode, network_path, router_name

    if has_ingress(spec):
        return PreflightCheck(name="egress", ok=True, detail="external IP (--allow-cidr/"
                              "--ssh-cidr opens ingress): no Cloud NAT needed")
    net = network_path(spec.options.get("network")).rsplit("/", 1)[-1]
    try:
        e = p._egress(spec)
    except CloudError as exc:
        if exc.scope == "provider":
            # permissions are the account's, not the region's: every GCP candidate fails alike
            return PreflightCheck(name="egress", ok=False, detail=f"routers in {spec.region} "
                                  f"not readable: {exc.detail[:160]}",
                                  fix="the credentials need compute.routers.list and "
                                  "compute.routers.create (roles/compute.networkAdmin)",
                                  scope="provider")
        return PreflightCheck(name="egress", ok=None, detail=f"routers in {spec.region} not "
                              f"readable: {exc.detail[:160]}")
    if e.kind == "found" and e.nat is not None:
        return PreflightCheck(name="egress", ok=True, detail=f"Cloud NAT {e.nat.router}/"
                              f"{e.nat.name} serves network {net!r} in {spec.region}")
    if e.kind == "make":
        how = "--gcp-nat create: not looked up" if nat_mode(spec) == "create" else "none found"
        return PreflightCheck(name="egress", ok=True, detail=f"advisor will create Cloud NAT "
                              f"{router_name(spec.deployment)} on network {net!r} in "
                              f"{spec.region} ({how}; 'advisor down' removes it)")
    refusal = p._egress_refusal(spec, e)
    assert refusal is not None
    return PreflightCheck(name="egress", ok=False, detail=refusal.detail, fix=refusal.hint)


def preflight(p: GcpProvider, spec: LaunchSpec) -> list[PreflightCheck]:
    from advisor.clouds.gcp.resources import with_network

    spec = with_network(spec)
    cred = credentials(p, spec)
    if cred.ok is False:
        return [cred]
    return [cred, *secret_checks(p, spec), quota(p, spec), image(p, spec), egress(p, spec)]


def plan(p: GcpProvider, spec: LaunchSpec) -> list[PreflightCheck]:
    """The same checks, described: no call is made (``provision --dry-run``)."""
    from advisor.clouds.gcp.quota import QUOTA_METRICS
    from advisor.clouds.gcp.resources import (
        has_ingress,
        nat_mode,
        network_path,
        router_name,
        secret_names,
        with_network,
    )

    spec = with_network(spec)
    project = p._project or "<project>"
    out = [PreflightCheck(name="credentials", ok=None, detail=f"would ask Compute Engine "
                          f"regions.get {project}/{spec.region}")]
    for secret in secret_names(spec):
        out.append(PreflightCheck(name="secret", ok=None, detail=f"would read the metadata of "
                                  f"secret {secret} (projects.secrets.get)"))
        out.append(PreflightCheck(name="secret-access", ok=None, detail=f"would test "
                                  f"{', '.join(SECRET_PERMISSIONS)} on {secret} "
                                  "(testIamPermissions)"))
    metric = QUOTA_METRICS.get(spec.gpu_model, f"<no metric for {spec.gpu_model}>")
    out.append(PreflightCheck(name="quota", ok=None, detail=f"would read quota "
                              f"{'PREEMPTIBLE_' if spec.spot else ''}{metric} of {spec.region}"))
    iproject, family, name = image_ref(spec, project)
    out.append(PreflightCheck(name="image", ok=None, detail=(
        f"would look up image family {family} in {iproject} (images.getFromFamily)" if family
        else f"would look up image {name} in {iproject} (images.get)")))
    net = network_path(spec.options.get("network")).rsplit("/", 1)[-1]
    if has_ingress(spec):
        what = "external IP (--allow-cidr/--ssh-cidr): no Cloud NAT needed"
    elif nat_mode(spec) == "create":
        what = (f"would create Cloud NAT {router_name(spec.deployment)} on network {net!r} "
                "(--gcp-nat create)")
    else:
        what = (f"would list the routers of {spec.region} for a Cloud NAT serving network "
                f"{net!r}" + (f", else create {router_name(spec.deployment)}"
                              if nat_mode(spec) == "auto" else ", else refuse"))
    out.append(PreflightCheck(name="egress", ok=None, detail=what))
    return out
