"""GCP (Compute Engine): compute.py launches and removes, quota.py reads regional GPU quota,
refresh.py reads machine types and Cloud Billing SKUs for the catalog, secrets.py is the
``gcp-secret:`` key reference, options.py the settings a user may give. google-cloud-compute is
imported only by compute.py."""

from advisor.clouds.gcp.options import CREDENTIALS_HINT, IMAGE, OPTIONS
from advisor.clouds.gcp.secrets import KEY_SCHEME
from advisor.clouds.info import CloudInfo

CLOUD = CloudInfo(name="gcp", title="Google Cloud (Compute Engine)", product_word="machine type",
                  backend="advisor.clouds.gcp.compute:GcpProvider", extra="gcp",
                  sdk="google-cloud-compute", key_scheme=KEY_SCHEME, options=OPTIONS,
                  reference_region="us-central1",
                  credentials_hint=CREDENTIALS_HINT, image=IMAGE)
