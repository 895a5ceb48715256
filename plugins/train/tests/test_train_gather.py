"""The files a run on several nodes leaves on a node other than 0 reach node 0 through a
TCPStore (:mod:`cmx_train.gather`): what node 0 lacks is waited for and written beside its
own; what never comes fails in one line naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_core.errors import StepFailed
from cmx_train.gather import PORT_OFFSET, FileHub, send_files
from cmx_train.launch import free_port


def test_node_0_gets_what_it_lacks_from_the_other_nodes(tmp_path: Path) -> None:
    port = free_port() - PORT_OFFSET
    hub = FileHub("127.0.0.1", port, wait_s=30)
    node0, node1 = tmp_path / "node0", tmp_path / "node1"
    (node0 / "reports").mkdir(parents=True)
    (node1 / "reports").mkdir(parents=True)
    (node0 / "reports" / "rank-0.jsonl").write_text('{"samples": 1}\n')
    (node1 / "reports" / "rank-1.jsonl").write_text('{"samples": 2}\n')
    (node1 / "mlperf_log.txt").write_text(":::MLLOG {}\n")
    names = ["reports/rank-0.jsonl", "reports/rank-1.jsonl", "mlperf_log.txt"]
    assert send_files("127.0.0.1", port, node1, names, 30) == ["reports/rank-1.jsonl", "mlperf_log.txt"]
    hub.collect(node0, names)
    assert (node0 / "reports" / "rank-1.jsonl").read_text() == '{"samples": 2}\n'
    assert (node0 / "mlperf_log.txt").read_text() == ":::MLLOG {}\n"
    assert (node0 / "reports" / "rank-0.jsonl").read_text() == '{"samples": 1}\n'  # its own stays


def test_a_file_no_node_sends_is_one_line_naming_it(tmp_path: Path) -> None:
    hub = FileHub("127.0.0.1", free_port() - PORT_OFFSET, wait_s=1)
    with pytest.raises(StepFailed) as err:
        hub.collect(tmp_path, ["mlperf_log.txt"])
    assert str(err.value).startswith("train: no node sent mlperf_log.txt to node 0 within 1 s")
    assert "\\n" not in str(err.value)
