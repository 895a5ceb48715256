"""``cmx results compare`` warns when a host run and a container run differ in their Python
or library versions (the image's interpreter is not the host's)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from cmx_core.testing.results import compare_documents, example_document, mlperf_part


def _pair(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    host = example_document(tmp_path / "host", run_id="host-run", part=mlperf_part(1000.0, 40_000_000))
    host["software"]["python"] = "3.11.7"
    host["software"]["packages"] = {"torch": "2.13.0+cpu", "numpy": "2.4.6", "onlyhere": "1.0"}
    host["system"]["container"] = None
    boxed = copy.deepcopy(host)
    boxed["run_id"] = "box-run"
    boxed["system"]["container"] = {"image": "cmx-cpu-torch:4d4b254bb188ea34cd6a7f03", "digest": None,
                                    "runtime": "docker 20.10"}
    return host, boxed


def test_a_container_run_with_another_python_is_warned_about(tmp_path: Path) -> None:
    host, boxed = _pair(tmp_path)
    boxed["software"]["python"] = "3.11.2"
    boxed["software"]["packages"] = {"torch": "2.13.0+cpu", "numpy": "2.3.0"}
    (warning,) = [w for w in compare_documents([host, boxed]).warnings if "container" in w]
    assert warning.startswith("run box-run ran in container cmx-cpu-torch:4d4b254bb188ea34cd6a7f03, the baseline "
                              "on the host, with different software (python 3.11.7 vs 3.11.2; numpy 2.4.6 vs 2.3.0)")
    assert "onlyhere" not in warning and "torch 2" not in warning  # only what differs, in both
    assert warning in compare_documents([host, boxed]).to_json()["warnings"]


def test_no_warning_when_the_software_matches_or_both_ran_alike(tmp_path: Path) -> None:
    host, boxed = _pair(tmp_path)
    assert not [w for w in compare_documents([host, boxed]).warnings if "container" in w]
    other = copy.deepcopy(host)
    other["run_id"] = "host-2"
    other["software"]["python"] = "3.12.1"
    assert not [w for w in compare_documents([host, other]).warnings if "container" in w]
