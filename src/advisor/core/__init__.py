"""The pure core: model spec, engine rules per vLLM release, sizing, performance, layouts,
ranking and fleets. Pydantic models in, pydantic models out: no I/O, no environment, no cloud."""
