"""Each cloud's user-data limit, as the cloud counts it: the documented numbers pinned, every
catalog instance of every cloud rendered (an 8B and a 70B model, the recommended layout, the
layout with the most replicas, and a two-node replica's head and worker) and held under its
limit, the check that refuses a user-data over it, and AWS's launch sending the gzip bytes."""

from __future__ import annotations

import gzip
import json
import secrets
from typing import Any

import pytest

import advisor
from advisor.clouds.registry import CLOUDS, info, user_data_payload
from advisor.core.layouts import place, place_multi
from advisor.errors import AdvisorError, UserInputError
from advisor.render.cloudinit import RenderRequest, check_user_data, render

CAT = advisor.load_catalog()
MODELS = {"llama-3-8b": "meta-llama/Meta-Llama-3-8B-Instruct",
          "llama-3.3-70b": "meta-llama/Llama-3.3-70B-Instruct"}


def test_documented_limits_are_pinned():
    from advisor.clouds.aws import USER_DATA_LIMIT as AWS
    from advisor.clouds.azure import USER_DATA_LIMIT as AZURE
    from advisor.clouds.gcp import USER_DATA_LIMIT as GCP

    # EC2 User Guide: "limited to 16 KB, in raw form, before it is base64-encoded"
    assert AWS == 16384 and info("aws").user_data_limit == AWS and info("aws").user_data_gzip
    # Compute Engine Metadata.items[].value: "less than or equal to 262144 bytes (256 KiB)"
    assert GCP == 262144 and info("gcp").user_data_limit == GCP and not info("gcp").user_data_gzip
    # Azure OSProfile.customData: "The maximum length of the binary array is 65535 bytes"
    assert AZURE == 65535 and info("azure").user_data_limit == AZURE
    assert not info("azure").user_data_gzip
    assert all(info(c).user_data_limit > 0 for c in CLOUDS)


def test_payload_is_gzip_where_the_cloud_uses_it_and_deterministic():
    text = "#cloud-config\n" + "runcmd: [[true]]\n" * 200
    aws = user_data_payload("aws", text)
    assert aws[:2] == b"\x1f\x8b" and gzip.decompress(aws).decode() == text
    assert aws == user_data_payload("aws", text)  # no time stamp: the same bytes each time
    for cloud in ("gcp", "azure", "onprem"):
        assert user_data_payload(cloud, text) == text.encode()


def _req(model: str, provider: str, **kw: Any) -> RenderRequest:
    ks = info(provider).key_scheme
    return RenderRequest(model=MODELS[model], max_model_len=8192, vllm_version="0.11.0",
                         api_key_ref=ks.example, hf_token_ref=ks.token_example, **kw)


def _sizes() -> list[tuple[int, str, str, str, str]]:
    """(size as the cloud counts it, cloud, instance, model and layout, file) of every render."""
    out: list[tuple[int, str, str, str, str]] = []
    for inst in CAT.instances.values():
        if inst.provider not in CLOUDS:
            continue
        ks = info(inst.provider).key_scheme
        renders: list[tuple[str, dict[str, str]]] = []
        for model in MODELS:
            try:
                res = advisor.render_files(model, 8192, instance=inst.key, catalog=CAT,
                                           batch=True, allow_small_host=True,
                                           api_key_ref=ks.example, hf_token_ref=ks.token_example)
                renders.append((f"{model} recommended", res.files))
            except AdvisorError as exc:
                if "user-data" in str(exc):
                    raise
                # the plan cannot fit (too small, no price): nothing to render
        # the most replicas one instance can hold (one GPU each): the most env files
        renders.append(("llama-3-8b tp1 x all GPUs",
                        render(inst, place(inst, CAT, 1, 1), _req("llama-3-8b", inst.provider))))
        # a 70B replica over two of these instances: the head's and the workers' user-data
        renders.append(("llama-3.3-70b over 2 nodes",
                        render(inst, place_multi(inst, CAT, inst.gpu.count, 2),
                               _req("llama-3.3-70b", inst.provider))))
        for what, files in renders:
            for name in ("user-data", "worker/user-data"):
                if name in files:
                    size = len(user_data_payload(inst.provider, files[name]))
                    out.append((size, inst.provider, inst.key, what, name))
    return out


@pytest.mark.slow  # a sweep: every catalog instance rendered (13 s here)
def test_every_catalog_instance_fits_its_clouds_limit():
    sizes = _sizes()
    assert {c for _, c, *_ in sizes} == set(CLOUDS)
    assert any(n == "worker/user-data" for *_, n in sizes)
    print()
    for cloud in CLOUDS:
        mine = [s for s in sizes if s[1] == cloud]
        size, _, key, what, name = max(mine)
        limit = info(cloud).user_data_limit
        print(f"{cloud}: {len(mine)} user-data files; largest {size:,} "
              f"{info(cloud).user_data_counted} of {limit:,} ({size / limit:.0%}): "
              f"{key}, {what}, {name}")
        for s in mine:
            assert s[0] <= limit, s


