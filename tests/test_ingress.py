"""What a deployment opens to the outside, per cloud: nothing without --allow-cidr / --ssh-cidr,
exactly the given ranges and ports with them, IPv6 ranges included.

GCP and Azure do not take IPv4 and IPv6 ranges in one rule ("A firewall rule can contain either
IPv4 or IPv6 ranges, but not both", cloud.google.com/firewall/docs/using-firewalls; Azure answers
ResourceCannotContainAddressPrefixesFromDifferentAddressFamilies): a mixed --allow-cidr becomes
one rule per address family there. AWS keeps both families in one permission (IpRanges and
Ipv6Ranges).
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.clouds.aws.compute import ingress
from advisor.clouds.azure.compute import AzureProvider
from advisor.clouds.base import LaunchSpec
from advisor.clouds.gcp.compute import firewall_bodies
from advisor.provisioning import Question, provision
from tests.small_catalog import small_catalog

#: these boxes (4 vCPUs for an L40S, one L4) are below vLLM's CPU floor or the default TPOT
#: target; the tests are about ports, so they ask for them explicitly
SMALL = Question(batch=True, allow_small_host=True)

V4, V6, SSH6 = "203.0.113.0/24", "2001:db8::/32", "2001:db8:1::/48"


def spec(**kw: Any) -> LaunchSpec:
    base: dict[str, Any] = dict(
        deployment="web", provider="aws", instance_type="g6e.xlarge", region="us-east-1",
        gpu_model="L40S", gpu_count=1, vcpus=4, user_data="#cloud-config\n", disk_gib=100,
        ports=[8000], api_key_ref="aws-ssm:/advisor/key")
    return LaunchSpec(**{**base, **kw})


def nsg_rules(s: LaunchSpec) -> list[dict[str, Any]]:
    body = AzureProvider(subscription_id="s").bodies(s, None, "ssh-rsa AAAA test")
    return list(body["networkSecurityGroup"]["properties"]["securityRules"])


def gcp_rule(name: str, ranges: list[str], ports: str) -> dict[str, Any]:
    return {"name": name, "description": "advisor deployment web",
            "network": "global/networks/default", "direction": "INGRESS", "priority": 1000,
            "sourceRanges": ranges, "targetTags": ["advisor-web"],
            "allowed": [{"IPProtocol": "tcp", "ports": [ports]}]}


def nsg_rule(name: str, priority: int, ranges: list[str], ports: str) -> dict[str, Any]:
    return {"name": name, "properties": {
        "priority": priority, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
        "sourceAddressPrefixes": ranges, "sourcePortRange": "*", "destinationAddressPrefix": "*",
        "destinationPortRange": ports}}


def test_nothing_is_opened_by_default():
    s = spec()
    assert ingress(s) == []
    assert firewall_bodies(s) == []
    assert nsg_rules(s) == []


def test_an_ipv6_range_alone():
    s = spec(allow_cidrs=[V6])
    assert ingress(s) == [{"IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8000, "IpRanges": [],
                           "Ipv6Ranges": [{"CidrIpv6": V6, "Description": "advisor vLLM"}]}]
    assert firewall_bodies(s) == [gcp_rule("advisor-web-vllm-v6", [V6], "8000")]
    assert nsg_rules(s) == [nsg_rule("advisor-vllm-v6", 101, [V6], "8000")]


def test_an_ipv4_range_alone_keeps_its_names():
    s = spec(allow_cidrs=[V4])
    assert ingress(s) == [{"IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8000,
                           "IpRanges": [{"CidrIp": V4, "Description": "advisor vLLM"}],
                           "Ipv6Ranges": []}]
    assert firewall_bodies(s) == [gcp_rule("advisor-web-vllm", [V4], "8000")]
    assert nsg_rules(s) == [nsg_rule("advisor-vllm", 100, [V4], "8000")]


def test_both_families_and_ssh_over_two_replica_ports():
    s = spec(ports=[8000, 8001], allow_cidrs=[V4, V6, "::/0"], ssh_cidrs=[SSH6])
    assert ingress(s) == [
        {"IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8001,
         "IpRanges": [{"CidrIp": V4, "Description": "advisor vLLM"}],
         "Ipv6Ranges": [{"CidrIpv6": V6, "Description": "advisor vLLM"},
                        {"CidrIpv6": "::/0", "Description": "advisor vLLM"}]},
        {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [],
         "Ipv6Ranges": [{"CidrIpv6": SSH6, "Description": "advisor SSH"}]}]
    assert firewall_bodies(s) == [gcp_rule("advisor-web-vllm", [V4], "8000-8001"),
                                  gcp_rule("advisor-web-vllm-v6", [V6, "::/0"], "8000-8001"),
                                  gcp_rule("advisor-web-ssh-v6", [SSH6], "22")]
    assert nsg_rules(s) == [nsg_rule("advisor-vllm", 100, [V4], "8000-8001"),
                            nsg_rule("advisor-vllm-v6", 101, [V6, "::/0"], "8000-8001"),
                            nsg_rule("advisor-ssh-v6", 111, [SSH6], "22")]
    for rules in (firewall_bodies(s), nsg_rules(s)):  # never two families in one rule
        for r in rules:
            ranges = r.get("sourceRanges") or r["properties"]["sourceAddressPrefixes"]
            assert len({":" in c for c in ranges}) == 1


def test_ssh_ipv4_only():
    s = spec(ssh_cidrs=["198.51.100.7/32"])
    assert ingress(s) == [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                           "IpRanges": [{"CidrIp": "198.51.100.7/32",
                                         "Description": "advisor SSH"}], "Ipv6Ranges": []}]
    assert firewall_bodies(s) == [gcp_rule("advisor-web-ssh", ["198.51.100.7/32"], "22")]
    assert nsg_rules(s) == [nsg_rule("advisor-ssh", 110, ["198.51.100.7/32"], "22")]


def test_multi_node_members_reach_each_other_and_nobody_else():
    s = spec(nodes=2)
    assert ingress(s, "sg-123") == [{"IpProtocol": "-1", "UserIdGroupPairs": [
        {"GroupId": "sg-123", "Description": "advisor multi-node: members of this deployment "
         "only"}]}]
    assert ingress(s) == [{"IpProtocol": "-1", "UserIdGroupPairs": [
        {"GroupId": "<id of security group advisor-web>", "Description": "advisor multi-node: "
         "members of this deployment only"}]}]
    assert firewall_bodies(s) == [{
        "name": "advisor-web-internal", "description": "advisor deployment web: multi-node "
        "members", "network": "global/networks/default", "direction": "INGRESS",
        "priority": 1000, "sourceTags": ["advisor-web"], "targetTags": ["advisor-web"],
        "allowed": [{"IPProtocol": "tcp"}, {"IPProtocol": "udp"}, {"IPProtocol": "icmp"}]}]


@pytest.mark.parametrize("provider,instance", [
    ("aws", "g6e.xlarge"), ("gcp", "g2-standard-8"), ("azure", "Standard_ND96isr_H100_v5")])
def test_provision_opens_nothing_and_listens_locally_without_allow_cidr(provider, instance):
    cat = small_catalog()
    ref = {"aws": None, "gcp": None, "azure": "azure-kv:vault/key"}[provider]
    res = provision("llama-3-8b", 8192, instance=f"{provider}:{instance}", name="web",
                    catalog=cat, dry_run=True, api_key_ref=ref, question=SMALL)
    calls = [c["call"] for c in res.requests[0]["calls"]]
    opened = {"aws": [c for c in calls if c == "ec2.AuthorizeSecurityGroupIngress"],
              "gcp": [c for c in calls if c == "compute.firewalls.insert"],
              "azure": [r for c in res.requests[0]["calls"] if "network_security_groups" in
                        c["call"] for r in c["body"]["properties"]["securityRules"]]}[provider]
    assert opened == []
    assert res.warnings == []
    assert res.user_data is not None and "ADVISOR_HOST=127.0.0.1" in res.user_data


def test_provision_with_the_whole_ipv6_internet_warns_and_listens_on_all_interfaces():
    res = provision("llama-3-8b", 8192, instance="aws:g6e.xlarge", name="web",
                    catalog=small_catalog(), dry_run=True, allow_cidrs=["::/0"], question=SMALL)
    assert res.warnings == ["::/0 opens the vLLM port(s) to the whole internet (the API key "
                            "still guards them)"]
    [auth] = [c for c in res.requests[0]["calls"]
              if c["call"] == "ec2.AuthorizeSecurityGroupIngress"]
    assert auth["body"]["IpPermissions"] == [
        {"IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8000, "IpRanges": [],
         "Ipv6Ranges": [{"CidrIpv6": "::/0", "Description": "advisor vLLM"}]}]
    assert res.user_data is not None and "ADVISOR_HOST=0.0.0.0" in res.user_data


def test_azure_spot_vm_pays_up_to_the_on_demand_price():
    # maxPrice -1: evicted for capacity only, never for price (Azure's Spot billingProfile)
    vm = AzureProvider(subscription_id="s").bodies(spec(spot=True), "2", "ssh-rsa AAAA")[
        "virtualMachine"]
    assert vm["zones"] == ["2"]
    assert {k: vm["properties"][k] for k in ("priority", "evictionPolicy", "billingProfile")} == {
        "priority": "Spot", "evictionPolicy": "Delete", "billingProfile": {"maxPrice": -1}}
    regular = AzureProvider(subscription_id="s").bodies(spec(), None, "ssh-rsa AAAA")[
        "virtualMachine"]
    assert "zones" not in regular and "priority" not in regular["properties"]
