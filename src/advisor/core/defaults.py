"""Constants the CLI needs in its option defaults, in a module that imports nothing.

``advisor --help`` reads these without loading pydantic or any model module; the modules
they belong to (:mod:`advisor.core.engine`) re-export them.
"""

#: the vLLM release advisor pins for provisioning and assumes when none is given
DEFAULT_VLLM_VERSION = "0.11.0"
