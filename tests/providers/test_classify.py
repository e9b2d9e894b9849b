"""Failover classification, one table per cloud: every error code of the README's failover table
and of each backend's CAPACITY / QUOTA / AUTH sets -> the exact scope and kind.

The expected tables are written out here, not derived from the backends' sets, so that moving a
code from one set to another (or dropping it) fails a row. Each error is built the way the
cloud's SDK raises it:

* AWS: a real botocore client whose request is answered, before it is sent, with the service's
  own error body (EC2's XML ``<Response><Errors>``, STS's ``<ErrorResponse>``, SSM's JSON
  ``__type``); botocore parses it and raises ``ClientError`` itself;
* GCP: ``google.api_core.exceptions.from_http_response`` on a ``requests.Response`` carrying
  Compute Engine's JSON error (what the REST transport does), or a DONE compute ``Operation``
  whose ``error.errors`` name the code, resolved through ``ExtendedOperation.result()`` with the
  two property overrides compute_v1's ``_CustomOperation`` makes;
* Azure: an ARM error body on an azure-core transport response, raised through ``map_error``
  with the error map the mgmt clients use (401, 404, 409 become their subclasses) or as
  ``HttpResponseError(error_format=ARMErrorFormat)``; a failed long-running operation is the
  ``HttpResponseError`` azure-core's poller raises on a ``Failed`` status (HTTP 200).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from advisor.clouds.base import CloudError
from advisor.errors import UserInputError
from advisor.provisioning import _outcome
from tests.providers.conftest import answer, ec2_error

CAPACITY = ("zone", "capacity")
QUOTA = ("region", "quota")
DENIED = ("provider", "denied")
FATAL = ("fatal", "error")


# -- AWS --------------------------------------------------------------------------------------
def _sts_error(code: str, message: str) -> bytes:
    """STS/IAM (Query protocol) error body."""
    return (f'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
            f"<Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            "<RequestId>4f1c2a0e-advisor-test</RequestId></ErrorResponse>").encode()


def _json_error(code: str, message: str) -> bytes:
    """SSM (JSON protocol) error body."""
    return json.dumps({"__type": code, "message": message}).encode()


#: (service, HTTP status, code as the service sends it) -> (scope, kind, code advisor reports)
AWS: list[tuple[str, int, str, tuple[str, str], str]] = [
    # README: no capacity -> next zone
    ("ec2", 500, "InsufficientInstanceCapacity", CAPACITY, "InsufficientInstanceCapacity"),
    ("ec2", 500, "InsufficientCapacity", CAPACITY, "InsufficientCapacity"),
    ("ec2", 500, "InsufficientHostCapacity", CAPACITY, "InsufficientHostCapacity"),
    ("ec2", 500, "InsufficientCapacityOnHost", CAPACITY, "InsufficientCapacityOnHost"),
    ("ec2", 500, "InsufficientReservedInstanceCapacity", CAPACITY,
     "InsufficientReservedInstanceCapacity"),
    ("ec2", 400, "Unsupported", CAPACITY, "Unsupported"),
    ("ec2", 400, "SpotMaxPriceTooLow", CAPACITY, "SpotMaxPriceTooLow"),
    # a state-reason style code: the Server./Client. prefix is dropped
    ("ec2", 500, "Server.InsufficientInstanceCapacity", CAPACITY, "InsufficientInstanceCapacity"),
    # README: quota -> skip the region
    ("ec2", 400, "VcpuLimitExceeded", QUOTA, "VcpuLimitExceeded"),
    ("ec2", 400, "InstanceLimitExceeded", QUOTA, "InstanceLimitExceeded"),
    ("ec2", 400, "MaxSpotInstanceCountExceeded", QUOTA, "MaxSpotInstanceCountExceeded"),
    ("ec2", 400, "OptInRequired", QUOTA, "OptInRequired"),
    ("ec2", 400, "PendingVerification", QUOTA, "PendingVerification"),
    # README: credentials or permissions -> skip the provider
    ("ec2", 401, "AuthFailure", DENIED, "AuthFailure"),
    ("ec2", 403, "UnauthorizedOperation", DENIED, "UnauthorizedOperation"),
    ("ec2", 400, "Client.UnauthorizedOperation", DENIED, "UnauthorizedOperation"),
    ("sts", 403, "InvalidClientTokenId", DENIED, "InvalidClientTokenId"),
    ("sts", 403, "SignatureDoesNotMatch", DENIED, "SignatureDoesNotMatch"),
    ("sts", 400, "ExpiredToken", DENIED, "ExpiredToken"),
    ("sts", 403, "AccessDenied", DENIED, "AccessDenied"),
    ("ssm", 400, "AccessDeniedException", DENIED, "AccessDeniedException"),
    ("ssm", 400, "UnrecognizedClientException", DENIED, "UnrecognizedClientException"),
    # README: anything else -> stop
    ("ec2", 400, "InvalidParameterCombination", FATAL, "InvalidParameterCombination"),
    ("ec2", 400, "InvalidAMIID.NotFound", FATAL, "InvalidAMIID.NotFound"),
    ("ec2", 500, "InternalError", FATAL, "InternalError"),
]


_CLIENTS: dict[str, Any] = {}


def _aws_client(service: str) -> Any:
    if service not in _CLIENTS:
        import botocore.session
        from botocore.config import Config

        _CLIENTS[service] = botocore.session.get_session().create_client(
            service, region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b",
            config=Config(retries={"total_max_attempts": 1}))
    return _CLIENTS[service]


def _aws_raise(service: str, status: int, code: str) -> BaseException:
    client = _aws_client(service)
    message = f"advisor test: {code}"
    if service == "ec2":
        event, body, ctype = "RunInstances", ec2_error(code, message, status), "text/xml"
        call: Any = lambda: client.run_instances(ImageId="ami-1", MinCount=1, MaxCount=1)  # noqa: E731
    elif service == "sts":
        event, body, ctype = "GetCallerIdentity", _sts_error(code, message), "text/xml"
        call = client.get_caller_identity
    else:
        event, body, ctype = ("GetParameter", _json_error(code, message),
                              "application/x-amz-json-1.1")
        call = lambda: client.get_parameter(Name="/advisor/key")  # noqa: E731
    hook = f"before-send.{service}.{event}"
    client.meta.events.register_first(hook, answer(status, body, ctype), unique_id="advisor")
    try:
        with pytest.raises(Exception) as caught:
            call()
    finally:
        client.meta.events.unregister(hook, unique_id="advisor")
    return caught.value


@pytest.fixture(scope="module")
def aws_provider():
    pytest.importorskip("botocore")
    from advisor.clouds.aws.compute import AwsProvider

    return AwsProvider()


@pytest.mark.parametrize("service,status,code,expected,reported", AWS,
                         ids=[f"{r[0]}-{r[2]}" for r in AWS])
def test_aws_classification(aws_provider, service, status, code, expected, reported):
    from botocore.exceptions import ClientError

    exc = _aws_raise(service, status, code)
    assert isinstance(exc, ClientError)
    err = aws_provider.classify(exc)
    assert isinstance(err, CloudError)
    assert (err.scope, err.kind, err.code, err.provider) == (*expected, reported, "aws")
    assert err.detail == f"advisor test: {code}"


def test_aws_errors_without_a_response(aws_provider):
    from botocore.exceptions import (
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    none = aws_provider.classify(NoCredentialsError())
    assert (none.scope, none.kind, none.code) == ("provider", "denied", "NoCredentials")
    # an unreachable regional endpoint: the region is skipped, and it is not a refusal
    unreachable = aws_provider.classify(
        EndpointConnectionError(endpoint_url="https://ec2.xx-east-9.amazonaws.com"))
    assert (unreachable.scope, unreachable.kind, unreachable.code) == (
        "region", "error", "EndpointConnectionError")
    partial = aws_provider.classify(PartialCredentialsError(provider="env",
                                                            cred_var="AWS_SECRET_ACCESS_KEY"))
    assert (partial.scope, partial.kind, partial.code) == (
        "provider", "denied", "PartialCredentialsError")
    other = ValueError("not from botocore")
    assert aws_provider.classify(other) is other


# -- GCP --------------------------------------------------------------------------------------
def _gcp_http(status: int, message: str, reasons: list[str], method: str = "POST",
              url: str = "https://compute.googleapis.com/compute/v1/projects/p/zones/"
              "us-central1-a/instances") -> BaseException:
    from google.api_core import exceptions as gexc

    r = requests.Response()
    r.status_code = status
    r._content = json.dumps({"error": {"code": status, "message": message, "errors": [
        {"message": message, "domain": "global", "reason": reason} for reason in reasons]}}
    ).encode()
    r.request = requests.Request(method, url).prepare()
    return gexc.from_http_response(r)


def _gcp_operation_old(status: int, message: str, codes: list[str]) -> BaseException:
    """What api-core releases before the ``errors=`` argument raised for a failed operation:
    the codes only on the response (the Operation)."""
    from google.api_core import exceptions as gexc
    from google.cloud import compute_v1

    op = compute_v1.Operation(
        name="operation-1", status=compute_v1.Operation.Status.DONE,
        http_error_status_code=status, http_error_message="ERROR",
        error=compute_v1.Error(errors=[compute_v1.Errors(code=c, message=message)
                                       for c in codes]))
    return gexc.from_http_status(status, message, response=op)


def _gcp_operation(status: int, message: str, codes: list[str]) -> BaseException:
    from google.api_core import extended_operation
    from google.cloud import compute_v1

    class CustomOperation(extended_operation.ExtendedOperation):  # as compute_v1 defines it
        @property
        def error_message(self) -> Any:
            return self._extended_operation.http_error_message

        @property
        def error_code(self) -> Any:
            return self._extended_operation.http_error_status_code

    op = compute_v1.Operation(
        name="operation-1", status=compute_v1.Operation.Status.DONE,
        http_error_status_code=status, http_error_message={503: "SERVICE UNAVAILABLE",
                                                           403: "FORBIDDEN"}.get(status, "ERROR"),
        error=compute_v1.Error(errors=[compute_v1.Errors(code=c, message=message)
                                       for c in codes]))
    future = CustomOperation.make(lambda **_: op, lambda **_: None, op)
    with pytest.raises(Exception) as caught:
        future.result(timeout=5)
    return caught.value


EXHAUSTED_MSG = ("The zone 'projects/p/zones/us-central1-a' does not have enough resources "
                 "available to fulfill the request.  Try a different zone, or try again later.")
QUOTA_MSG = "Quota 'NVIDIA_L4_GPUS' exceeded.  Limit: 0.0 in region us-central1."

#: (shape, HTTP status, codes or reasons, message) -> (scope, kind, code advisor reports)
GCP: list[tuple[str, int, list[str], str, tuple[str, str], str]] = [
    # README: no capacity -> next zone (Compute Engine reports it in the DONE operation)
    ("op", 503, ["ZONE_RESOURCE_POOL_EXHAUSTED"], EXHAUSTED_MSG, CAPACITY,
     "ZONE_RESOURCE_POOL_EXHAUSTED"),
    ("op", 503, ["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"], "no A3 in this zone", CAPACITY,
     "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
    ("op", 503, ["RESOURCE_POOL_EXHAUSTED"], "no GPUs", CAPACITY, "RESOURCE_POOL_EXHAUSTED"),
    ("op", 503, ["STOCKOUT"], "stockout", CAPACITY, "STOCKOUT"),
    ("op", 400, ["RESOURCE_NOT_FOUND_IN_ZONE"], "not in this zone", CAPACITY,
     "RESOURCE_NOT_FOUND_IN_ZONE"),
    # the message alone says it, without a capacity code
    ("http", 503, [], EXHAUSTED_MSG, CAPACITY, "ServiceUnavailable"),
    # README: quota -> skip the region, also when it comes as a 403
    ("op", 403, ["QUOTA_EXCEEDED"], QUOTA_MSG, QUOTA, "QUOTA_EXCEEDED"),
    ("http", 403, ["quotaExceeded"], "Quota exceeded for quota metric 'CPUS'", QUOTA,
     "QUOTAEXCEEDED"),
    ("op", 403, ["QUOTA_LIMIT_EXCEEDED"], "limit", QUOTA, "QUOTA_LIMIT_EXCEEDED"),
    ("op", 403, ["REGION_QUOTA_EXCEEDED"], "regional limit", QUOTA, "REGION_QUOTA_EXCEEDED"),
    ("http", 403, ["forbidden"], QUOTA_MSG, QUOTA, "forbidden"),
    # README: credentials or permissions -> skip the provider: a 403 (or 401) that is no quota
    ("http", 403, ["forbidden"], "Required 'compute.instances.create' permission for "
     "'projects/p/zones/us-central1-a/instances/x'", DENIED, "forbidden"),
    ("http", 401, ["authError"], "Request had invalid authentication credentials.", DENIED,
     "authError"),
    # a machine type missing from one zone: the next zone may have it
    ("http", 404, ["notFound"], "The resource 'projects/p/zones/us-central1-a/machineTypes/"
     "a3-highgpu-8g' was not found", CAPACITY, "notFound"),
    # README: anything else -> stop
    ("http", 404, ["notFound"], "The resource 'projects/ubuntu-os-accelerator-images/global/"
     "images/family/x' was not found", FATAL, "notFound"),
    ("http", 400, ["invalid"], "Invalid value for field 'resource.disks[0]'", FATAL, "invalid"),
    ("op", 400, ["UNSUPPORTED_OPERATION"], "unsupported", FATAL, "UNSUPPORTED_OPERATION"),
    # the operation's codes read from the response alone (older api-core)
    ("op-old", 503, ["ZONE_RESOURCE_POOL_EXHAUSTED"], "no resources", CAPACITY,
     "ZONE_RESOURCE_POOL_EXHAUSTED"),
    ("op-old", 403, ["QUOTA_EXCEEDED"], "over", QUOTA, "QUOTA_EXCEEDED"),
    ("op-old", 400, ["INVALID_FIELD"], "invalid", FATAL, "INVALID_FIELD"),
]


@pytest.fixture(scope="module")
def gcp_provider():
    pytest.importorskip("google.cloud.compute_v1")
    from advisor.clouds.gcp.compute import GcpProvider

    return GcpProvider(project="p")


@pytest.mark.parametrize("shape,status,codes,message,expected,reported", GCP,
                         ids=[f"{r[0]}-{r[1]}-{'+'.join(r[2]) or 'msg'}-{i}"
                              for i, r in enumerate(GCP)])
def test_gcp_classification(gcp_provider, shape, status, codes, message, expected, reported):
    make = {"op": _gcp_operation, "op-old": _gcp_operation_old, "http": _gcp_http}[shape]
    exc = make(status, message, codes)
    assert getattr(exc, "code", None) == status
    err = gcp_provider.classify(exc)
    assert isinstance(err, CloudError)
    assert (err.scope, err.kind, err.code, err.provider) == (*expected, reported, "gcp")
    # the detail is the SDK's message: for HTTP errors the call and Compute Engine's message,
    # for a failed operation only its httpErrorMessage ("SERVICE UNAVAILABLE")
    assert err.detail == " ".join(exc.message.split())  # type: ignore[attr-defined]
    if shape == "http":
        assert err.detail.endswith(" ".join(message.split()))


def test_gcp_not_found_is_read_off_the_code_never_off_a_404_in_the_message(gcp_provider):
    """A down deletes what is left and takes "not found" as already gone: a bare "404" in the
    message (a local endpoint's port, a deployment called llama-404) must not turn a failed
    delete into "gone" (it did, and a console read on a fake served at 127.0.0.1:404xx
    returned None instead of raising: a flaky CI run on 2026-12-07)."""
    from advisor.clouds.gcp.resources import _not_found

    zone = "https://compute.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances"
    failed = [
        _gcp_http(500, "backend error", ["backendError"], "DELETE",
                  "http://127.0.0.1:40455/compute/v1/projects/p/zones/us-central1-a/instances/pf"),
        _gcp_http(503, "The service is currently unavailable.", ["backendError"], "DELETE",
                  f"{zone}/advisor-llama-404-x1"),
        _gcp_http(400, "The instance 'advisor-llama-404-x1' is in use", ["resourceInUse"],
                  "DELETE", f"{zone}/advisor-llama-404-x1"),
    ]
    for exc in failed:
        err = gcp_provider.classify(exc)
        assert "404" in err.detail and not _not_found(err), err
    gone = _gcp_http(404, "The resource 'projects/p/zones/us-central1-a/instances/pf' was not "
                     "found", ["notFound"], "DELETE", f"{zone}/pf")
    assert _not_found(gcp_provider.classify(gone))
    # the REST clients' codes (IAM, Secret Manager: the status, else HTTP<n>) and the SDK's
    # class name where no reason came back
    for code in ("NOT_FOUND", "HTTP404", "NotFound", "notFound", "404"):
        assert _not_found(CloudError("gcp", code, "x", "fatal")), code
    for code in ("INTERNAL", "HTTP500", "backendError", "PERMISSION_DENIED"):
        assert not _not_found(CloudError("gcp", code, "GET http://127.0.0.1:40404/x: 404",
                                         "fatal")), code


def test_gcp_errors_without_a_response(gcp_provider):
    import google.auth.exceptions as aexc

    for exc, code in ((aexc.DefaultCredentialsError("no credentials found"),
                       "DefaultCredentialsError"),
                      (aexc.RefreshError("token expired"), "RefreshError")):
        err = gcp_provider.classify(exc)
        assert (err.scope, err.kind, err.code) == ("provider", "denied", code)
    mine = CloudError("gcp", "x", "already classified", "zone")
    assert gcp_provider.classify(mine) is mine
    wrong = UserInputError("bad input")
    assert gcp_provider.classify(wrong) is wrong
    other = ValueError("not from google")
    assert gcp_provider.classify(other) is other


# -- Azure ------------------------------------------------------------------------------------
def _azure_response(status: int, body: dict[str, Any]) -> Any:
    from azure.core.pipeline.transport import HttpRequest, RequestsTransportResponse

    r = requests.Response()
    r.status_code = status
    r._content = json.dumps(body).encode()
    r.headers["Content-Type"] = "application/json"
    req = HttpRequest("PUT", "https://management.azure.com/subscriptions/s/resourceGroups/g/"
                      "providers/Microsoft.Compute/virtualMachines/v?api-version=2024-07-01")
    return RequestsTransportResponse(req, r)


def _arm_body(code: str, message: str, details: list[str]) -> dict[str, Any]:
    return {"error": {"code": code, "message": message,
                      "details": [{"code": d, "message": f"{d} (detail)"} for d in details]}}


def _azure_http(status: int, code: str, message: str, details: list[str]) -> BaseException:
    """What a mgmt client raises for a non-2xx answer: map_error with its error map, else
    HttpResponseError with the ARM error format."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ResourceExistsError,
        ResourceNotFoundError,
        ResourceNotModifiedError,
        map_error,
    )
    from azure.mgmt.core.exceptions import ARMErrorFormat

    response = _azure_response(status, _arm_body(code, message, details))
    error_map = {401: ClientAuthenticationError, 404: ResourceNotFoundError,
                 409: ResourceExistsError, 304: ResourceNotModifiedError}
    try:
        map_error(status_code=status, response=response, error_map=error_map)
    except HttpResponseError as exc:
        return exc
    return HttpResponseError(response=response, error_format=ARMErrorFormat)


