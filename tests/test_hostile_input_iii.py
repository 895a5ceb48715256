"""Engine hardening III (#49): errors found at plan time, nothing silently accepted, bounded
reads, nothing raw on the terminal. Each test names the class of the issue it covers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

BOMB = """
name: bomb
tags: [bomb]
summary: a template that passes a bound
inputs:
  n: {{type: number, default: 10}}
steps:
  - uses: shell
    with: {{cmd: [echo, "{template}"]}}
"""

BOMBS = [
    "{{ 'x' * 10**9 }}",
    "{% for i in range(10**9) %}{% endfor %}",
    "{% for i in range(1000) %}{% for j in range(1000) %}{{ node.dir }}{% endfor %}{% endfor %}",
    "{{ 'ab' | center(10**8) }}",
]


@pytest.mark.parametrize("template", BOMBS)
def test_a_template_past_a_bound_fails_the_plan_as_it_fails_the_run(
        template: str, cli: Callable[..., Any], recipes: Callable[[str, str], Path]) -> None:
    """Class 1: ``cmx plan`` exited 0 and ``cmx run`` 2 after recording a run directory."""
    path = recipes("bomb", BOMB.format(template=template))
    directory = str(path.parent)
    planned = cli("plan", "--tags=bomb", "--recipes", directory)
    assert planned.code == 2 and len(planned.err_lines) == 1, planned.err
    assert f"{path}:8: steps.0.with.cmd[1]:" in planned.err and "a template may build at most" in planned.err


def test_a_bound_reached_through_an_input_fails_the_plan(cli: Callable[..., Any],
                                                         recipes: Callable[[str, str], Path]) -> None:
    path = recipes("bomb", BOMB.format(template="{% for i in range(inputs.n) %}{% endfor %}"))
    directory = str(path.parent)
    assert cli("plan", "--tags=bomb", "--recipes", directory).code == 0
    big = cli("plan", "--tags=bomb", "--recipes", directory, "--n=2000000")
    assert big.code == 2 and "range(2000000) goes past the template's loop budget" in big.err
