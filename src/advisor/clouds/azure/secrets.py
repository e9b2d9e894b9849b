"""Azure: the vLLM API key lives in a Key Vault secret (``azure-kv:VAULT/NAME``). Vault names
are global and the user's, so there is no default: the user names one."""

from advisor.clouds.info import KeyScheme

KEY_SCHEME = KeyScheme(prefix="azure-kv:",
                       pattern=r"azure-kv:[A-Za-z0-9-]{3,24}/[A-Za-z0-9-]{1,127}",
                       default=None, example="azure-kv:myvault/vllm-api-key",
                       token_example="azure-kv:myvault/hf-token")
