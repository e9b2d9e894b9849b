"""AWS backend (boto3, imported on first use).

One deployment in one region is: a security group ``advisor-<name>`` in the default VPC that
opens nothing unless asked (``--allow-cidr`` opens the vLLM ports to that range, ``--ssh-cidr``
opens 22), an IAM role and instance profile ``advisor-<name>`` that may read only the API-key
parameter named by ``aws-ssm:…``, and the instance itself: IMDSv2 required, an encrypted gp3
root volume sized for the weights, the rendered cloud-config as user-data, tags on the instance
and its volumes, spot as an option, and a ``ClientToken`` derived from the deployment, type and
zone so that a retried call launches nothing twice.

The GPU base image is the AWS Deep Learning Base OSS NVIDIA driver AMI (Ubuntu 22.04), found
through its public SSM parameter and, where that parameter cannot be read, through
``describe_images`` on Amazon's own images; ``--image`` overrides both.

``AWS_ENDPOINT_URL`` (read by boto3 itself) points every client at another endpoint: the tests
run moto's server on 127.0.0.1 that way.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from advisor.clouds.aws import CLOUD
from advisor.clouds.aws.resources import (
    ALIVE_STATES,
    AUTH,
    CAPACITY,
    DLAMI_NAMES,
    DLAMI_PARAMETER,
    QUOTA,
    TRUST,
    _boto3,
    ingress,
    role_policy,
    sg_name,
    tags,
    token,
)
from advisor.clouds.base import (
    TAG_ATTEMPT,
    TAG_DEPLOYMENT,
    CloudError,
    LaunchSpec,
    PreflightCheck,
    QuotaStatus,
)
from advisor.state import InstanceRow, ResourceRow


@functools.cache
def _loader() -> Any:
    """The process's one botocore data loader: it caches each service model it parses, and it
    only reads files, so the sessions of several providers and threads can share it."""
    from botocore.loaders import create_loader

    return create_loader()


class AwsProvider:
    name = "aws"
    #: a region is its own boto3 client: a sweep may ask several at once (provisioning.down)
    regions_in_parallel = True

    def __init__(self, session: Any = None, sleep: Callable[[float], None] = time.sleep,
                 waiter_delay: int = 5, **_: Any) -> None:
        self.notes: list[str] = []
        self._session = session
        self.sleep = sleep
        self.waiter_delay = waiter_delay
        self._clients: dict[tuple[str, str], Any] = {}
        self._clients_lock = threading.Lock()
        #: (region, --image or None) -> the image resolved by the preflight, reused by launch
        self._images: dict[tuple[str, str | None], dict[str, Any]] = {}

    # -- plumbing ---------------------------------------------------------------------------
    def _client(self, service: str, region: str) -> Any:
        key = (service, region)
        with self._clients_lock:  # down asks regions from several threads (a session is not
            return self._make_client(key)  # thread-safe; a made client is)

    def _make_client(self, key: tuple[str, str]) -> Any:
        service, region = key
        if service == "iam":  # one global endpoint: one client, whichever region asks
            key = ("iam", "")
        if key not in self._clients:
            boto3 = _boto3()
            from botocore.config import Config

            from advisor._version import __version__

            if self._session is None:  # one session: its loader reads each service model once
                # (a new one per client: ~50 ms each), and one loader for every session of the
                # process: a sweep or a test suite makes many providers, and each new loader
                # parses ec2's model again (~40 ms)
                from botocore.session import get_session

                core = get_session()
                core.register_component("data_loader", _loader())
                self._session = boto3.session.Session(botocore_session=core)
            from advisor.clouds.base import CALL_ATTEMPTS, CONNECT_TIMEOUT_S, read_timeout_s

            # bounded: botocore's defaults (60 s + 60 s, 4 tries) let a stalled endpoint hold
            # one call for 4 minutes; "standard" retries back off on throttling and 5xx
            cfg = Config(retries={"mode": "standard", "max_attempts": CALL_ATTEMPTS},
                         connect_timeout=CONNECT_TIMEOUT_S, read_timeout=read_timeout_s(),
                         user_agent_extra=f"advisor/{__version__}")
            client = self._session.client(service, region_name=region, config=cfg)
            # the command's overall deadline, checked before every call of this client
            from advisor.clouds.base import check_deadline

            client.meta.events.register("before-call", lambda **_: check_deadline("aws"))
            self._clients[key] = client
        return self._clients[key]

    def _call(self, client: Any, op: str, **kw: Any) -> Any:
        try:
            return getattr(client, op)(**kw)
        except Exception as exc:  # botocore errors: classified, everything else re-raised
            raise self.classify(exc) from exc

    def classify(self, exc: BaseException) -> BaseException:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {})
            code = str(err.get("Code", "Unknown")).removeprefix("Server.").removeprefix(
                "Client.")
            msg = str(err.get("Message", exc))
            if code in CAPACITY:
                return CloudError("aws", code, msg, "zone")
            if code in QUOTA:
                return CloudError("aws", code, msg, "region",
                                  hint="ask AWS for more vCPU quota in this region "
                                  "(Service Quotas, EC2 'Running On-Demand P/G instances')")
            if code in AUTH:
                return CloudError("aws", code, msg, "provider",
                                  hint="check the AWS credentials and that they may call EC2, "
                                  "IAM and SSM")
            if code in ("IdempotentParameterMismatch", "InvalidGroup.Duplicate"):
                # the launch's ClientToken (deployment, region, zone, type) was used by another
                # launch of the same name: AWS made no second instance (two state files, two
                # machines); the first one runs and carries the deployment's tag. A duplicate
                # security group is the same race one call earlier: the other launcher made the
                # deployment's group between this one's look and its create
                return CloudError("aws", code, msg, "fatal",
                                  hint="another launch of this deployment name already ran "
                                  "here (another state file or machine?): 'advisor status "
                                  "NAME --reconcile' finds it, 'advisor down NAME' removes it")
            return CloudError("aws", code, msg, "fatal")
        if isinstance(exc, NoCredentialsError):
            return CloudError("aws", "NoCredentials", str(exc), "provider",
                              hint="configure AWS credentials (aws configure, AWS_PROFILE or "
                              "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)")
        if isinstance(exc, EndpointConnectionError):
            return CloudError("aws", "EndpointConnectionError", str(exc), "region",
                              kind="error")
        if isinstance(exc, ReadTimeoutError | ConnectTimeoutError):
            # the endpoint took the connection and did not answer in time: it blocks every
            # call (scope provider), but it is not the credentials' fault (a stalled endpoint
            # was read as "no usable AWS credentials")
            return CloudError("aws", type(exc).__name__, str(exc), "provider", kind="error",
                              hint="the AWS endpoint did not answer in time: check the "
                              "network (proxy, firewall, AWS_ENDPOINT_URL) or the AWS Health "
                              "Dashboard for the region")
        if isinstance(exc, BotoCoreError):
            return CloudError("aws", type(exc).__name__, str(exc), "provider")
        return exc

    # -- the exact requests -----------------------------------------------------------------
    def request(self, spec: LaunchSpec, zone: str | None,
                resolved: dict[str, Any] | None = None) -> dict[str, Any]:
        """The calls a launch makes, in order, with their bodies (placeholders where an id is
        only known once an earlier call returns)."""
        r = resolved or {}
        sg = r.get("sg_id", f"<id of security group {sg_name(spec.deployment)}>")
        image = spec.image or r.get("image_id", f"<resolved from SSM {DLAMI_PARAMETER}>")
        profile = spec.options.get("instance_profile") or sg_name(spec.deployment)
        run: dict[str, Any] = {
            "ImageId": image,
            "InstanceType": spec.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "ClientToken": token(spec.vm_name, spec.region, zone or "", spec.instance_type),
            "UserData": spec.user_data,
            "SecurityGroupIds": [sg],
            "IamInstanceProfile": {"Name": profile},
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled",
                                "HttpPutResponseHopLimit": 1},
            "BlockDeviceMappings": [{
                "DeviceName": r.get("root_device", "/dev/sda1"),
                "Ebs": {"VolumeSize": max(spec.disk_gib, r.get("min_disk_gib", 0)),
                        "VolumeType": "gp3", "DeleteOnTermination": True, "Encrypted": True}}],
            "TagSpecifications": [{"ResourceType": "instance", "Tags": tags(spec)},
                                  {"ResourceType": "volume", "Tags": tags(spec)}],
        }
        if zone:
            run["Placement"] = {"AvailabilityZone": zone}
        if spec.nodes > 1:
            # one cluster placement group: the replica's instances close together in one zone
            run.setdefault("Placement", {})["GroupName"] = sg_name(spec.deployment)
            if spec.fabric == "efa":
                # the EFA device carries NCCL between the nodes; with an explicit interface the
                # security group and subnet move onto it
                del run["SecurityGroupIds"]
                run["NetworkInterfaces"] = [{
                    "DeviceIndex": 0, "InterfaceType": "efa", "Groups": [sg],
                    "SubnetId": r.get("subnet_id", f"<default subnet of {zone or 'the zone'}>"),
                    "AssociatePublicIpAddress": True, "DeleteOnTermination": True}]
        if spec.spot:
            run["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time",
                                "InstanceInterruptionBehavior": "terminate"}}
        calls: list[dict[str, Any]] = [{
            "call": "ec2.CreateSecurityGroup",
            "body": {"GroupName": sg_name(spec.deployment),
                     "Description": f"advisor deployment {spec.deployment}",
                     "VpcId": r.get("vpc_id", "<default VPC>"),
                     "TagSpecifications": [{"ResourceType": "security-group",
                                            "Tags": tags(spec)}]}}]
        perms = ingress(spec, r.get("sg_id"))
        if perms:
            calls.append({"call": "ec2.AuthorizeSecurityGroupIngress",
                          "body": {"GroupId": sg, "IpPermissions": perms}})
        if spec.nodes > 1:
            calls.append({"call": "ec2.CreatePlacementGroup", "body": {
                "GroupName": sg_name(spec.deployment), "Strategy": "cluster",
                "TagSpecifications": [{"ResourceType": "placement-group",
                                       "Tags": tags(spec)}]}})
        if not spec.options.get("instance_profile"):
            calls += [
                {"call": "iam.CreateRole", "body": {
                    "RoleName": profile, "AssumeRolePolicyDocument": json.dumps(TRUST),
                    "Tags": tags(spec)}},
                {"call": "iam.PutRolePolicy", "body": {
                    "RoleName": profile, "PolicyName": "advisor-read-api-key",
                    "PolicyDocument": json.dumps(role_policy(spec, r.get("account",
                                                                         "<account>")))}},
                {"call": "iam.CreateInstanceProfile", "body": {"InstanceProfileName": profile,
                                                               "Tags": tags(spec)}},
                {"call": "iam.AddRoleToInstanceProfile", "body": {
                    "InstanceProfileName": profile, "RoleName": profile}}]
        # the body shows the user-data as text; launch() sends it gzip-compressed (its 16 KB
        # limit, advisor.clouds.aws.USER_DATA_LIMIT), which cloud-init inflates
        calls.append({"call": "ec2.RunInstances", "body": run,
                      "user_data_encoding": "gzip"})
        return {"provider": "aws", "region": spec.region, "zone": zone, "calls": calls}

    # -- read-only look-ups -----------------------------------------------------------------
    def zones(self, spec: LaunchSpec) -> list[str | None]:
        ec2 = self._client("ec2", spec.region)
        r = self._call(ec2, "describe_instance_type_offerings", LocationType="availability-zone",
                       Filters=[{"Name": "instance-type", "Values": [spec.instance_type]}])
        return sorted({o["Location"] for o in r.get("InstanceTypeOfferings", [])})

    def check_quota(self, spec: LaunchSpec) -> QuotaStatus:
        from advisor.clouds.aws.quota import check_quota

        return check_quota(self, spec)

    def preflight(self, spec: LaunchSpec) -> list[PreflightCheck]:
        """Credentials, secrets and their access, quota, image and egress, read-only
        (:mod:`advisor.clouds.aws.preflight`)."""
        from advisor.clouds.aws.preflight import preflight

        return preflight(self, spec)

    def preflight_plan(self, spec: LaunchSpec) -> list[PreflightCheck]:
        from advisor.clouds.aws.preflight import plan

        return plan(spec)

    def console_output(self, instance: InstanceRow) -> str | None:
        """The instance's serial console (EC2 ``GetConsoleOutput``, which botocore decodes
        from base64); ``Latest`` where the instance type supports it (Nitro), else the
        buffered output. None when EC2 has nothing yet."""
        ec2 = self._client("ec2", instance.region)
        try:
            r = self._call(ec2, "get_console_output", InstanceId=instance.id, Latest=True)
        except CloudError as exc:
            if exc.code not in ("UnsupportedOperation", "InvalidParameterValue",
                                "InvalidParameter"):
                raise
            r = self._call(ec2, "get_console_output", InstanceId=instance.id)
        text = r.get("Output")
        return str(text) if text else None

    def _vcpus_in_use(self, spec: LaunchSpec, letter: str) -> float:
        ec2 = self._client("ec2", spec.region)
        used = 0.0
        pages = ec2.get_paginator("describe_instances").paginate(Filters=[
            {"Name": "instance-type", "Values": [f"{letter}*"]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        for page in pages:
            for res in page.get("Reservations", []):
                for i in res.get("Instances", []):
                    cpu = i.get("CpuOptions") or {}
                    used += cpu.get("CoreCount", 0) * cpu.get("ThreadsPerCore", 1)
        return used

    def find(self, deployment: str, region: str) -> list[InstanceRow]:
        ec2 = self._client("ec2", region)
        out = []
        r = self._call(ec2, "describe_instances", Filters=[
            {"Name": f"tag:{TAG_DEPLOYMENT}", "Values": [deployment]},
            {"Name": "instance-state-name", "Values": ALIVE_STATES}])
        for res in r.get("Reservations", []):
            for i in res.get("Instances", []):
                out.append(self._row(i, region))
        return out

    @staticmethod
    def _row(i: dict[str, Any], region: str) -> InstanceRow:
        return InstanceRow(id=i["InstanceId"], provider="aws", region=region,
                           zone=(i.get("Placement") or {}).get("AvailabilityZone"),
                           instance_type=i["InstanceType"], state=i["State"]["Name"],
                           private_ip=i.get("PrivateIpAddress"),
                           public_ip=i.get("PublicIpAddress"))

    # -- changes ----------------------------------------------------------------------------
    def ensure_network(self, spec: LaunchSpec) -> list[ResourceRow]:
        ec2 = self._client("ec2", spec.region)
        vpcs = self._call(ec2, "describe_vpcs",
                          Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
        if not vpcs:
            raise CloudError("aws", "NoDefaultVpc", f"{spec.region} has no default VPC",
                             "region", kind="error",
                             hint="create one with 'aws ec2 create-default-vpc'")
        vpc = vpcs[0]["VpcId"]
        out = [ResourceRow(kind="security-group", id=self._security_group(spec, vpc),
                           region=spec.region)]
        if spec.nodes > 1:
            out.append(ResourceRow(kind="placement-group", id=self._placement_group(spec),
                                   region=spec.region))
        if not spec.options.get("instance_profile"):
            out.append(ResourceRow(kind="instance-profile", id=self._instance_profile(spec),
                                   region=spec.region))
        return out

    def _security_group(self, spec: LaunchSpec, vpc: str) -> str:
        ec2 = self._client("ec2", spec.region)
        name = sg_name(spec.deployment)
        found = self._call(ec2, "describe_security_groups", Filters=[
            {"Name": "group-name", "Values": [name]}, {"Name": "vpc-id", "Values": [vpc]}]
        )["SecurityGroups"]
        if found:
            return str(found[0]["GroupId"])
        body = self.request(spec, None, {"vpc_id": vpc})["calls"][0]["body"]
        sg = str(self._call(ec2, "create_security_group", **body)["GroupId"])
        perms = ingress(spec, sg)
        if perms:
            self._call(ec2, "authorize_security_group_ingress", GroupId=sg, IpPermissions=perms)
        return sg

    def _placement_group(self, spec: LaunchSpec) -> str:
        ec2 = self._client("ec2", spec.region)
        name = sg_name(spec.deployment)
        found = self._call(ec2, "describe_placement_groups", Filters=[
            {"Name": "group-name", "Values": [name]}]).get("PlacementGroups", [])
        if not found:
            body = next(c["body"] for c in self.request(spec, None)["calls"]
                        if c["call"] == "ec2.CreatePlacementGroup")
            self._call(ec2, "create_placement_group", **body)
        return name

    def _instance_profile(self, spec: LaunchSpec) -> str:
        iam = self._client("iam", spec.region)
        account = self._call(self._client("sts", spec.region), "get_caller_identity")["Account"]
        name = sg_name(spec.deployment)
        calls = {c["call"]: c["body"] for c in
                 self.request(spec, None, {"account": account})["calls"]}
        for op in ("CreateRole", "PutRolePolicy", "CreateInstanceProfile",
                   "AddRoleToInstanceProfile"):
            method = "".join("_" + ch.lower() if ch.isupper() else ch for ch in op).lstrip("_")
            try:
                getattr(iam, method)(**calls[f"iam.{op}"])
            except Exception as exc:
                err = self.classify(exc)
                code = getattr(err, "code", "")
                if code == "EntityAlreadyExists" and op != "PutRolePolicy":
                    if op == "CreateRole" and not self._ours(iam, name, spec.deployment):
                        raise CloudError("aws", code, f"an IAM role {name} exists that advisor "
                                         "did not create", "fatal",
                                         hint="choose another --name or pass "
                                         "--instance-profile") from exc
                    continue  # a second run finds its own role and profile
                if code == "LimitExceeded" and op == "AddRoleToInstanceProfile":
                    continue  # the profile holds its one role already
                raise err from exc
        return name

    @classmethod
    def _ours(cls, iam: Any, role: str, deployment: str, attempt: str | None = None) -> bool:
        try:
            tags = iam.list_role_tags(RoleName=role).get("Tags", [])
        except Exception:
            return False
        return cls._tagged(tags, deployment, attempt)

    @classmethod
    def _profile_ours(cls, iam: Any, name: str, deployment: str) -> bool:
        try:
            tags = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"].get(
                "Tags", [])
        except Exception:
            return False
        return cls._tagged(tags, deployment)

    def _image(self, spec: LaunchSpec) -> dict[str, Any]:
        key = (spec.region, spec.image)
        if key not in self._images:
            self._images[key] = self._look_up_image(spec)
        return dict(self._images[key])

    def _look_up_image(self, spec: LaunchSpec) -> dict[str, Any]:
        ec2 = self._client("ec2", spec.region)
        image_id = spec.image
        if image_id is None:
            try:
                ssm = self._client("ssm", spec.region)
                image_id = ssm.get_parameter(Name=DLAMI_PARAMETER)["Parameter"]["Value"]
            except Exception:  # not readable here (permissions, partition, endpoint)
                image_id = None
        if image_id is None:
            images = self._call(ec2, "describe_images", Owners=["amazon"], Filters=[
                {"Name": "name", "Values": DLAMI_NAMES[:1]},
                {"Name": "state", "Values": ["available"]},
                {"Name": "architecture", "Values": ["x86_64"]}])["Images"]
            if not images:
                images = self._call(ec2, "describe_images", Owners=["amazon"], Filters=[
                    {"Name": "name", "Values": DLAMI_NAMES[1:]},
                    {"Name": "state", "Values": ["available"]}])["Images"]
            if not images:
                raise CloudError("aws", "NoGpuImage", f"no NVIDIA GPU base image found in "
                                 f"{spec.region}", "region", kind="error",
                                 hint="pass --image ami-… (an image with the NVIDIA driver)")
            images.sort(key=lambda i: i.get("CreationDate", ""))
            image_id = images[-1]["ImageId"]
        found = self._call(ec2, "describe_images", ImageIds=[image_id])["Images"]
        if not found:
            raise CloudError("aws", "InvalidAMIID.NotFound", f"image {image_id} not found in "
                             f"{spec.region}", "region", kind="error")
        img = found[0]
        root = img.get("RootDeviceName") or "/dev/sda1"
        size = max((m.get("Ebs", {}).get("VolumeSize", 0)
                    for m in img.get("BlockDeviceMappings", [])
                    if m.get("DeviceName") == root), default=0)
        return {"image_id": image_id, "root_device": root, "min_disk_gib": size}

    def launch(self, spec: LaunchSpec, zone: str | None) -> InstanceRow:
        ec2 = self._client("ec2", spec.region)
        resolved = self._image(spec)
        sgs = self._call(ec2, "describe_security_groups", Filters=[
            {"Name": "group-name", "Values": [sg_name(spec.deployment)]}])["SecurityGroups"]
        if not sgs:
            raise CloudError("aws", "NoSecurityGroup", "the deployment's security group is "
                             "missing", "fatal")
        resolved["sg_id"] = sgs[0]["GroupId"]
        if spec.nodes > 1 and spec.fabric == "efa" and zone:
            subnets = self._call(ec2, "describe_subnets", Filters=[
                {"Name": "availability-zone", "Values": [zone]},
                {"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
            if not subnets:
                raise CloudError("aws", "NoDefaultSubnet", f"no default subnet in {zone} for the "
                                 "EFA interface", "zone")
            resolved["subnet_id"] = subnets[0]["SubnetId"]
        body = self.request(spec, zone, resolved)["calls"][-1]["body"]
        body["UserData"] = CLOUD.user_data_payload(spec.user_data)  # gzip bytes; boto3 base64s
        for attempt in range(8):
            try:
                r = ec2.run_instances(**body)
                break
            except Exception as exc:
                err = self.classify(exc)
                # a new instance profile takes a few seconds to be usable by EC2
                if (isinstance(err, CloudError) and err.code == "InvalidParameterValue"
                        and "instance profile" in err.detail.lower() and attempt < 7):
                    self.sleep(self.waiter_delay)
                    continue
                raise err from exc
        return self._row(r["Instances"][0], spec.region)

    def terminate(self, deployment: str, region: str) -> list[str]:
        return (self.terminate_instances(deployment, region)
                + self.remove_network(deployment, region))

    def terminate_attempt(self, deployment: str, region: str, attempt: str) -> list[str]:
        """Only what one provision attempt made (its ``advisor-attempt`` tag): a failed attempt
        never deletes a security group, role or instance another attempt made or uses."""
        return (self.terminate_instances(deployment, region, attempt)
                + self.remove_network(deployment, region, attempt))

    @staticmethod
    def _filters(deployment: str, attempt: str | None) -> list[dict[str, Any]]:
        f = [{"Name": f"tag:{TAG_DEPLOYMENT}", "Values": [deployment]}]
        if attempt:
            f.append({"Name": f"tag:{TAG_ATTEMPT}", "Values": [attempt]})
        return f

    def terminate_instances(self, deployment: str, region: str,
                            attempt: str | None = None) -> list[str]:
        ec2 = self._client("ec2", region)
        try:
            r = self._call(ec2, "describe_instances", Filters=[
                *self._filters(deployment, attempt),
                {"Name": "instance-state-name", "Values": ALIVE_STATES}])
        except CloudError as exc:
            if exc.code == "AuthFailure" and self._region_off(region):
                raise CloudError("aws", "OptInRequired", f"{region} is not enabled for this "
                                 "account: nothing runs there", "region") from exc
            raise
        ids = [i["InstanceId"] for res in r.get("Reservations", []) for i in res["Instances"]]
        if ids:
            self._call(ec2, "terminate_instances", InstanceIds=ids)
            ec2.get_waiter("instance_terminated").wait(
                InstanceIds=ids, WaiterConfig={"Delay": self.waiter_delay, "MaxAttempts": 120})
        return ids

    def _region_off(self, region: str) -> bool:
        """Whether ``region`` is an opt-in region the account has not enabled: EC2 answers
        AuthFailure there, as it does to bad credentials (EC2 ``DescribeRegions`` with
        ``AllRegions``, asked in us-east-1, tells them apart). False where it cannot tell."""
        if region == "us-east-1":
            return False
        try:
            r = self._client("ec2", "us-east-1").describe_regions(AllRegions=True,
                                                                  RegionNames=[region])
        except Exception:
            return False
        return any(x.get("OptInStatus") == "not-opted-in" for x in r.get("Regions", []))

    def remove_network(self, deployment: str, region: str,
                       attempt: str | None = None) -> list[str]:
        """The security groups, placement group, role and instance profile tagged with the
        deployment (and ``attempt``, when given) — after its instances are gone."""
        ec2 = self._client("ec2", region)
        removed: list[str] = []
        sgs = self._call(ec2, "describe_security_groups",
                         Filters=self._filters(deployment, attempt))["SecurityGroups"]
        for sg in sgs:
            for n in range(12):  # ENIs of terminated instances linger for a while
                try:
                    ec2.delete_security_group(GroupId=sg["GroupId"])
                    removed.append(sg["GroupId"])
                    break
                except Exception as exc:
                    err = self.classify(exc)
                    code = getattr(err, "code", "")
                    if code == "InvalidGroup.NotFound":
                        break  # gone meanwhile
                    if code == "DependencyViolation" and n < 11:
                        self.sleep(self.waiter_delay)
                        continue
                    raise err from exc
        if self._was_multi_node(deployment, region):
            groups = self._call(ec2, "describe_placement_groups", Filters=[
                {"Name": "group-name", "Values": [sg_name(deployment)]}]
            ).get("PlacementGroups", [])
            for g in groups:
                if self._tagged(g.get("Tags"), deployment, attempt):
                    self._call(ec2, "delete_placement_group", GroupName=g["GroupName"])
                    removed.append(f"placement-group:{g['GroupName']}")
        removed += self._remove_profile(deployment, region, attempt)
        return removed

    @staticmethod
    def _tagged(tag_list: Any, deployment: str, attempt: str | None = None) -> bool:
        t = {x.get("Key"): x.get("Value") for x in tag_list or []}
        return t.get(TAG_DEPLOYMENT) == deployment and (not attempt
                                                        or t.get(TAG_ATTEMPT) == attempt)

    def leftovers(self, deployment: str, region: str) -> list[str]:
        """What still carries the deployment's tag here: live instances, security groups, its
        IAM role and instance profile (global: named without a region)."""
        ec2 = self._client("ec2", region)
        left = [f"{region}:{i.id}" for i in self.find(deployment, region)]
        sgs = self._call(ec2, "describe_security_groups",
                         Filters=self._filters(deployment, None))["SecurityGroups"]
        left += [f"{region}:{sg['GroupId']}" for sg in sgs]
        iam = self._client("iam", region)
        name = sg_name(deployment)
        if self._ours(iam, name, deployment):
            left.append(f"iam-role:{name}")
        try:
            prof = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"].get(
                "Tags", [])
        except Exception as exc:
            if getattr(self.classify(exc), "code", "") != "NoSuchEntity":
                raise self.classify(exc) from exc
        else:
            if self._tagged(prof, deployment):
                left.append(f"instance-profile:{name}")
        return left

    def _was_multi_node(self, deployment: str, region: str) -> bool:
        """Whether the deployment ran a multi-node group here (its instances, terminated ones
        included, carry an advisor-role tag): only then is there a placement group to remove."""
        ec2 = self._client("ec2", region)
        r = self._call(ec2, "describe_instances", Filters=[
            {"Name": f"tag:{TAG_DEPLOYMENT}", "Values": [deployment]},
            {"Name": "tag-key", "Values": ["advisor-role"]}])
        return any(res.get("Instances") for res in r.get("Reservations", []))

    def catalog_facts(self, regions: list[str], doc: dict[str, Any]) -> list[Any]:
        """What the EC2 and Price List APIs state about every GPU instance type offered in
        ``regions`` (for ``advisor catalog refresh``)."""
        from advisor.clouds.aws.refresh import catalog_facts

        return catalog_facts(self, regions, doc)

    def _remove_profile(self, deployment: str, region: str,
                        attempt: str | None = None) -> list[str]:
        iam = self._client("iam", region)
        name = sg_name(deployment)
        # no such role, one that advisor did not make, or another attempt's: leave it —
        # unless an instance profile of ours is left without its role (a crash mid-down)
        if not self._ours(iam, name, deployment, attempt) and (
                attempt or not self._profile_ours(iam, name, deployment)):
            return []
        try:  # a profile made by a run that died before AddRoleToInstanceProfile holds no role
            held = [r["RoleName"] for r in iam.get_instance_profile(
                InstanceProfileName=name)["InstanceProfile"].get("Roles", [])]
        except Exception as exc:
            if getattr(self.classify(exc), "code", "") != "NoSuchEntity":
                raise self.classify(exc) from exc
            held = []
        steps: list[tuple[str, dict[str, str]]] = [
            ("remove_role_from_instance_profile", {"InstanceProfileName": name, "RoleName": r})
            for r in held if r == name]
        for call, kw in (*steps,
                         ("delete_instance_profile", {"InstanceProfileName": name}),
                         ("delete_role_policy", {"RoleName": name,
                                                 "PolicyName": "advisor-read-api-key"}),
                         ("delete_role", {"RoleName": name})):
            try:
                getattr(iam, call)(**kw)
            except Exception as exc:
                if getattr(self.classify(exc), "code", "") != "NoSuchEntity":
                    raise self.classify(exc) from exc
        return [f"iam:{name}"]
