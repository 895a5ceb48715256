"""Labels on application series (docs/telemetry.md): ``ctx.report(..., labels={"rank": "1"})``
and ``loss{rank="1"} 2.5`` in the metrics file give one series per label value, in
``telemetry.om`` and on ``/metrics``; cmx's own labels cannot be taken, a malformed label
is refused in one line, and a run keeps a bounded number of series."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cmx_core.errors import UsageError
from cmx_core.telemetry import appmetrics, openmetrics
from cmx_core.telemetry.appmetrics import AppSeries, check_labels, parse_name
from cmx_core.telemetry.collector import RunTelemetry, TelemetrySettings


@pytest.mark.parametrize(("word", "parsed"), [
    ("loss", ("loss", ())),
    ('loss{rank="1"}', ("loss", (("rank", "1"),))),
    ('loss{rank="1",gpu="0"}', ("loss", (("gpu", "0"), ("rank", "1")))),
    ("loss{}", ("loss", ())),
])
def test_names_with_labels_parse(word: str, parsed: tuple[str, tuple[tuple[str, str], ...]]) -> None:
    assert parse_name(word) == parsed


@pytest.mark.parametrize(("word", "message"), [
    ("loss{rank=1}", "label 'rank=1' is not name=\"value\""),
    ('loss{Rank="1"}', "is not name=\"value\""),
    ('loss{step="x"}', "label 'step' is cmx's own (run, node, step); pick another"),
    ('loss{a="1",b="2",c="3",d="4",e="5"}', "labels must be a mapping of at most 4 names"),
])
def test_bad_labels_are_one_line_errors(word: str, message: str) -> None:
    with pytest.raises(UsageError, match=None) as caught:
        parse_name(word)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("labels", [{"rank": "a b"}, {"rank": 'x"y'}, {"rank": True}, {"": "1"}, ["rank"]])
def test_report_refuses_labels_it_could_not_write(labels: object) -> None:
    with pytest.raises(UsageError, match=r"^metric loss: label"):
        check_labels("loss", labels)


def test_the_metrics_file_gives_a_series_per_label_value(tmp_path: Path) -> None:
    file = tmp_path / "app_metrics.txt"
    file.write_text('loss{rank="0"} 0.75\nloss{rank="1"} 0.5\nloss 1.0\nloss{node="x"} 9\n'
                    'samples{rank="1"} 8 counter\n')
    series = AppSeries()
    series.watch(file, "train/step0")
    got = {(v.name, v.labels): (v.value, v.kind) for v in series.snapshot()}
    assert got == {("loss", (("rank", "0"),)): (0.75, "gauge"), ("loss", (("rank", "1"),)): (0.5, "gauge"),
                   ("loss", ()): (1.0, "gauge"), ("samples", (("rank", "1"),)): (8.0, "counter")}
    [problem] = series.problems
    assert "line 'loss{node=\"x\"} 9' skipped (metric loss: label 'node' is cmx's own" in problem


def test_a_run_keeps_at_most_max_series(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (appmetrics.MAX_SERIES, appmetrics.MAX_LABELS) == (1000, 4)  # what docs/telemetry.md states
    monkeypatch.setattr(appmetrics, "MAX_SERIES", 3)
    series = AppSeries()
    for rank in range(5):
        series.report("s/t", "loss", 1.0, labels={"rank": str(rank)})
    series.report("s/t", "loss", 2.0, labels={"rank": "0"})  # an existing series still updates
    assert sorted((v.labels, v.value) for v in series.snapshot()) == [
        ((("rank", "0"),), 2.0), ((("rank", "1"),), 1.0), ((("rank", "2"),), 1.0)]
    [problem] = series.problems
    assert problem.startswith("application series: more than 3 in one run; loss of s/t and later new ones dropped")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_labelled_series_on_metrics_and_in_the_file(tmp_path: Path) -> None:
    """Some samples of a family carry ``rank`` and one does not: /metrics serves each with its
    own labels (the one without gets none), and telemetry.om holds the same series."""
    run = RunTelemetry("r-labels", tmp_path, TelemetrySettings(interval_s=3600.0, metrics_port=_free_port()))
    run.start()
    try:
        run.app.report("train/step0", "loss", 0.75, labels={"rank": "0"})
        run.app.report("train/step0", "loss", 0.5, labels={"rank": "1"})
        run.app.report("eval/step0", "loss", 1.0)
        run.sample()
        assert run.exporter is not None
        request = urllib.request.Request(f"http://127.0.0.1:{run.exporter.port}/metrics",
                                         headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
    finally:
        run.stop()
    [family] = [f for f in text_string_to_metric_families(text) if f.name == "cmx_app_loss"]
    # rank="" on the sample without one: to Prometheus an empty label is no label
    served = {(s.labels["step"], s.labels.get("rank") or None): s.value for s in family.samples}
    assert served == {("train/step0", "0"): 0.75, ("train/step0", "1"): 0.5, ("eval/step0", None): 1.0}
    stored = {(dict(k[1])["step"], dict(k[1]).get("rank")): v[-1][1]
              for k, v in openmetrics.read_series(tmp_path / "telemetry.om").items() if k[0] == "cmx_app_loss"}
    assert stored == served


def test_the_progress_line_shows_each_labelled_series() -> None:
    from cmx_core.cli.progress_line import step_line
    from cmx_core.telemetry.appmetrics import AppValue
    from cmx_core.telemetry.live import RunningStep

    step = RunningStep("train", "step0", "train.run", 0.0)
    values = [AppValue("train_loss", step.key, 0.5, "gauge", 1.0, (("rank", "0"),)),
              AppValue("train_loss", step.key, 0.25, "gauge", 1.0, (("rank", "1"),))]
    line = step_line(step, 2.0, values, None)
    assert "train_loss{rank=0} 0.5, train_loss{rank=1} 0.25" in line, line
