"""The openai-http SUT against the real loopback server serving the tiny Llama: streaming,
token counts, and every failure mode (HTTP 500, malformed JSON, dropped stream, refused
connection, timeout, a launch command that dies), directly and through LoadGen."""

from __future__ import annotations

import http.client
import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from cmx_core.errors import StepFailed, UsageError
from cmx_mlperf.harness.step import run_step
from cmx_mlperf.llm.dataset import SAMPLES
from cmx_mlperf.llm.errors import SampleErrors, ServerUnreachable
from cmx_mlperf.llm.http_sut import OpenAIHttpSUT, make
from cmx_mlperf.llm.openai_client import Endpoint
from cmx_mlperf.llm.test_server import Fault, LoopbackServer
from cmx_mlperf.llm.testing import RecordingCompleter
from cmx_mlperf.llm.tokens import ids_from_bytes
from cmx_mlperf.sut import AccuracyEntry


def _run(sut: OpenAIHttpSUT, n: int, timeout_s: float = 120) -> RecordingCompleter:
    rec = RecordingCompleter(expected=n)
    sut.start(rec)
    try:
        sut.issue(list(range(n)), list(range(n)))
        assert rec.wait(timeout_s), "a sample was never completed"
    finally:
        sut.stop()
    assert rec.order_problems() == []
    assert sorted(rec.completions()) == list(range(n))
    return rec


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    ep = Endpoint.parse(url)
    conn = http.client.HTTPConnection(ep.host, ep.port, timeout=60)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


# -- the loopback server speaks the OpenAI protocol ------------------------------------------


