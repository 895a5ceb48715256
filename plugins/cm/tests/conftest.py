"""Fixtures of cmx-cm's tests: a small hand-written CM/MLC collection built in a temporary
directory, and a runner of the ``cmx`` CLI in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the tests' helper modules, under --import-mode=importlib
from cm_helpers import write_script

CMX = [sys.executable, "-m", "cmx_core"]


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    """Three CM scripts and one MLC script exercising the env contract."""
    root = tmp_path / "collection" / "script"
    write_script(root, "demo-base", """
        alias: demo-base
        uid: 0123456789abcdef
        tags: [demo, base]
        new_env_keys: [CM_DEMO_BASE_*]
        """, customize="""
        from cmind import utils

        def preprocess(i):
            i['env']['CM_DEMO_BASE_PRE'] = 'pre-' + i['os_info']['platform']
            return {'return': 0}

        def postprocess(i):
            r = utils.load_txt(file_name='tmp-out.txt', check_if_exists=True)
            if r['return'] > 0:
                return r
            i['env']['CM_DEMO_BASE_TEXT'] = r['string'].strip()
            return {'return': 0}
        """, run_sh="""
        echo "base-ran" > tmp-out.txt
        echo "CM_DEMO_BASE_FROM_RUN=run-$CM_TMP_CURRENT_SCRIPT_PATH" >> tmp-run-env.out
        """)
    write_script(root, "demo-tool", """
        alias: demo-tool
        uid: fedcba9876543210
        tags: [demo, tool]
        cache: true
        default_env: {CM_DEMO_MODE: slow, CM_DEMO_ASK: 'no'}
        env: {CM_DEMO_FIXED: fixed}
        input_mapping: {label: CM_DEMO_LABEL}
        new_env_keys: [CM_DEMO_TOOL_*, CM_DEMO_ECHO, +PATH]
        new_state_keys: [demo_*]
        deps:
          - tags: demo,base
            names: [base]
        post_deps:
          - tags: demo,base
            enable_if_env: {CM_DEMO_MODE: [never]}
        variations:
          fast: {group: speed, env: {CM_DEMO_MODE: fast}}
          slow: {group: speed, env: {CM_DEMO_MODE: slow}}
          extra: {base: [fast], env: {CM_DEMO_EXTRA: 'yes'}, new_env_keys: [CM_DEMO_EXTRA]}
          size.#: {env: {CM_DEMO_SIZE: '#'}}
          'fast,extra': {env: {CM_DEMO_COMBO: 'yes'}}
        default_variations: {speed: slow}
        """, customize="""
        from cmind import utils

        def preprocess(i):
            env = i['env']
            if env.get('CM_DEMO_ASK') == 'yes':
                input('Continue? ')
            env['CM_DEMO_TOOL_CWD'] = __import__('os').getcwd()
            return {'return': 0}

        def postprocess(i):
            env = i['env']
            env['CM_DEMO_TOOL_MODE'] = env.get('CM_DEMO_MODE', '')
            env['CM_DEMO_TOOL_BASE'] = env.get('CM_DEMO_BASE_TEXT', '')
            env['CM_DEMO_TOOL_LABEL'] = env.get('CM_DEMO_LABEL', '')
            env['CM_DEMO_TOOL_SIZE'] = env.get('CM_DEMO_SIZE', '')
            env['CM_DEMO_TOOL_SECRET'] = 'not-declared'
            env['CM_DEMO_NOT_DECLARED'] = 'x'
            i['state']['demo_seen'] = i['state'].get('demo_from_run', 'none')
            return {'return': 0, 'version': env.get('CM_DEMO_VERSION_OUT', '2.1.0')}
        """, run_sh="""
        echo "CM_DEMO_ECHO=$CM_DEMO_FIXED/$CM_DEMO_MODE" > tmp-run-env.out
        echo '{"demo_from_run": "state-ok"}' > tmp-run-state.json
        """)
    write_script(root, "demo-dynamic", """
        alias: demo-dynamic
        tags: [demo, dynamic]
        prehook_deps:
          - tags: demo,base
            enable_if_env: {CM_SET_AT_RUN_TIME: ['yes']}
        deps:
          - tags: demo,base
            enable_if_env: {CM_HOST_OS_TYPE: [windows]}
        unknown_cm_key: 1
        """)
    write_script(root, "mlc-echo", """
        alias: mlc-echo
        tags: [mlcdemo, echo]
        new_env_keys: [MLC_ECHO_*]
        """, customize="""
        from mlc import utils
        from utils import is_true

        def preprocess(i):
            i['automation'].logger.info('MLC scripts log through automation.logger')
            i['automation'].action_object.logger.debug('and automation.action_object.logger')
            i['env']['MLC_ECHO_TRUE'] = str(is_true('yes'))
            return {'return': 0}
        """, run_sh="""
        echo "MLC_ECHO_SCRIPT=$MLC_TMP_CURRENT_SCRIPT_PATH" > tmp-run-env.out
        """, meta_file="meta.yaml")
    return root


@pytest.fixture
def cmx_cli(cmx_home: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        full = {**os.environ, **(env or {})}
        return subprocess.run([*CMX, *args], capture_output=True, text=True, env=full, cwd=cwd, timeout=timeout,
                              check=False)

    return run
