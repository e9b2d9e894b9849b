"""Azure provider options the CLI offers (constructor keywords of AzureProvider)."""

from advisor.clouds.info import CloudOption

OPTIONS = (
    CloudOption(key="resource_group", flag="--resource-group",
                help="Azure resource group to create the deployment in (default: "
                "advisor-NAME, created and removed by advisor; yours is never removed)",
                # ARM's rule: 1-90 letters, digits, '_', '-', '.', '(' and ')', not ending in '.'
                pattern=r"[A-Za-z0-9_().-]{0,89}[A-Za-z0-9_()-]",
                commands=("provision", "status", "down")),
    CloudOption(key="key_vault_resource_group", flag="--key-vault-resource-group",
                help="Azure resource group of the Key Vault that --api-key-ref/--hf-token-ref "
                "name (default: looked up in the subscription); the VM's identity gets Key "
                "Vault Secrets User on those secrets only",
                pattern=r"[A-Za-z0-9_().-]{0,89}[A-Za-z0-9_()-]", commands=("provision",)),
    CloudOption(key="subscription_id", flag="--subscription",
                help="Azure subscription id (default: AZURE_SUBSCRIPTION_ID)",
                pattern=r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
                r"-[0-9a-fA-F]{12}"),
)

#: ``--image`` (offered by provision, which checks it against the deployment's cloud)
IMAGE = CloudOption(key="image", flag="--image",
                    help=("Azure: an image URN, "
                          "PUBLISHER:OFFER:SKU:VERSION, or an image resource id"),
                    pattern=r"[A-Za-z0-9_.-]{1,100}:[A-Za-z0-9_.-]{1,100}:[A-Za-z0-9_.-]{1,100}"
                    r":[A-Za-z0-9_.-]{1,64}"
                    r"|/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[A-Za-z0-9_().-]{1,90}"
                    r"/providers/Microsoft\.Compute/[A-Za-z0-9_./-]{1,400}",
                    commands=())

CREDENTIALS_HINT = ("run 'az login', or set AZURE_CLIENT_ID, AZURE_TENANT_ID and "
                    "AZURE_CLIENT_SECRET")
