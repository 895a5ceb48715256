"""`cmx plan` says OK only when the run cannot fail on its input (issue 10, item 5).

Each bad input below used to pass `cmx plan` and fail at run time, after the deps had run.
Now `cmx plan` and `cmx run` both refuse it with one line (file, line, key, what to do),
exit 2, no traceback, and `cmx run` refuses before any node runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cmx_core.errors import CmxError
from cmx_core.recipes.template_checks import PlanCheckError
from cmx_core.recipes.template_refs import _jinja_info, template_info

SENTINEL = """
name: sentinel
tags: [sentinel]
summary: a dep that leaves a mark when it runs
cache: false
outputs: [path]
steps:
  - {{uses: shell, with: {{cmd: [touch, "{mark}"]}}}}
"""

HEAD = """
name: r
tags: [a]
summary: x
inputs:
  type: {default: plain}
  n: {type: integer, default: 1}
variations:
  cpu: {group: device, default: true}
  gpu: {group: device}
deps:
  - {tags: [sentinel]}
"""

# (id, the rest of the recipe, substrings of the one error line)
CASES = [
    ("undefined-input", "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ inputs.typo }}']}}\n",
     ["r.yaml:13: steps.0.with.cmd[1]:", "inputs.typo", "does not declare", "did you mean inputs.type?"]),
    ("undefined-variation-group", "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ variation.dev }}']}}\n",
     ["steps.0.with.cmd[1]", "not a variation group", "did you mean variation.device?"]),
    ("undefined-dep-alias", "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ deps.sentinal.path }}']}}\n",
     ["not a dep alias", "did you mean deps.sentinel?"]),
    ("undefined-dep-output", "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ deps.sentinel.pth }}']}}\n",
     ["dep 'sentinel' does not declare", "did you mean deps.sentinel.path?"]),
    ("dep-skipped-by-when", ("  - {tags: [sentinel], as: gpu_only, when: \"variation.device == 'gpu'\"}\n"
     "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ deps.gpu_only.path }}']}}\n"),
     ["dep 'gpu_only' is not in the plan", "when: variation.device == 'gpu' is false"]),
    ("later-step", ("steps:\n  - {uses: shell, with: {cmd: [echo, '{{ steps.second.returncode }}']}}\n"
     "  - {uses: shell, id: second, with: {cmd: [echo]}}\n"),
     ["steps.0.with.cmd[1]", "step 'second' has no outputs yet: it runs later"]),
    ("unknown-step", ("steps:\n  - {uses: shell, id: first, with: {cmd: [echo]}}\n"
     "  - {uses: shell, with: {cmd: [echo, '{{ steps.frist.returncode }}']}}\n"),
     ["r.yaml:14: steps.1.with.cmd[1]", "not an earlier step's id", "did you mean steps.first?"]),
    ("unknown-fact", "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ facts.nosuchfact }}']}}\n",
     ["facts.nosuchfact", "no loaded detector provides"]),
    ("unknown-top-level-name", "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ inptus.type }}']}}\n",
     ["inptus.type", "not a template name", "did you mean inputs?"]),
    ("template-syntax-error", "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ inputs.type | }}']}}\n",
     ["r.yaml:13: steps.0.with.cmd[1]", "invalid template"]),
    ("template-private-attribute", "steps:\n  - {uses: shell, with: {cmd: [echo, \"{{ ''.__class__.__mro__ }}\"]}}\n",
     ["steps.0.with.cmd[1]", "private attributes"]),
    ("string-cmd", "steps:\n  - {uses: shell, with: {cmd: 'echo hi'}}\n",
     ["r.yaml:13: steps.0.with.cmd must be a list, not a string", "argument list", "write cmd: [echo, hi]"]),
    ("templated-string-cmd", "steps:\n  - {uses: shell, with: {cmd: '{{ inputs.type }}'}}\n",
     ["steps.0.with.cmd must be a list, but '{{ inputs.type }}' renders a string"]),
    ("empty-cmd", "steps:\n  - {uses: shell, with: {cmd: []}}\n", ["steps.0.with.cmd needs at least 1 item"]),
    ("unknown-parse-mode", "steps:\n  - {uses: shell, with: {cmd: [echo], parse: yaml}}\n",
     ["steps.0.with.parse must be one of: none, kv, json, not 'yaml'"]),
    ("cmd-mapping-element", "steps:\n  - {uses: shell, with: {cmd: [echo, a: b]}}\n",
     ["steps.0.with.cmd[1] must be a string or a number, not a mapping", "quote"]),
    ("cmd-boolean-element", "steps:\n  - {uses: shell, with: {cmd: [true]}}\n",
     ["steps.0.with.cmd[0] must be a string or a number, not a boolean (True)", "quote it: 'true'"]),
    ("unknown-shell-key", "steps:\n  - {uses: shell, with: {cmd: [echo], stdin: x}}\n",
     ["steps.0.with.stdin: unknown parameter of step type 'shell'"]),
    ("bad-timeout", "steps:\n  - {uses: shell, with: {cmd: [echo], timeout_s: 0}}\n",
     ["steps.0.with.timeout_s = 0 must be > 0"]),
    ("python-without-function", "steps:\n  - {uses: python, with: {x: 1}}\n",
     ["steps.0.with needs 'function'", "add function:"]),
    ("python-bad-function", "steps:\n  - {uses: python, with: {function: os.system}}\n",
     ["steps.0.with.function = 'os.system' is not package.module:function"]),
    ("output-value-undefined", "steps:\n  - {uses: shell, with: {cmd: [echo]}}\noutputs:\n"
                               "  o: {value: '{{ inputs.nope }}'}\n",
     ["r.yaml:15: outputs.o.value", "inputs.nope"]),
    ("template-in-nested-list", "steps:\n"
                                "  - {uses: python, with: {function: 'm:f', args: [[a, '{{ inputs.tpye }}']]}}\n",
     ["steps.0.with.args[0][1]", "did you mean inputs.type?"]),
    ("dep-with-reads-run-name", "  - {tags: [sentinel], as: other, with: {x: '{{ steps.a.b }}'}}\n",
     ["deps.1.with.x", "not known yet when a dep's with: is rendered"]),
]


@pytest.fixture
def bad_recipe(recipes, tmp_path):
    mark = tmp_path / "sentinel-ran"

    def write(body: str) -> Path:
        recipes("sentinel", SENTINEL.format(mark=mark))
        return recipes("r", textwrap.dedent(HEAD).lstrip() + body)

    write.mark = mark  # type: ignore[attr-defined]
    return write


def _one_error(result) -> str:
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    assert result.out == ""
    [line] = result.err_lines
    assert line.startswith("cmx: error: "), line
    return line


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_plan_refuses(case, cli, recipes, bad_recipe) -> None:
    _, body, expected = case
    bad_recipe(body)
    line = _one_error(cli("plan", "--recipes", recipes.dir, "--tags=a"))
    for text in expected:
        assert text in line, line


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_run_refuses_before_any_node_runs(case, cli, recipes, bad_recipe, cmx_home) -> None:
    _, body, expected = case
    bad_recipe(body)
    line = _one_error(cli("run", "recipe", "--recipes", recipes.dir, "--tags=a"))
    assert expected[-1] in line, line
    assert not bad_recipe.mark.exists(), "the dep ran"
    runs = cmx_home / "data" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []


GOOD = [
    ("guarded-skipped-dep", ("  - {tags: [sentinel], as: gpu_only, when: \"variation.device == 'gpu'\"}\n"
     "steps:\n"
     "  - {uses: shell, with: {cmd: [echo, \"{{ deps.gpu_only.path if deps.gpu_only is defined else '' }}\"]}}\n")),
    ("default-filter", "steps:\n  - {uses: shell, with: {cmd: [echo, \"{{ inputs.other | default('x') }}\"]}}\n"),
    ("loops-and-globals", "steps:\n  - {uses: shell, with: {cmd: [echo, "
                          "\"{% for v in variations %}{{ v }}{{ loop.index }}{% endfor %}{{ range(2) | list }}\"]}}\n"),
    ("earlier-step-and-dirs", ("steps:\n  - {uses: shell, id: first, with: {cmd: [echo]}}\n"
     "  - {uses: shell, with: {cmd: [echo, '{{ steps.first.returncode }}', '{{ node.dir }}/x', '{{ run.dir }}', "
     "'{{ node.id }}']}}\n"
     "outputs:\n  o: {value: '{{ steps.first.stdout_path }}'}\n")),
    ("unknown-type-expression-as-list", "steps:\n  - {uses: shell, with: {cmd: '{{ deps.sentinel.path }}'}}\n"),
    ("typed-input-template", "steps:\n"
                             "  - {uses: shell, with: {cmd: [echo], timeout_s: '{{ inputs.n }}', "
                             "parse: '{{ inputs.type }}'}}\n"),
    ("mapping-methods", "steps:\n"
                        "  - {uses: shell, with: {cmd: [echo, '{{ inputs.items() | list }}', "
                        "'{{ inputs[\"type\"] }}']}}\n"),
    ("dep-with-over-inputs", ("  - {tags: [sentinel], as: again, when: 'inputs.n > 5', with: {}}\n"
     "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ variation.device }}', '{{ facts.os.name }}']}}\n")),
]


@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_plan_accepts(case, cli, recipes, bad_recipe) -> None:
    _, body = case
    bad_recipe(body)
    result = cli("plan", "--recipes", recipes.dir, "--tags=a")
    assert result.code == 0, result.err


# -- every shipped recipe still plans -------------------------------------------------------


def _shipped() -> list[tuple[str, list[str], dict[str, str]]]:
    """Each shipped recipe's default query and one per variation, required inputs filled."""
    from cmx_core.run.engine import open_session

    queries = []
    for recipe in open_session().catalog.recipes.values():
        inputs = {n: ("/tmp" if s.type == "path" else "1") for n, s in recipe.inputs.items() if s.required}
        queries.append((recipe.name, list(recipe.tags), inputs))
        for var in recipe.variations.values():
            member = f"{var.stem}.1" if var.parametric else var.name
            queries.append((f"{recipe.name}[{member}]", [*recipe.tags, member], inputs))
    return sorted(queries)


