"""docs/testbed.md held to scripts/services/netbed.sh and the tests: the functions, variables,
defaults, addresses and names it states, the files it names, and CONTRIBUTING.md's link."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "testbed.md").read_text(encoding="utf-8")
SCRIPT = (ROOT / "scripts" / "services" / "netbed.sh").read_text(encoding="utf-8")


def test_the_functions_it_names_are_the_scripts() -> None:
    named = set(re.findall(r"\b(cmx_netbed_[a-z]+)\b", DOC))
    defined = set(re.findall(r"^(cmx_netbed_[a-z]+)\(\)", SCRIPT, re.MULTILINE))
    assert named == defined == {"cmx_netbed_start", "cmx_netbed_exec", "cmx_netbed_stop"}


def test_the_variables_and_defaults_are_the_scripts() -> None:
    with_default = dict(re.findall(r"\$\{(CMX_NETBED_[A-Z_]+):-([^}]+)\}", SCRIPT))
    table = dict(re.findall(r"^\| `(CMX_NETBED_[A-Z_]+)` \| `?([^`|]*?)`? \|", DOC, re.MULTILINE))
    assert {name: default for name, default in table.items() if default != "unset"} == with_default
    assert len(with_default) == 5 and table["CMX_NETBED_OWNER_PID"] == "unset"
    assert 'if [ -n "${CMX_NETBED_OWNER_PID:-}" ]; then _cmx_netbed_watch "$CMX_NETBED_OWNER_PID"; fi' in SCRIPT


def test_the_addresses_names_and_stop_wait_are_the_scripts() -> None:
    subnet = re.search(r'^CMX_NETBED_SUBNET="([0-9.]+)"', SCRIPT, re.MULTILINE)
    assert subnet and f"`{subnet.group(1)}.0/24`" in DOC and f"{subnet.group(1)}.1:6479" in DOC
    assert 'echo "cmxnb-$CMX_NETBED_TOKEN-hub"' in SCRIPT and "`cmxnb-<token>-hub`" in DOC
    assert 'echo "cmxnb-$CMX_NETBED_TOKEN-n$1"' in SCRIPT and "`cmxnb-<token>-nI`" in DOC
    assert "_cmx_netbed_kill 3 $pids" in SCRIPT and "SIGKILL after\n3 s" in DOC
    assert 'hostname "cmxn$i"' in SCRIPT and "NodeName=cmxn$i NodeAddr=$CMX_NETBED_SUBNET.$i" in SCRIPT
    assert "default route" not in SCRIPT.split("_cmx_netbed_network()", 1)[1].split("}", 1)[0]


def _conftest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cmx_root_conftest_testbed", ROOT / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_files_it_names_exist_and_the_group_is_registered() -> None:
    conftest = _conftest()
    for path in re.findall(r"`((?:scripts|tests)/[\w/.]+)`", DOC):
        assert (ROOT / path).exists(), path
    assert conftest.SHARED_SERVICE_GROUPS["tests/netbed/"] == "netbed" and "netbed" in conftest.LONG_FIRST
    assert "`netbed` group" in DOC
    assert "[docs/testbed.md](docs/testbed.md)" in (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
