"""GCP provider options the CLI offers (constructor keywords of GcpProvider)."""

from advisor.clouds.info import CloudOption

OPTIONS = (
    CloudOption(key="project", flag="--project",
                help="GCP project (default: GOOGLE_CLOUD_PROJECT or the credentials' project)",
                # project ids: 6-30 lower-case letters, digits and hyphens, starting with a
                # letter (Resource Manager's rules); domain-scoped ids carry 'example.com:'
                pattern=r"([a-z0-9.-]{1,63}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]"),
    CloudOption(key="network", flag="--network",
                help="GCP VPC network for the instance and its firewall rules, a name or "
                "projects/P/global/networks/N (default: default; without --allow-cidr or "
                "--ssh-cidr the instance has no external IP and needs Cloud NAT there)",
                # network names: RFC 1035, 1-63 characters; P as --project above
                pattern=r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?|projects/([a-z0-9.-]{1,63}:)?"
                r"[a-z][a-z0-9-]{4,28}[a-z0-9]/global/networks/[a-z]([a-z0-9-]{0,61}[a-z0-9])?",
                commands=("provision", "status", "down")),
    # issue 27: egress without ingress (the egress section of advisor.clouds.gcp.compute)
    CloudOption(key="nat", flag="--gcp-nat",
                help="GCP egress for an instance without an external IP: auto (default) uses "
                "a Cloud NAT that serves its subnet or makes one that down removes; create "
                "always makes one; existing-only refuses without one, printing the gcloud "
                "commands that make it",
                pattern=r"auto|create|existing-only", commands=("provision",)),
)

#: ``--image`` (offered by provision, which checks it against the deployment's cloud)
IMAGE = CloudOption(key="image", flag="--image",
                    help=("GCP: an image, "
                          "projects/P/global/images/NAME or projects/P/global/images/family/F"),
                    pattern=r"(https://www\.googleapis\.com/compute/v1/)?"
                    r"(projects/([a-z0-9.-]{1,63}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]/)?"
                    r"global/images/(family/)?[a-z]([a-z0-9-]{0,61}[a-z0-9])?",
                    commands=())

CREDENTIALS_HINT = ("run 'gcloud auth application-default login' or set "
                    "GOOGLE_APPLICATION_CREDENTIALS")