def test_every_shipped_recipe_passes_the_plan_checks() -> None:
    from cmx_core.run.engine import plan

    facts = Path(__file__).resolve().parents[1] / "examples" / "facts" / "h100-sxm-8x.json"
    planned, refused = set(), {}
    shipped = _shipped()
    assert len(shipped) >= 10
    for name, tags, inputs in shipped:
        for facts_file in (None, facts if facts.exists() else None):
            try:
                plan(tags, inputs, facts_file=facts_file)
            except PlanCheckError as exc:
                pytest.fail(f"{name}: {exc}")
            except CmxError as exc:  # an unmet requirement, a conflicting variation
                refused[name] = str(exc)
            else:
                planned.add(name)
    assert len(planned) >= len(shipped) * 3 // 4, refused


def test_every_shipped_step_matches_its_schema() -> None:
    from cmx_core.resolve.step_params import check_step_params
    from cmx_core.run.engine import open_session

    session = open_session()
    checked = 0
    for recipe in session.catalog.recipes.values():
        for step in recipe.steps:
            step_type = session.registry.steps.get(step.uses)
            if step_type is not None:
                check_step_params(recipe, step, step_type)
                checked += 1
    assert checked >= 10


# -- the tokenizer agrees with Jinja2 ---------------------------------------------------------

