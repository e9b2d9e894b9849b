"""AWS provider options the CLI offers (constructor keywords of AwsProvider)."""

from advisor.clouds.info import CloudOption

OPTIONS = (
    CloudOption(key="instance_profile", flag="--instance-profile",
                help="AWS: an existing IAM instance profile to use instead of the "
                "least-privilege one advisor creates",
                pattern=r"[A-Za-z0-9+=,.@_-]{1,128}", commands=("provision",)),
)
