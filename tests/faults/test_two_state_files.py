"""Two launchers that share no state file (a laptop and CI) provision one name at once: the
cloud-side idempotency token is all that stands between them and two instances (issue 33).

moto ignores EC2's ClientToken, so the launchers talk to it through ``token_proxy``, which
honours the token as AWS documents it (same token, same parameters: the first result again;
other parameters: IdempotentParameterMismatch). Real ``advisor provision`` processes, each with
its own ADVISOR_HOME, started together; the proxy holds each RunInstances a moment so that the
second arrives while the first is in flight.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.providers.test_aws import TOKEN, by_tag, cli, ec2
from tests.providers.token_proxy import token_proxy

pytestmark = pytest.mark.slow

ROUNDS = 3


def _run(env: dict[str, str], name: str, into: list[subprocess.CompletedProcess[str]],
         barrier: threading.Barrier) -> None:
    barrier.wait()
    into.append(cli(env, "provision", "--model", "llama-3-8b", *TOKEN, "--ctx", "8192",
                    "--instance", "aws:g6e.2xlarge", "--name", name, "--yes", "--json"))


def test_two_state_files_launch_one_instance_through_a_token_honouring_cloud(
        aws: dict[str, str], moto_url: str, tmp_path: Path) -> None:
    import boto3

    client = ec2()
    losers = found = 0
    with token_proxy(moto_url) as (proxy, log):
        for rnd in range(ROUNDS):
            name = f"two-homes-{rnd}"
            results: list[subprocess.CompletedProcess[str]] = []
            barrier = threading.Barrier(2)
            envs = [{**aws, "AWS_ENDPOINT_URL": proxy,
                     "ADVISOR_HOME": str(tmp_path / f"home-{rnd}-{who}")} for who in "ab"]
            threads = [threading.Thread(target=_run, args=(e, name, results, barrier))
                       for e in envs]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join(240)
            assert len(results) == 2 and time.monotonic() - t0 < 240
            ids = set()
            for r in results:
                assert "Traceback" not in r.stderr, r.stderr
                if r.returncode == 0:
                    res = json.loads(r.stdout)
                    ids.update(i["id"] for i in res["instances"])
                    found += res["status"] == "exists"  # started after the other finished
                else:
                    # the loser: AWS refused its security group (the other launcher made it
                    # between this one's look and create) or its token (same token, other
                    # attempt tags): one line, exit 1 (a cloud refusal), naming the commands
                    # that find and remove the instance that does run
                    assert r.returncode == 1, r.stderr
                    [line] = r.stderr.strip().splitlines()
                    assert re.search(r"(IdempotentParameterMismatch|InvalidGroup\.Duplicate)",
                                     line), line
                    assert f"advisor status {name} --reconcile" in line, line
                    assert f"advisor down {name}" in line, line
                    losers += 1
            # one instance by tag, and every launcher that succeeded names that one
            [inst] = by_tag(client, name)
            assert ids == {inst["InstanceId"]}, (ids, results)
            # the loser's cleanup left what the running instance uses
            groups = [g["GroupId"] for g in inst["SecurityGroups"]]
            assert client.describe_security_groups(GroupIds=groups)["SecurityGroups"]
            iam = boto3.client("iam", region_name="us-east-1")
            profile = inst["IamInstanceProfile"]["Arn"].rsplit("/", 1)[1]
            assert iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]
    # the proxy saw every launch carry a token, and each round's second call was not forwarded
    assert log.no_token == 0
    assert len(set(log.forwarded)) == len(log.forwarded) == ROUNDS, log
    # every round's second launcher lost at the group or the token, got the first one's
    # instance back for its token, or (started late) found it running
    assert losers + len(log.replayed) + found == ROUNDS, (losers, found, log)


def test_the_proxy_makes_moto_honour_the_token(aws: dict[str, str], moto_url: str) -> None:
    """The fake itself: same token and parameters give the same instance and launch nothing;
    other parameters are refused; without the proxy moto launches twice (why it is needed)."""
    import boto3
    from botocore.exceptions import ClientError

    ami = ec2().describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    kw = {"ImageId": ami, "InstanceType": "t3.micro", "MinCount": 1, "MaxCount": 1,
          "ClientToken": "tok-1"}
    direct = ec2()
    a = direct.run_instances(**kw)["Instances"][0]["InstanceId"]
    b = direct.run_instances(**kw)["Instances"][0]["InstanceId"]
    assert a != b  # moto alone ignores the token
    with token_proxy(moto_url) as (proxy, log):
        via = boto3.client("ec2", region_name="us-east-1", endpoint_url=proxy)
        kw["ClientToken"] = "tok-2"
        c = via.run_instances(**kw)["Instances"][0]["InstanceId"]
        d = via.run_instances(**kw)["Instances"][0]["InstanceId"]
        assert c == d and log.forwarded == ["tok-2"] and log.replayed == ["tok-2"]
        with pytest.raises(ClientError) as exc:
            via.run_instances(**{**kw, "InstanceType": "t3.small"})
        assert exc.value.response["Error"]["Code"] == "IdempotentParameterMismatch"