SAMPLES = [
    "{{ inputs.n }}", "a-{{ node.dir }}/x", "{{ inputs.n if inputs.n > 0 else none }}",
    "{{ inputs.model_path or deps.model.path }}", "{{ 'sorted' if variation.algo == 'builtin' else 'heap' }}",
    "{{ inputs.q or (460 if inputs.scenario == 'Server' else 1) }}", "{{ 1.5 + inputs.f }}",
    "{{ inputs.a}}{{inputs.b }}", "{{ not inputs.flag }}", "{{ 'x' in variations }}", "{{ -1 }}",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_fast_path_agrees_with_jinja(text: str) -> None:
    fast = template_info(text)
    assert fast.refs == _jinja_info(text, fast.native).refs


def test_shipped_templates_fast_path_agrees_with_jinja() -> None:
    from cmx_core.datautil import iter_strings
    from cmx_core.recipes.template import is_template
    from cmx_core.run.engine import open_session

    texts = set()
    for recipe in open_session().catalog.recipes.values():
        values = [s.with_ for s in recipe.steps] + [d.with_ for d in recipe.deps] + \
                 [o.value for o in recipe.outputs.values() if o.value]
        texts.update(t for v in values for t in iter_strings(v) if is_template(t))
    assert texts
    for text in texts:
        fast = template_info(text)
        assert set(fast.refs) == set(_jinja_info(text, fast.native).refs), text