def _azure_poll_status(status: int, code: str, message: str, details: list[str]
                       ) -> BaseException:
    """What azure-core's poller raises when a poll itself is answered with an error status
    (BadStatus): an HttpResponseError with that status, not mapped to a subclass."""
    from azure.core.exceptions import HttpResponseError
    from azure.core.polling.base_polling import BadStatus

    return HttpResponseError(response=_azure_response(status, _arm_body(code, message, details)),
                             error=BadStatus("Invalid return status"))


def _azure_lro(code: str, message: str, details: list[str]) -> BaseException:
    """What azure-core's poller raises when the operation ends Failed (the poll answered 200)."""
    from azure.core.exceptions import HttpResponseError
    from azure.core.polling.base_polling import OperationFailed

    body = {"status": "Failed", **_arm_body(code, message, details)}
    return HttpResponseError(response=_azure_response(200, body),
                             error=OperationFailed("Operation failed or canceled"))


QUOTA_OP_MSG = ("Operation could not be completed as it results in exceeding approved "
                "standardNCADSH100v5Family Cores quota. Location: eastus, Current Limit: 0, "
                "Current Usage: 0, Additional Required: 40")

#: (shape, HTTP status, code, detail codes, message) -> (scope, kind, code advisor reports)
AZURE: list[tuple[str, int, str, list[str], str, tuple[str, str], str]] = [
    # README: no capacity -> next zone
    ("lro", 200, "ZonalAllocationFailed", [], "Allocation failed.", CAPACITY,
     "ZonalAllocationFailed"),
    ("http", 409, "SkuNotAvailable", [], "The requested VM size is not available in location "
     "'eastus' zones '1'.", CAPACITY, "SkuNotAvailable"),
    ("lro", 200, "AllocationFailed", [], "Allocation failed.", CAPACITY, "AllocationFailed"),
    ("lro", 200, "OverconstrainedAllocationRequest", [], "overconstrained", CAPACITY,
     "OverconstrainedAllocationRequest"),
    ("lro", 200, "OverconstrainedZonalAllocationRequest", [], "overconstrained", CAPACITY,
     "OverconstrainedZonalAllocationRequest"),
    ("lro", 200, "AllocationFailedVMSeriesNotAvailable", [], "series", CAPACITY,
     "AllocationFailedVMSeriesNotAvailable"),
    ("lro", 200, "SpotVMAllocationFailed", [], "spot", CAPACITY, "SpotVMAllocationFailed"),
    # a capacity code among the details of a wrapper error
    ("http", 400, "DeploymentFailed", ["SkuNotAvailable"], "At least one resource deployment "
     "operation failed.", CAPACITY, "SkuNotAvailable"),
    # README: quota -> skip the region
    ("http", 409, "QuotaExceeded", [], "quota", QUOTA, "QuotaExceeded"),
    ("http", 409, "OperationNotAllowed", [], QUOTA_OP_MSG, QUOTA, "OperationNotAllowed"),
    ("http", 409, "SpotQuotaExceeded", [], "spot quota", QUOTA, "SpotQuotaExceeded"),
    ("http", 409, "ResourceQuotaExceeded", [], "resource quota", QUOTA,
     "ResourceQuotaExceeded"),
    ("http", 409, "InsufficientQuota", [], "insufficient quota", QUOTA, "InsufficientQuota"),
    # OperationNotAllowed that is no quota: a malformed request, stop
    ("http", 409, "OperationNotAllowed", [], "Operation 'start' is not allowed since the VM is "
     "deallocating.", FATAL, "OperationNotAllowed"),
    # README: credentials or permissions -> skip the provider
    ("http", 403, "AuthorizationFailed", [], "The client does not have authorization to perform "
     "action 'Microsoft.Compute/virtualMachines/write'", DENIED, "AuthorizationFailed"),
    ("http", 403, "LinkedAuthorizationFailed", [], "linked", DENIED,
     "LinkedAuthorizationFailed"),
    # a 401 becomes ClientAuthenticationError in the SDK: reported under one code
    ("http", 401, "InvalidAuthenticationToken", [], "The access token is invalid.", DENIED,
     "AuthenticationFailed"),
    ("http", 401, "InvalidAuthenticationTokenTenant", [], "wrong tenant", DENIED,
     "AuthenticationFailed"),
    ("http", 401, "AuthenticationFailed", [], "authentication failed", DENIED,
     "AuthenticationFailed"),
    ("http", 404, "SubscriptionNotFound", [], "The subscription 's' could not be found.",
     DENIED, "SubscriptionNotFound"),
    # a 401 / 403 is a refusal whatever its code: a poll answered 401 (token expired meanwhile),
    # a policy that forbids the request
    ("poll", 401, "ExpiredAuthenticationToken", [], "The access token expiry UTC time is "
     "earlier than current UTC time.", DENIED, "ExpiredAuthenticationToken"),
    ("http", 403, "RequestDisallowedByPolicy", [], "Resource 'v' was disallowed by policy.",
     DENIED, "RequestDisallowedByPolicy"),
    # the permission codes decide by themselves too (inside a failed operation: HTTP 200)
    ("lro", 200, "AuthorizationFailed", [], "no authorization", DENIED, "AuthorizationFailed"),
    ("lro", 200, "LinkedAuthorizationFailed", [], "linked", DENIED,
     "LinkedAuthorizationFailed"),
    ("lro", 200, "InvalidAuthenticationToken", [], "token", DENIED,
     "InvalidAuthenticationToken"),
    ("lro", 200, "InvalidAuthenticationTokenTenant", [], "tenant", DENIED,
     "InvalidAuthenticationTokenTenant"),
    ("lro", 200, "AuthenticationFailed", [], "authentication", DENIED, "AuthenticationFailed"),
    ("lro", 200, "SubscriptionNotFound", [], "subscription", DENIED, "SubscriptionNotFound"),
    # README: anything else -> stop
    ("http", 400, "InvalidParameter", [], "The value of parameter imageReference is invalid.",
     FATAL, "InvalidParameter"),
    ("lro", 200, "VMExtensionProvisioningError", [], "extension", FATAL,
     "VMExtensionProvisioningError"),
]


