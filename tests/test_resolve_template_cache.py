"""Templates are parsed once per text: the same text renders again from the compiled form,
with each context's values, and a syntax error is reported every time (never cached)."""

from __future__ import annotations

import pytest

from cmx_core.recipes import template
from cmx_core.recipes.template import TemplateError, render_value


def test_the_same_text_is_parsed_once_and_renders_each_context() -> None:
    text = "n={{ inputs.n }} of {{ inputs.m }}"
    before = template._template.cache_info()
    assert render_value(text, {"inputs": {"n": 1, "m": 2}}, "w") == "n=1 of 2"
    assert render_value(text, {"inputs": {"n": 3, "m": 4}}, "w") == "n=3 of 4"
    after = template._template.cache_info()
    assert after.hits >= before.hits + 1


def test_a_native_expression_is_compiled_once_and_keeps_its_type() -> None:
    before = template._expression.cache_info()
    assert render_value("{{ inputs.n * 2 }}", {"inputs": {"n": 21}}, "w") == 42
    assert render_value("{{ inputs.n * 2 }}", {"inputs": {"n": 5}}, "w") == 10
    assert template._expression.cache_info().hits >= before.hits + 1


@pytest.mark.parametrize("attempt", [1, 2])
def test_a_syntax_error_is_reported_each_time(attempt: int) -> None:
    with pytest.raises(TemplateError, match=r"^w: cannot render '\{\{ inputs\.n \+ \}\}'"):
        render_value("{{ inputs.n + }}", {"inputs": {"n": attempt}}, "w")


def test_an_undefined_name_still_fails_from_the_compiled_form() -> None:
    for _ in range(2):
        with pytest.raises(TemplateError, match="inputs"):
            render_value("x {{ inputs.missing }}", {"inputs": {}}, "w")
