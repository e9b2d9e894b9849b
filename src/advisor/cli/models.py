"""``advisor models list|show``."""

from __future__ import annotations

from typing import Annotated

import typer

from advisor.cli import output as out
from advisor.cli.common import CatalogDirs, JsonFlag, catalog_from

app = typer.Typer(help="The model aliases advisor knows.", no_args_is_help=True)


@app.command("list")
def list_(catalog: CatalogDirs = None, json: JsonFlag = False) -> None:
    """List the model aliases with their Hugging Face repo ids."""
    cat = catalog_from(catalog)
    views = [cat.describe_model(a) for a in sorted(cat.models)]
    if json:
        out.emit_json(views)
        return
    # at a narrow terminal the highest drop is hidden first
    out.table([out.Col("alias"), out.Col("hugging face id"), out.Col("type", drop=4),
               out.Col("layers", num=True, drop=3), out.Col("hidden", num=True, drop=5),
               out.Col("heads/kv", num=True, drop=2), out.Col("max ctx", num=True, drop=1)],
              ([v["alias"], v["hf_id"], out.fmt(v["summary"].get("model_type")),
                out.fmt(v["summary"].get("num_hidden_layers")),
                out.fmt(v["summary"].get("hidden_size")),
                f"{out.fmt(v['summary'].get('num_attention_heads'))}/"
                f"{out.fmt(v['summary'].get('num_key_value_heads'))}",
                out.fmt(v["summary"].get("max_position_embeddings"))] for v in views))


@app.command("show")
def show(
    alias: Annotated[str, typer.Argument(help="A model alias, e.g. llama-3-8b.")],
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Show one model alias: its repo id, source and config summary."""
    cat = catalog_from(catalog)
    entry = cat.model(alias)
    view = cat.describe_model(entry.alias)
    if json:
        out.emit_json({**view, "config_file": view["config"],
                       "config": cat.model_configs.get(entry.alias)})
        return
    out.pairs(entry.alias, [("hugging face id", entry.hf_id),
                            ("description", out.fmt(entry.description)),
                            *[(k, out.fmt(v)) for k, v in view["summary"].items()],
                            ("source", entry.sources["default"].source),
                            ("as of", entry.sources["default"].as_of)])
