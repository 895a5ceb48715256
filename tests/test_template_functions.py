"""Template functions plugins register (cmx_core.api.register_template_function): recipes call
them in templates, the plan-time name check accepts them, and a name cannot be taken twice
(docs/recipes.md, Templates)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_core import api
from cmx_core.errors import CmxError
from cmx_core.recipes.template import render_value, template_functions
from cmx_core.recipes.template_refs import template_info


def _double(value: int) -> int:
    return 2 * value


def test_a_registered_function_renders_with_its_native_type() -> None:
    api.register_template_function("cmx_test_double", _double)
    api.register_template_function("cmx_test_double", _double)  # the same function again: fine
    import types

    reloaded = types.FunctionType(_double.__code__, globals(), "_double")  # as a reloaded module defines it
    assert reloaded is not _double
    api.register_template_function("cmx_test_double", reloaded)
    assert "cmx_test_double" in template_functions()
    assert render_value("{{ cmx_test_double(inputs.n) }}", {"inputs": {"n": 21}}, "t") == 42
    assert render_value("n={{ cmx_test_double(inputs.n) }}", {"inputs": {"n": 2}}, "t") == "n=4"


def test_registered_after_the_environment_exists_still_renders() -> None:
    assert render_value("{{ 1 }}", {}, "t") == 1  # the environment is built by now
    api.register_template_function("cmx_test_late", lambda: "late")
    assert render_value("{{ cmx_test_late() }}", {}, "t") == "late"


def test_a_name_taken_or_reserved_is_refused() -> None:
    api.register_template_function("cmx_test_taken", _double)
    with pytest.raises(CmxError, match="registered twice"):
        api.register_template_function("cmx_test_taken", lambda v: v)

    def other(value: int) -> int:  # a nested function: another qualified name
        return value

    with pytest.raises(CmxError, match="registered twice"):
        api.register_template_function("cmx_test_taken", other)
    for bad in ("inputs", "facts", "not-an-identifier"):
        with pytest.raises(CmxError, match="template function name"):
            api.register_template_function(bad, _double)


def test_the_plan_check_accepts_registered_names_and_refuses_others(tmp_path: Path) -> None:
    from cmx_core.recipes.load import load_recipe_file
    from cmx_core.recipes.template_checks import Scope, _problem

    api.register_template_function("cmx_test_checked", _double)
    (tmp_path / "t.yaml").write_text("name: t\nversion: '1'\ntags: [t]\nsummary: t\n"
                                     "inputs: {n: {type: integer, default: 1}}\n")
    recipe = load_recipe_file(tmp_path / "t.yaml")
    scope = Scope(names=("inputs",), groups=(), facts=())
    refs = template_info("{{ cmx_test_checked(inputs.n) }}").refs
    assert all(_problem(recipe, ref, scope) is None for ref in refs)
    (unknown,) = [r for r in template_info("{{ cmx_test_unregistered(1) }}").refs]
    assert "not a template name" in str(_problem(recipe, unknown, scope))
