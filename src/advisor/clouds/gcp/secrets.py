"""GCP: the vLLM API key lives in Secret Manager (``gcp-secret:NAME``)."""

from advisor.clouds.info import KeyScheme

KEY_SCHEME = KeyScheme(prefix="gcp-secret:", pattern=r"gcp-secret:[A-Za-z0-9_-]{1,200}",
                       default="gcp-secret:advisor-vllm-api-key",
                       example="gcp-secret:advisor-vllm-api-key",
                       token_example="gcp-secret:advisor-hf-token")
