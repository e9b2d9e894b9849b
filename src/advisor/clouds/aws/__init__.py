"""AWS (EC2): compute.py launches and removes, quota.py pre-checks Service Quotas, refresh.py
reads the EC2 and Price List APIs for the catalog, secrets.py is the ``aws-ssm:`` key
reference, options.py the settings a user may give. boto3 is imported only by compute.py."""

from advisor.clouds.aws.options import CREDENTIALS_HINT, IMAGE, OPTIONS
from advisor.clouds.aws.secrets import KEY_SCHEME
from advisor.clouds.info import CloudInfo

#: "User data is limited to 16 KB, in raw form, before it is base64-encoded" (Amazon EC2 User
#: Guide, "Work with instance user data", Considerations:
#: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html); the
#: API rejects a longer base64 value ("Member must have length less than or equal to 21847",
#: kubicorn/kubicorn#667, i.e. ceil(16384/3)*4 = 21848). advisor's user-data, with its
#: hash-pinned lock, is larger than that as text, so the launch sends it gzip-compressed:
#: "content found to be gzip compressed will be uncompressed ... useful because user-data is
#: limited to 16384 bytes" (https://help.ubuntu.com/community/CloudInit, User Data Input
#: Formats; cloud-init's "User-data formats" page), and the limit counts the compressed bytes.
USER_DATA_LIMIT = 16 * 1024

CLOUD = CloudInfo(name="aws", title="AWS (Amazon EC2)", product_word="instance type",
                  backend="advisor.clouds.aws.compute:AwsProvider", extra="aws", sdk="boto3",
                  key_scheme=KEY_SCHEME, options=OPTIONS,
                  reference_region="us-east-1",
                  credentials_hint=CREDENTIALS_HINT, image=IMAGE,
                  user_data_limit=USER_DATA_LIMIT, user_data_gzip=True,
                  user_data_counted="bytes compressed")
