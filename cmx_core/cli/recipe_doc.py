"""Documentation of a recipe generated from its metadata (``cmx show recipe NAME``).

Markdown whose every element is a line or a list item (no tables), so that the terminal
form wraps each at its spaces under a hanging indent (:func:`cmx_core.results.grid.fit_text`)
and stays valid Markdown."""

from __future__ import annotations

from typing import Any

from cmx_core.recipes.model import CLI_RESERVED_INPUTS, Recipe


def input_option(name: str) -> str:
    """How to give input ``name`` on the command line: ``--input.NAME`` when ``--NAME``
    (with ``_`` spelled ``-``) is one of cmx's own options, such as ``--output``."""
    return f"--input.{name}" if name in CLI_RESERVED_INPUTS else f"--{name}"


def recipe_json(recipe: Recipe) -> dict[str, Any]:
    return {
        "name": recipe.name, "version": recipe.version, "tags": list(recipe.tags),
        "summary": recipe.summary, "description": recipe.description,
        "source": recipe.source, "path": str(recipe.path), "digest": recipe.digest,
        "inputs": {n: {"option": input_option(n), "type": s.type, "default": s.default, "min": s.min, "max": s.max,
                       "choices": list(s.choices), "required": s.required, "description": s.description}
                   for n, s in recipe.inputs.items()},
        "variations": {n: {"group": v.group, "default": v.default, "description": v.description,
                           "requires": dict(v.requires), "inputs": dict(v.inputs),
                           "container": v.container} for n, v in recipe.variations.items()},
        "deps": [{"tags": list(d.tags), "as": d.alias, "when": d.when, "version": d.version,
                  "with": dict(d.with_)} for d in recipe.deps],
        "steps": [{"id": s.id, "uses": s.uses} for s in recipe.steps],
        "outputs": {n: o.description for n, o in recipe.outputs.items()},
        "requires": dict(recipe.requires),
        "cache": {"enabled": recipe.cache.enabled, "expires_s": recipe.cache.expires_s},
    }


VERBATIM = (" ", "\t", "|", "```")
"""How a line of Markdown starts when wrapping would change it (code, a table row)."""


def recipe_text(recipe: Recipe, width: int | None) -> str:
    """:func:`recipe_markdown` for the terminal: each paragraph and list item wrapped at its
    spaces within ``width`` (a list item under a two-space indent); code and table lines of
    a description as written; None: one line each."""
    import textwrap  # deferred: only cmx show needs it

    text = recipe_markdown(recipe)
    if width is None:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        if line.startswith(VERBATIM):
            out.append(line)
            continue
        rest = "  " if line.startswith("- ") else ""
        out += textwrap.wrap(line, width, subsequent_indent=rest, break_long_words=False,
                             break_on_hyphens=False) or [""]
    return "\n".join(out)


STRUCTURE = ("-", "*", "#", ">", *VERBATIM)
"""How a line of Markdown starts when it is more than prose (a list, heading, code, table)."""


def paragraphs(text: str) -> list[str]:
    """``text``'s blocks: a prose paragraph on one line (Markdown reads its lines as one),
    a block holding a list, code or a table as written."""
    blocks = [block.strip("\n") for block in text.strip().split("\n\n") if block.strip()]
    return [block if any(line.startswith(STRUCTURE) for line in block.split("\n")) else " ".join(block.split())
            for block in blocks]


def recipe_markdown(recipe: Recipe) -> str:
    lines = [f"# {recipe.name} {recipe.version}", "", recipe.summary, ""]
    for paragraph in paragraphs(recipe.description or ""):
        lines += [paragraph, ""]
    lines += [f"Tags: {', '.join(recipe.tags)}", f"Source: {recipe.source}", f"File: {recipe.path}", ""]
    if recipe.inputs:
        lines += ["## Inputs", ""]
        for spec in recipe.inputs.values():
            kind = spec.type + (f" ({', '.join(map(str, spec.choices))})" if spec.choices else "")
            bounds = "".join([f" min {spec.min}" if spec.min is not None else "",
                              f" max {spec.max}" if spec.max is not None else ""])
            default = "required" if spec.required else f"default {spec.default!r}"
            about = f": {spec.description}" if spec.description else ""
            lines.append(f"- `{input_option(spec.name)}` {kind}{bounds}, {default}{about}")
        lines.append("")
        if any(name in CLI_RESERVED_INPUTS for name in recipe.inputs):
            lines += ["Inputs shown as `--input.NAME` share their name with a cmx option and must be given "
                      "in that form.", ""]
    if recipe.variations:
        lines += ["## Variations", ""]
        for var in recipe.variations.values():
            extra = [f"group {var.group}" if var.group else "ungrouped"]
            if var.default:
                extra.append("default")
            if var.requires:
                extra.append("requires " + ", ".join(f"{k}={v}" for k, v in var.requires.items()))
            lines.append(f"- `{var.name}` ({'; '.join(extra)}) {var.description}".rstrip())
        lines.append("")
    if recipe.deps:
        lines += ["## Dependencies", ""]
        for dep in recipe.deps:
            cond = f" when `{dep.when}`" if dep.when else ""
            ver = f" version {dep.version}" if dep.version else ""
            lines.append(f"- {dep.alias}: tags {','.join(dep.tags)}{ver}{cond}")
        lines.append("")
    if recipe.outputs:
        lines += ["## Outputs", ""] + [f"- {n}: {o.description}".rstrip(": ") for n, o in recipe.outputs.items()]
    return "\n".join(lines).rstrip()
