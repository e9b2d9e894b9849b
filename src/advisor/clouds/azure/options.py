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
