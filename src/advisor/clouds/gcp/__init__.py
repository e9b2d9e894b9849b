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
#: (256 KiB)" (Compute Engine v1 API, Metadata ``items[].value``, as its client libraries
#: document it: https://cloud.google.com/php/docs/reference/cloud-compute/latest/V1.Items);
#: "The total size of all keys and values must be less than 512 KB" (Metadata.ItemsData,
#: https://googleapis.dev/dotnet/Google.Apis.Compute.alpha/latest/api/Google.Apis.Compute.alpha.Data.Metadata.ItemsData.html),
#: which advisor's few other entries leave far away.
USER_DATA_LIMIT = 262144

CLOUD = CloudInfo(name="gcp", title="Google Cloud (Compute Engine)", product_word="machine type",
                  backend="advisor.clouds.gcp.compute:GcpProvider", extra="gcp",
                  sdk="google-cloud-compute", key_scheme=KEY_SCHEME, options=OPTIONS,
                  reference_region="us-central1",
                  credentials_hint=CREDENTIALS_HINT, image=IMAGE,
                  user_data_limit=USER_DATA_LIMIT)