def test_a_user_data_over_the_limit_is_refused_at_render(monkeypatch):
    noise = "".join(f"pkg{i}==1.0 --hash=sha256:{secrets.token_hex(32)}\n" for i in range(400))
    with pytest.raises(UserInputError, match=r"^user-data for aws is [\d,]+ bytes compressed; "
                       r"AWS allows 16,384$") as exc:
        check_user_data("aws", "#cloud-config\n" + noise)
    assert "advisor render --out" in (exc.value.hint or "")
    with pytest.raises(UserInputError, match=r"Microsoft Azure allows 65,535"):
        check_user_data("azure", "#cloud-config\n" + noise * 2)
    assert check_user_data("gcp", "#cloud-config\n" + noise * 2) > 65535  # fits GCP's 256 KiB
    # render() checks it: a lock grown past what AWS takes stops the render, not the launch
    import advisor.render.envlock as envlock

    monkeypatch.setattr(envlock, "lock_text", lambda *a, **k: noise)
    p5 = CAT.instance("aws:p5.48xlarge")
    with pytest.raises(UserInputError, match="user-data for aws is"):
        render(p5, place(p5, CAT, 8, 1), _req("llama-3-8b", "aws"))
    gcp = next(i for i in CAT.instances.values() if i.provider == "gcp")
    render(gcp, place(gcp, CAT, gcp.gpu.count, 1), _req("llama-3-8b", "gcp"))


def test_aws_launch_sends_gzip_and_the_dry_run_stays_json(monkeypatch):
    from advisor.clouds.aws.compute import AwsProvider
    from advisor.clouds.base import LaunchSpec

    files = render(CAT.instance("aws:p5.48xlarge"), place(CAT.instance("aws:p5.48xlarge"), CAT,
                                                         1, 1), _req("llama-3-8b", "aws"))
    text = files["user-data"]
    assert len(text.encode()) > 16384  # as text it would not fit
    spec = LaunchSpec(deployment="web", provider="aws", instance_type="p5.48xlarge",
                      region="us-east-1", gpu_model="H100", gpu_count=8, vcpus=192,
                      user_data=text, disk_gib=200, ports=[8000],
                      api_key_ref="aws-ssm:/advisor/key")
    prov = AwsProvider(sleep=lambda _s: None, waiter_delay=0)
    dry = prov.request(spec, None)
    json.dumps(dry)  # the dry run prints it
    run = dry["calls"][-1]
    assert run["body"]["UserData"] == text and run["user_data_encoding"] == "gzip"
    sent: dict[str, Any] = {}

    class FakeEc2:
        def run_instances(self, **body: Any) -> dict[str, Any]:
            sent.update(body)
            return {"Instances": [{}]}

    monkeypatch.setattr(prov, "_client", lambda *a: FakeEc2())
    monkeypatch.setattr(prov, "_image", lambda s: {"image_id": "ami-1"})
    monkeypatch.setattr(prov, "_call", lambda c, op, **kw: {"SecurityGroups": [{"GroupId": "sg"}]})
    monkeypatch.setattr(AwsProvider, "_row", staticmethod(lambda i, r: "row"))
    assert prov.launch(spec, None) == "row"
    assert isinstance(sent["UserData"], bytes) and sent["UserData"][:2] == b"\x1f\x8b"
    assert len(sent["UserData"]) <= 16384
    assert gzip.decompress(sent["UserData"]).decode() == text


def test_the_fast_yaml_emitter_writes_the_bytes_the_pure_python_one_does():
    """render() emits its cloud-config with libyaml where PyYAML has it (30x faster); it must be
    byte for byte what PyYAML's own emitter writes, scripts as blocks, for a one-node render and
    a two-node replica's head and worker (the sweep above compared all 610 once)."""
    import yaml

    from advisor.render import cloudinit

    class Pure(yaml.SafeDumper):
        pass

    Pure.add_representer(str, cloudinit._str)
    assert yaml.__with_libyaml__ and issubclass(cloudinit._BlockDumper, yaml.CSafeDumper)
    p5 = CAT.instance("aws:p5.48xlarge")
    texts = [render(p5, place(p5, CAT, 1, 1), _req("llama-3-8b", "aws"))["user-data"]]
    multi = render(p5, place_multi(p5, CAT, 8, 2), _req("llama-3.3-70b", "aws"))
    texts += [multi["user-data"], multi["worker/user-data"],
              cloudinit.with_ray_head(multi["worker/user-data"], "10.0.0.5")]
    for text in texts:
        doc = yaml.safe_load(text.removeprefix("#cloud-config\n"))
        pure = "#cloud-config\n" + yaml.dump(doc, Dumper=Pure, sort_keys=False, width=1000)
        assert pure == text
        assert "content: |" in text  # the scripts as blocks, not one quoted line