def test_server_streams_sse_chunks_matching_the_plain_completion(server: LoopbackServer) -> None:
    prompt = SAMPLES[2].prompt
    status, raw = _post(server.url, {"model": "tiny-llama", "prompt": prompt, "max_tokens": 7,
                                     "stream": True, "stream_options": {"include_usage": True}})
    assert status == 200
    events = [line[len("data: "):] for line in raw.decode().split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["usage"]["completion_tokens"] == 7
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    status, plain = _post(server.url, {"prompt": prompt, "max_tokens": 7})
    assert status == 200 and json.loads(plain)["choices"][0]["text"] == text
    status, bad = _post(server.url, {"prompt": 3})
    assert status == 400 and b"prompt must be a string" in bad


def test_sut_streams_and_counts_tokens(server: LoopbackServer, tiny_llama: Path) -> None:
    sut = make({"base_url": server.url + "/v1", "max_tokens": 5, "model_dir": str(tiny_llama)})
    rec = _run(sut, 6)
    assert sut.model == "tiny-llama" and sut.errors() == [] and sut.error_count == 0
    for call in rec.completions().values():
        assert call.n_tokens == len(ids_from_bytes(call.data)) == 5  # int32 ids, as the reference SUTs
    _, plain = _post(server.url, {"prompt": SAMPLES[3].prompt, "max_tokens": 5, "min_tokens": 2,
                                  "return_token_ids": True})
    assert ids_from_bytes(rec.completions()[3].data) == json.loads(plain)["choices"][0]["token_ids"]
    metrics = sut.accuracy([AccuracyEntry(i, c.data) for i, c in rec.completions().items()])
    assert metrics["errors"] == 0 and metrics["gen_num"] == 6 and metrics["tokens_per_sample"] == 5


@pytest.mark.parametrize(("mode", "every", "failed", "reason"), [
    ("http500", 2, 6, "HTTP 500"),
    ("bad-json", 3, 4, "malformed JSON chunk"),
    ("drop", 1, 12, "stream dropped before [DONE]"),
])
def test_faults_complete_every_sample_with_an_error_mark(
    faulty: LoopbackServer, mode: str, every: int, failed: int, reason: str
) -> None:
    sut = make({"base_url": faulty.url, "max_tokens": 6, "concurrency": 1,  # serial: fault order is fixed
                "fail_on_errors": False})
    sut.start(RecordingCompleter())  # the model-list check happens before faults are armed
    sut.stop()
    faulty.set_fault(Fault(mode, every))
    rec = _run(sut, 12)
    assert sut.errors() == [f"{failed} of 12 samples: {reason}"]
    marked = [c for c in rec.completions().values() if c.data == b""]  # the failure mark: no ids
    assert len(marked) == failed and all(c.n_tokens == 0 for c in marked)
    assert all(len(ids_from_bytes(c.data)) == c.n_tokens > 0 for c in rec.completions().values() if c.data)
    metrics = sut.accuracy([AccuracyEntry(i, c.data) for i, c in rec.completions().items()])
    assert metrics["errors"] == failed and metrics["gen_num"] == 12 - failed


def test_fail_on_errors_makes_stop_raise(faulty: LoopbackServer) -> None:
    sut = make({"base_url": faulty.url, "max_tokens": 4, "concurrency": 1, "fail_on_errors": True})
    rec = RecordingCompleter(expected=4)
    sut.start(rec)
    faulty.set_fault(Fault("drop", 2))
    sut.issue([0, 1, 2, 3], [0, 1, 2, 3])
    assert rec.wait(60) and rec.order_problems() == []
    with pytest.raises(SampleErrors) as exc:
        sut.stop()
    assert str(exc.value) == "sut openai-http: samples failed: 2 of 4 samples: stream dropped before [DONE]"
    assert isinstance(exc.value, StepFailed)


def test_failures_are_counted_not_raised_by_default(faulty: LoopbackServer) -> None:
    sut = make({"base_url": faulty.url, "max_tokens": 4, "concurrency": 1})
    rec = RecordingCompleter(expected=4)
    sut.start(rec)
    faulty.set_fault(Fault("http500", 2))
    sut.issue([0, 1, 2, 3], [0, 1, 2, 3])
    assert rec.wait(60) and rec.order_problems() == []
    sut.stop()  # does not raise: the harness reads errors() after the test
    assert sut.errors() == ["2 of 4 samples: HTTP 500"] and sut.error_count == 2


def test_unreachable_server_is_a_one_line_error_at_start() -> None:
    sut = make({"base_url": f"http://127.0.0.1:{_free_port()}"})
    with pytest.raises(ServerUnreachable) as exc:
        sut.start(RecordingCompleter())
    assert "connection refused" in str(exc.value) and "\n" not in str(exc.value)


def test_server_gone_mid_run_counts_refused_connections(tiny_llama: Path) -> None:
    with LoopbackServer(tiny_llama) as srv:
        sut = make({"base_url": srv.url, "max_tokens": 4, "fail_on_errors": False})
        rec = RecordingCompleter(expected=3)
        sut.start(rec)
    try:
        sut.issue([7, 8, 9], [0, 1, 2])
        assert rec.wait(60)
    finally:
        sut.stop()
    assert sut.errors() == ["3 of 3 samples: connection refused"]
    assert rec.order_problems() == []


def test_silent_server_times_out() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        sut = make({"base_url": f"http://127.0.0.1:{port}", "model": "m", "check_server": False,
                    "timeout_s": 0.5, "concurrency": 2, "fail_on_errors": False})
        _run(sut, 2, timeout_s=30)
    assert sut.errors() == ["2 of 2 samples: timeout after 0.5 s"]


def test_launch_starts_and_stops_the_server_process(tiny_llama: Path) -> None:
    port = _free_port()
    cmd = [sys.executable, "-m", "cmx_mlperf.llm.test_server", "--model-dir", str(tiny_llama),
           "--port", str(port), "--max-seconds", "300"]
    sut = make({"base_url": f"http://127.0.0.1:{port}", "launch": cmd, "max_tokens": 3, "ready_timeout_s": 120})
    rec = RecordingCompleter(expected=2)
    sut.start(rec)
    process = sut._process
    assert process is not None and process.poll() is None
    try:
        sut.issue([1, 2], [0, 1])
        assert rec.wait(60)
    finally:
        sut.stop()
    assert process.poll() is not None  # stopped by its PID
    assert sut.errors() == []


def test_launch_command_that_exits_is_reported() -> None:
    cmd = [sys.executable, "-m", "cmx_mlperf.llm.test_server", "--model-dir", "/nonexistent-model-dir"]
    sut = make({"base_url": f"http://127.0.0.1:{_free_port()}", "launch": cmd, "ready_timeout_s": 60})
    with pytest.raises(ServerUnreachable, match="exited with code 2 before it was ready"):
        sut.start(RecordingCompleter())


def test_bad_params() -> None:
    with pytest.raises(UsageError, match="not an http"):
        make({"base_url": "ftp://x"})
    with pytest.raises(UsageError, match="unknown sut_params key 'url'"):
        make({"url": "http://127.0.0.1:1"})
    with pytest.raises(UsageError, match="launch must be tuple"):
        make({"launch": "vllm serve x"})
    assert Endpoint.parse("http://h:81/v1/").prefix == "" and Endpoint.parse("http://h/api/v1").prefix == "/api"


# -- through the harness and real LoadGen ------------------------------------------------------


def test_server_scenario_through_loadgen(server: LoopbackServer, cmx_home: Path, cmx_step_context: Any) -> None:
    params = {"sut": "openai-http", "sut_params": {"base_url": server.url, "max_tokens": 6, "concurrency": 8},
              "scenario": "Server", "model_name": "llama3.1-8b", "duration_s": 1, "target_qps": 10,
              "min_query_count": 1, "timeout_s": 300}
    part = run_step(cmx_step_context(params=params)).result
    assert part.status in ("valid", "invalid")
    assert part.metrics["tokens_per_second"].value > 0
    assert 0 < part.metrics["ttft_p99_ns"].value < part.metrics["latency_p99_ns"].value
    assert part.sections["mlperf"]["sut"] == "openai-http"


def test_failing_server_does_not_crash_loadgen(
    faulty: LoopbackServer, cmx_home: Path, cmx_step_context: Any
) -> None:
    faulty.set_fault(Fault("http500", 2))
    sut_params = {"base_url": faulty.url, "max_tokens": 4, "concurrency": 1, "total_sample_count": 10}
    params = {"sut": "openai-http", "sut_params": sut_params, "scenario": "Offline", "mode": "AccuracyOnly",
              "model_name": "llama3.1-8b", "duration_s": 1, "expected_qps": 10, "min_query_count": 1,
              "timeout_s": 300}
    part = run_step(cmx_step_context(params=params)).result  # keeps going and counts them
    accuracy = part.sections["mlperf"]["accuracy"]
    assert accuracy["errors"] == 5 and accuracy["gen_num"] == 5  # every other request failed
    assert part.status == "error" and "sut openai-http: 5 of 10 samples: HTTP 500" in part.invalid_reasons
    assert part.sections["mlperf"]["failed_samples"] == 5
    params["sut_params"] = {**sut_params, "fail_on_errors": True}  # or the run fails with the reason
    with pytest.raises(StepFailed, match="5 of 10 samples: HTTP 500"):
        run_step(cmx_step_context(params=params))


def test_a_client_hanging_up_is_silent_and_other_server_errors_are_one_line(capsys: pytest.CaptureFixture[str]
                                                                           ) -> None:
    from cmx_mlperf.llm.test_server import _Server

    where = ("127.0.0.1", 4711)
    for error in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
        try:
            raise error
        except OSError:
            _Server.handle_error(None, None, where)  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""
    try:
        raise ValueError("bad body")
    except ValueError:
        _Server.handle_error(None, None, where)  # type: ignore[arg-type]
    assert capsys.readouterr().err == "loopback server: a request from 127.0.0.1:4711 failed: ValueError('bad body')\n"
