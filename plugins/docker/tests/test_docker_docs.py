"""The READMEs' lists are the code's: template variables, run keys and executor options."""

from __future__ import annotations

import re
from pathlib import Path

from cmx_docker import runopts, templates
from cmx_docker.context import _variables

ROOT = Path(__file__).resolve().parents[3]


def test_the_containers_readme_lists_every_template_variable_and_run_key() -> None:
    text = (ROOT / "containers" / "README.md").read_text()
    listed = text.split("Variables available in `Dockerfile.j2`:", 1)[1].split("\n\n", 1)[0]
    names = set(re.findall(r"`([a-z_]+)`", listed)) - {"name", "uid", "pins", "suites"}
    template = templates.load("python")
    assert names == set(_variables(template, "b", None, None, {}, ca=False))
    block = text.split("run:", 1)[1].split("```", 1)[0]
    assert set(re.findall(r"^  ([a-z_]+):", block, re.MULTILINE)) == templates._RUN_KEYS


def test_the_plugin_readme_names_every_executor_option() -> None:
    text = (ROOT / "plugins" / "docker" / "README.md").read_text()
    options = text.split("## Executor options", 1)[1].split("##", 1)[0]
    for key in (*runopts.OPTION_KEYS, "container", "rebuild"):
        assert f"`{key}`" in options, key
    for limit in ("memory_bytes", "cpus", "pids", "shm_bytes", "gpus", "content_digest"):
        assert f"`{limit}`" in text, limit
