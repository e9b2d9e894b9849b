"""Azure (Virtual Machines): compute.py launches and removes, quota.py reads per-family vCPU
usage, refresh.py reads Resource SKUs and Retail Prices for the catalog, secrets.py is the
``azure-kv:`` key reference, options.py the settings a user may give. The azure-mgmt SDKs are
imported only by compute.py."""

from advisor.clouds.azure.options import CREDENTIALS_HINT, IMAGE, OPTIONS
from advisor.clouds.azure.secrets import KEY_SCHEME
from advisor.clouds.info import CloudInfo

#: customData, sent as plain text in base64: "The base-64 encoded string is decoded to a binary
#: array that is saved as a file on the Virtual Machine. The maximum length of the binary array
#: is 65535 bytes" (Compute API, OSProfile.customData, as the Azure SDK documents it:
#: https://learn.microsoft.com/en-us/dotnet/api/azure.resourcemanager.computeschedule.models.virtualmachineosprofile.customdata).
#: The limit counts the decoded bytes, i.e. the text advisor sends.
USER_DATA_LIMIT = 65535

CLOUD = CloudInfo(name="azure", title="Microsoft Azure", product_word="VM size",
                  backend="advisor.clouds.azure.compute:AzureProvider", extra="azure",
                  sdk="azure-mgmt-compute", key_scheme=KEY_SCHEME, options=OPTIONS,
                  reference_region="eastus",
                  credentials_hint=CREDENTIALS_HINT, image=IMAGE,
                  user_data_limit=USER_DATA_LIMIT)
