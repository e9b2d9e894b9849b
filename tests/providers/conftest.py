"""A moto server on 127.0.0.1 for the AWS tests, and helpers to inject real AWS error bodies."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("boto3")
pytest.importorskip("moto")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing in these tests may reach a real cloud: any connection off 127.0.0.0/8 fails."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (host.startswith("127.") or host in ("::1",
                                                                              "localhost")):
            raise ConnectionRefusedError(f"test guard: no connection to {host}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


def _default_amis() -> str:
    """moto's own default AMIs (the Amazon-owned images the provision's DLAMI look-up finds:
    "Deep Learning AMI Ubuntu Linux - 2.4_Oct2017") as a file for MOTO_AMIS_PATH. With it,
    moto loads only these into each region it initializes, not also that region's "latest" and
    1,284 ECS-optimized AMIs, each with a volume and a snapshot: in the AWS fault sweep, which
    resets moto at every crash point, those loads had been the moto server's largest cost
    (about 26 of its CPU seconds in one chunk of crash points, by yappi). No test uses them."""
    import gzip
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("moto")
    assert spec is not None and spec.origin is not None
    res = Path(spec.origin).parent / "ec2" / "resources"
    # one file per moto release, reused by later runs; written whole, then renamed, so that
    # parallel workers never read half of it
    version = importlib.metadata.version("moto")
    out = Path(tempfile.gettempdir()) / f"advisor-moto-amis-{version}.json"
    if not out.exists():
        gz = res / "amis.json.gz"
        data = gzip.decompress(gz.read_bytes()) if gz.exists() else (res / "amis.json").read_bytes()
        tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(out)
    return str(out)


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto's server on a free port of 127.0.0.1, stopped (killed if it hangs: a SIGKILLed
    client may hold it busy) when the block ends."""
    port = _free_port()
    env = {**os.environ, "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true",
           "MOTO_AMIS_PATH": _default_amis()}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("moto server did not start")
            time.sleep(0.2)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def aws(moto_url: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A fresh moto account and an environment that points every AWS client at it."""
    req = urllib.request.Request(moto_url + "/moto-api/reset", method="POST")
    urllib.request.urlopen(req, timeout=10).close()
    env = {"AWS_ENDPOINT_URL": moto_url, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true",
           "ADVISOR_HOME": str(tmp_path / "home")}
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE",
              "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    ready_account()
    return env


#: the SSM parameters a provision reads by default (the API key) and in these tests (the token)
SECRETS = ("/advisor/vllm-api-key", "/advisor/hf-token")
REGIONS = ("us-east-1", "us-west-2")


def ready_account(regions: tuple[str, ...] = REGIONS) -> None:
    """What a real account has and a fresh moto one lacks, so that provision's preflight passes:
    the secrets (SecureString parameters) and, in the default VPC, an internet gateway that the
    main route table sends 0.0.0.0/0 to (moto's default VPC has only the local route)."""
    import boto3

    for region in regions:
        ssm = boto3.client("ssm", region_name=region)
        for name in SECRETS:
            ssm.put_parameter(Name=name, Value="test-only", Type="SecureString", Overwrite=True)
        ec2 = boto3.client("ec2", region_name=region)
        vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
        igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc["VpcId"])
        main = ec2.describe_route_tables(Filters=[
            {"Name": "vpc-id", "Values": [vpc["VpcId"]]},
            {"Name": "association.main", "Values": ["true"]}])["RouteTables"][0]
        ec2.create_route(RouteTableId=main["RouteTableId"], DestinationCidrBlock="0.0.0.0/0",
                         GatewayId=igw)


class _Raw(io.BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.getvalue()


def ec2_error(code: str, message: str, status: int) -> bytes:
    """The XML body EC2 answers an error with (its Query protocol)."""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}'
            f"</Code><Message>{message}</Message></Error></Errors>"
            "<RequestID>7f1c2a0e-advisor-test</RequestID></Response>").encode()


def answer(status: int, body: bytes, content_type: str = "text/xml") -> Callable[..., Any]:
    """A before-send handler's reply: what the service would have sent back."""
    from botocore.awsrequest import AWSResponse

    def make(request: Any, **_: Any) -> Any:
        return AWSResponse(request.url, status, {"Content-Type": content_type}, _Raw(body))

    return make
