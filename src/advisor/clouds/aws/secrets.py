"""AWS: the vLLM API key lives in an SSM Parameter Store SecureString (``aws-ssm:NAME``); the
instance profile advisor creates may read that one parameter and nothing else."""

from advisor.clouds.info import KeyScheme

KEY_SCHEME = KeyScheme(prefix="aws-ssm:", pattern=r"aws-ssm:/?[A-Za-z0-9_./-]{1,200}",
                       default="aws-ssm:/advisor/vllm-api-key",
                       example="aws-ssm:/advisor/vllm-api-key",
                       token_example="aws-ssm:/advisor/hf-token")


def ssm_parameter(api_key_ref: str) -> str | None:
    """The parameter's name (with its leading '/') of an ``aws-ssm:`` reference."""
    if not api_key_ref.startswith(KEY_SCHEME.prefix):
        return None
    name = api_key_ref.removeprefix(KEY_SCHEME.prefix)
    return name if name.startswith("/") else "/" + name