@pytest.fixture(scope="module")
def azure_provider():
    pytest.importorskip("azure.mgmt.compute")
    from advisor.clouds.azure.compute import AzureProvider

    return AzureProvider(subscription_id="s")


@pytest.mark.parametrize("shape,status,code,details,message,expected,reported", AZURE,
                         ids=[f"{r[0]}-{r[1]}-{r[2]}-{i}" for i, r in enumerate(AZURE)])
def test_azure_classification(azure_provider, shape, status, code, details, message, expected,
                              reported):
    if shape == "lro":
        exc = _azure_lro(code, message, details)
    elif shape == "poll":
        exc = _azure_poll_status(status, code, message, details)
    else:
        exc = _azure_http(status, code, message, details)
    assert exc.status_code == status  # type: ignore[attr-defined]
    err = azure_provider.classify(exc)
    assert isinstance(err, CloudError)
    assert (err.scope, err.kind, err.code, err.provider) == (*expected, reported, "azure")
    # the detail is ARM's message (for a 401 the SDK's exception text, which quotes it)
    if status == 401 and shape == "http":
        assert message in err.detail
    else:
        assert err.detail == " ".join(message.split())


def test_azure_errors_without_a_response(azure_provider):
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import CredentialUnavailableError

    login = azure_provider.classify(ClientAuthenticationError("az login needed"))
    assert (login.scope, login.kind, login.code) == ("provider", "denied", "AuthenticationFailed")
    # azure-identity's "no credential found" is a ClientAuthenticationError: the same answer
    # (the backend's separate NoCredentials branch is never reached)
    none = azure_provider.classify(CredentialUnavailableError("no credential"))
    assert (none.scope, none.kind, none.code) == ("provider", "denied", "AuthenticationFailed")
    mine = CloudError("azure", "x", "already classified", "region")
    assert azure_provider.classify(mine) is mine
    other = ValueError("not from azure")
    assert azure_provider.classify(other) is other


# -- what the orchestrator records for each kind ------------------------------------------------
@pytest.mark.parametrize("scope,kind,outcome", [
    ("zone", "capacity", "capacity"), ("region", "quota", "quota"),
    ("provider", "denied", "denied"), ("fatal", "error", "error"),
    ("region", "error", "error")])
def test_scope_gives_kind_and_attempt_outcome(scope, kind, outcome):
    err = CloudError("aws", "Code", "message", scope)  # type: ignore[arg-type]
    if (scope, kind) == ("region", "error"):
        err = CloudError("aws", "Code", "message", scope, kind="error")  # type: ignore[arg-type]
    assert err.kind == kind
    assert _outcome(err) == outcome
