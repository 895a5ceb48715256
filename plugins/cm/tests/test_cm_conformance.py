"""cmx-core's conformance kit on cmx-cm through its installed entry point; the ``cm.script``
sample runs a one-file CM script built in the test's temporary directory."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from cm_helpers import write_script

from cmx_core.testing import PluginConformance, StepSample


class TestCmConformance(PluginConformance):
    plugin = "cm"
    step_samples: ClassVar[Mapping[str, StepSample]] = {
        "cm.script": StepSample(params={}, expect_outputs=("new_env", "new_state", "version", "script")),
    }

    def step_sample(self, step: str, tmp_path: Path) -> StepSample:
        directory = write_script(tmp_path / "c", "hello", "alias: hello\ntags: [hello]\nnew_env_keys: [CM_HELLO]\n",
                                 run_sh='echo "CM_HELLO=$CM_GREETING" > tmp-run-env.out\n')
        params = {"script_dir": str(directory), "flavor": "cm", "env_inputs": {"greeting": "CM_GREETING"},
                  "new_env_keys": ["CM_HELLO"], "deps": []}
        return StepSample(params=params, inputs={"greeting": "hi"},
                          expect_outputs=("new_env", "new_state", "version", "script"))

    def check_step_output(self, step: str, output: Any, sample: StepSample) -> None:
        assert output.outputs["new_env"] == {"CM_HELLO": "hi"}
        assert output.outputs["cm_hello"] == "hi"
