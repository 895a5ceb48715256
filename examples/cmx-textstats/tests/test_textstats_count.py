"""Unit tests of the textstats.count step."""

import pytest

from cmx_core.errors import StepFailed
from cmx_textstats.count import count_text, run, top


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", {"lines": 0, "words": 0, "bytes": 0}),
        (b"a b c", {"lines": 1, "words": 3, "bytes": 5}),
        (b"a\n\nb\n", {"lines": 3, "words": 2, "bytes": 5}),
        ("h\u00e9 \u2603\n".encode(), {"lines": 1, "words": 2, "bytes": 8}),
    ],
)
def test_counts(data, expected):
    assert count_text(data) == expected


def test_step_reports_metrics_with_units(cmx_step_context, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("x y\n", encoding="utf-8")
    out = run(cmx_step_context(params={"path": str(text)}))
    assert out.outputs["words"] == 2
    assert {m.unit for m in out.result.metrics.values()} == {"lines", "words", "bytes"}
    assert out.result.benchmark["primary_metric"] == "words"


def test_missing_file_is_one_line(cmx_step_context, tmp_path):
    with pytest.raises(StepFailed, match=r"cannot read .*nope.txt: No such file"):
        run(cmx_step_context(params={"path": str(tmp_path / "nope.txt")}))


def test_unknown_encoding(cmx_step_context, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("x", encoding="utf-8")
    with pytest.raises(StepFailed, match="unknown encoding 'klingon'"):
        run(cmx_step_context(params={"path": str(text), "encoding": "klingon"}))


def test_path_is_required(cmx_step_context):
    with pytest.raises(StepFailed, match="needs 'path'"):
        run(cmx_step_context(params={}))


def test_top_ranks_by_count_then_word(cmx_step_context, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("b a B c a\n", encoding="utf-8")
    out = top(cmx_step_context(params={"path": str(text), "n": 2}))
    assert out.outputs["top"] == [{"word": "a", "count": 2}, {"word": "b", "count": 2}]
