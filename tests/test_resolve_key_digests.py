"""The planner hashes each distinct small key part once per plan; the keys stay exactly the
sha256 of canonical JSON (``datautil.digest``) that they always were, and values that JSON
tells apart (``1``, ``true``, ``"1"``, ``0.0`` and ``-0.0``) never share a memo entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cmx_core.datautil import digest
from cmx_core.plan.planner import _Digests, _memo_key, canonical_digest
from cmx_core.run import engine

RECIPES = {
    "top": "name: top\ntags: [top]\nsummary: t\ninputs:\n  n: {type: integer, default: 3}\n"
           "  x: {type: number, default: 1.5}\n  s: {type: string, default: hi}\n"
           "variations:\n  cpu: {group: device, default: true}\n  gpu: {group: device}\n"
           "deps:\n  - {tags: [mid], as: a, with: {n: 1}}\n  - {tags: [mid], as: b, with: {n: 2}}\n"
           "steps:\n  - {uses: shell, with: {cmd: [echo, '{{ inputs.n }}'], env_allow: [HOME]}}\n",
    "mid": "name: mid\ntags: [mid]\nsummary: m\ninputs:\n  n: {type: integer, default: 0}\n"
           "steps:\n  - {uses: shell, with: {cmd: [echo, mid]}}\n",
}

VALUES: list[Any] = [
    {}, {"a": 1}, {"a": True}, {"a": "1"}, {"a": None}, {"a": 1.0}, {"a": 0.0}, {"a": -0.0},
    {"b": 1, "a": 2}, {"a": 2, "b": 1}, {"a": [1, 2]}, {"a": {"b": 1}}, 1, True, "1", None, 1.0,
    "x" * 80, {"p": Path("/tmp/x")}, {"k": (1, 2)}, [1, "a"], {str(i): i for i in range(12)},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_canonical_digest_is_datautil_digest(value: Any) -> None:
    assert canonical_digest(value) == digest(value)
    memo = _Digests()
    assert memo.of(value) == digest(value) and memo.of(value) == digest(value)


def test_values_json_tells_apart_get_distinct_memo_entries() -> None:
    memo = _Digests()
    for value in VALUES:  # all in one memo, in order: a wrong shared entry would show here
        assert memo.of(value) == digest(value), value
    keys = [_memo_key(v) for v in ({"a": 1}, {"a": True}, {"a": "1"}, 1, True, "1")]
    assert len(set(keys)) == len(keys)
    assert _memo_key({"a": 0.0}) is None and _memo_key(1.0) is None  # floats are never memoised


def test_plan_keys_are_the_canonical_json_digests(tmp_path: Path) -> None:
    for name, text in RECIPES.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    plan = engine.plan("top", recipes_dirs=[tmp_path])
    assert [n.id for n in plan.nodes] == ["mid", "mid[]", "top"]
    for node in plan.nodes:
        assert dict(node.key_parts) == {k: digest(v) for k, v in node.key_values.items()}
        assert node.cache_key == digest(dict(node.key_parts))[:32]
    assert plan.nodes[0].cache_key != plan.nodes[1].cache_key
