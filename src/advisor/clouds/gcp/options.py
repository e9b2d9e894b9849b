"""GCP provider options the CLI offers (constructor keywords of GcpProvider)."""

from advisor.clouds.info import CloudOption

OPTIONS = (
    CloudOption(key="project", flag="--project",
                help="GCP project (default: GOOGLE_CLOUD_PROJECT or the credentials' project)",
                # project ids: 6-30 lower-case letters, digits and hyphens, starting with a
                # letter (Resource Manager's rules); domain-scoped ids carry 'example.com:'
                pattern=r"([a-z0-9.-]{1,63}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]"),
)
