"""AWS provider options the CLI offers (constructor keywords of AwsProvider)."""

from advisor.clouds.info import CloudOption

OPTIONS = (
    CloudOption(key="instance_profile", flag="--instance-profile",
                help="AWS: an existing IAM instance profile to use instead of the "
                "least-privilege one advisor creates",
                pattern=r"[A-Za-z0-9+=,.@_-]{1,128}", commands=("provision",)),
)

#: ``--image`` (offered by provision, which checks it against the deployment's cloud)
IMAGE = CloudOption(key="image", flag="--image",
                    help="AWS: an AMI id, ami-0123456789abcdef0",
                    pattern=r"ami-[0-9a-f]{8}([0-9a-f]{9})?",
                    commands=())

CREDENTIALS_HINT = ("configure AWS credentials (aws configure, AWS_PROFILE or "
                    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)")
