"""GCP (Compute Engine): compute.py launches and removes (egress through Cloud NAT included),
preflight.py checks before anything is made, quota.py reads regional GPU quota,
refresh.py reads machine types and Cloud Billing SKUs for the catalog, secrets.py is the
``gcp-secret:`` key reference, options.py the settings a user may give. google-cloud-compute is
imported only by compute.py."""

from advisor.clouds.gcp.options import CREDENTIALS_HINT, IMAGE, OPTIONS
from advisor.clouds.gcp.secrets import KEY_SCHEME
from advisor.clouds.info import CloudInfo

#: The user-data is one metadata entry (key ``user-data``), sent as plain text: "The only
#: restriction placed on values is that their size must be less than or equal to 262144 bytes
#: (256 KiB)" (Compute Engine API, Metadata.items[].value:
#: https://cloud.google.com/compute/docs/reference/rest/v1/instances; the same text in the
#: client libraries' ``Items.Value``); all keys and values of an instance together must stay
#: under 512 KB, which advisor's few other entries leave far away.
USER_DATA_LIMIT = 262144

CLOUD = CloudInfo(name="gcp", title="Google Cloud (Compute Engine)", product_word="machine type",
                  backend="advisor.clouds.gcp.compute:GcpProvider", extra="gcp",
                  sdk="google-cloud-compute", key_scheme=KEY_SCHEME, options=OPTIONS,
                  reference_region="us-central1",
                  credentials_hint=CREDENTIALS_HINT, image=IMAGE,
                  user_data_limit=USER_DATA_LIMIT)
