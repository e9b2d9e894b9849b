"""AWS (EC2): compute.py launches and removes, quota.py pre-checks Service Quotas, refresh.py
reads the EC2 and Price List APIs for the catalog, secrets.py is the ``aws-ssm:`` key
reference, options.py the settings a user may give. boto3 is imported only by compute.py."""

from advisor.clouds.aws.options import CREDENTIALS_HINT, IMAGE, OPTIONS
from advisor.clouds.aws.secrets import KEY_SCHEME
from advisor.clouds.info import CloudInfo

CLOUD = CloudInfo(name="aws", title="AWS (Amazon EC2)", product_word="instance type",
                  backend="advisor.clouds.aws.compute:AwsProvider", extra="aws", sdk="boto3",
                  key_scheme=KEY_SCHEME, options=OPTIONS,
                  reference_region="us-east-1",
                  credentials_hint=CREDENTIALS_HINT, image=IMAGE)
