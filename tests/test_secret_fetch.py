"""The launcher reads each cloud's secret store the way an instance of that cloud can: AWS with
the region from IMDSv2, GCP and Azure through their metadata servers' tokens and the stores'
REST APIs (no gcloud or az CLI on the image). curl and aws are stand-ins on PATH that answer
like the metadata servers and stores do; the launcher is the shipped script as advisor renders
it for that cloud (the template with clouds/<cloud>/secret_fetch.sh put in)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess

import pytest

from advisor.clouds.registry import with_secret_fetch
from advisor.render.cloudinit import templates_dir
from tests.test_topology import make_sysfs

CURL = r"""#!/usr/bin/env bash
printf '%s\n' "$*" >> "$LOG"
url=""
for a in "$@"; do [[ "$a" == http* ]] && url="$a"; done
case "$url" in
  */latest/api/token) printf 'imds-session' ;;
  */latest/meta-data/placement/region) printf 'eu-north-1' ;;
  *computeMetadata/v1/instance/service-accounts/default/token) printf '{"access_token":"g-tok"}' ;;
  *computeMetadata/v1/project/project-id) printf 'my-proj' ;;
  https://secretmanager.googleapis.com/v1/projects/my-proj/secrets/KEYNAME/versions/latest:access)
    [[ "$*" == *"Bearer g-tok"* ]] || exit 22
    printf '{"payload":{"data":"%s"}}' "$GCP_B64" ;;
  *metadata/identity/oauth2/token*) printf '{"access_token":"a-tok","expires_in":"3599"}' ;;
  "https://vault1.vault.azure.net/secrets/KEYNAME?api-version=7.4")
    [[ "$*" == *"Bearer a-tok"* ]] || exit 22
    printf '{"value":"azure-secret","id":"x"}' ;;
  *) exit 22 ;;
esac
"""
AWS = r"""#!/usr/bin/env bash
printf 'aws %s\n' "$*" >> "$LOG"
[[ "$*" == *"--region eu-north-1"* && "$*" == *"--name /team/KEYNAME"* ]] || exit 254
printf 'aws-secret\n'
"""
VLLM = r"""#!/usr/bin/env bash
printf '%s' "$VLLM_API_KEY" > "$OUT"
"""


REFS = [("aws-ssm:/team/KEYNAME", "aws-secret"), ("gcp-secret:KEYNAME", "gcp-secret-value"),
        ("azure-kv:vault1/KEYNAME", "azure-secret")]


def _launcher(tmp_path, cloud: str | None):
    text = (templates_dir() / "vllm-launch.sh").read_text()
    path = tmp_path / f"launch-{cloud or 'local'}.sh"
    path.write_text(with_secret_fetch(text, cloud) if cloud else text)
    return path


@pytest.mark.parametrize("ref, expected", REFS)
def test_launcher_reads_each_cloud_store_without_its_cli(tmp_path, ref, expected):
    if shutil.which("numactl") is None:
        pytest.skip("numactl is not installed here (.ci/run installs it)")
    bin_dir, venv = tmp_path / "bin", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    for name, text, where in (("curl", CURL, bin_dir), ("aws", AWS, bin_dir),
                              ("vllm", VLLM, venv / "bin")):
        (where / name).write_text(text)
        (where / name).chmod(0o755)
    sysfs = make_sysfs(tmp_path / "sys-root", {0: "0"}, [("0000:18:00.0", -1)])
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(tmp_path / "calls.log"),
           "OUT": str(tmp_path / "key"), "GCP_B64": base64.b64encode(b"gcp-secret-value").decode(),
           "ADVISOR_GPUS": "0", "ADVISOR_MODEL": "Qwen/Qwen3-8B", "ADVISOR_PORT": "8000",
           "ADVISOR_TP": "1", "ADVISOR_MAX_MODEL_LEN": "4096", "ADVISOR_GPU_MEM_UTIL": "0.9",
           "ADVISOR_API_KEY_REF": ref, "ADVISOR_VENV": str(venv),
           "ADVISOR_SYSFS_ROOT": str(sysfs), "ADVISOR_BUS_IDS": "00000000:18:00.0"}
    cloud = {"aws-ssm": "aws", "gcp-secret": "gcp", "azure-kv": "azure"}[ref.split(":")[0]]
    r = subprocess.run(["bash", str(_launcher(tmp_path, cloud))], env=env,
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "key").read_text() == expected
    # another cloud's launcher does not read this store: each carries its own cloud's reader
    other = {"aws": "gcp", "gcp": "azure", "azure": "aws"}[cloud]
    r2 = subprocess.run(["bash", str(_launcher(tmp_path, other))], env=env,
                        capture_output=True, text=True, timeout=30, check=False)
    assert r2.returncode == 1 and "not starting" in r2.stderr
    calls = (tmp_path / "calls.log").read_text()
    if ref.startswith("aws-ssm:"):  # IMDSv2: a PUT for the session token, then the region
        assert "-X PUT http://169.254.169.254/latest/api/token" in calls
        assert "X-aws-ec2-metadata-token: imds-session" in calls
    else:
        assert "Bearer" in calls and "aws " not in calls


def test_an_unreadable_secret_stops_the_launcher(tmp_path):
    env = {**os.environ, "ADVISOR_GPUS": "0", "ADVISOR_MODEL": "Qwen/Qwen3-8B",
           "ADVISOR_PORT": "8000", "ADVISOR_TP": "1", "ADVISOR_MAX_MODEL_LEN": "4096",
           "ADVISOR_GPU_MEM_UTIL": "0.9", "ADVISOR_API_KEY_REF": f"file:{tmp_path}/missing",
           "ADVISOR_VENV": str(tmp_path), "ADVISOR_BUS_IDS": "00000000:18:00.0",
           "ADVISOR_SYSFS_ROOT": str(tmp_path)}
    r = subprocess.run(["bash", str(templates_dir() / "vllm-launch.sh")], env=env,
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 1
    assert f"the API key: could not read file:{tmp_path}/missing; not starting" in r.stderr


def test_each_cloud_renders_only_its_own_reader():
    """The rendered launcher of each cloud carries that cloud's store and no other's; a host you
    have (and the template as it is) reads file: references only."""
    stores = {"aws": "ssm get-parameter", "gcp": "secretmanager.googleapis.com",
              "azure": "vault.azure.net"}
    template = (templates_dir() / "vllm-launch.sh").read_text()
    assert not any(s in template for s in stores.values())
    for cloud, store in stores.items():
        text = with_secret_fetch(template, cloud)
        assert store in text and "fetch_cloud_secret()" in text
        assert not any(s in text for c, s in stores.items() if c != cloud)
    assert with_secret_fetch(template, "onprem") == template
