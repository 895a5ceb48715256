"""The accelerator tag table: every documented example classifies to its tag, the README
documents every tag, overrides parse, typos are one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_core.errors import CmxError
from cmx_detect.tags import (
    RULES,
    accelerator_list,
    check_tag,
    classify,
    known_tags,
    override_accelerators,
    parse_override,
)

README = Path(__file__).resolve().parents[1] / "README.md"
GIB = 1 << 30


@pytest.mark.parametrize(("rule", "example"), [(r, e) for r in RULES for e in r.examples])
def test_every_example_gets_its_rule_tag(rule, example: str) -> None:
    assert classify(example)[0] == rule.tag


@pytest.mark.parametrize(("name", "memory", "expected"), [
    ("NVIDIA H100 80GB HBM3", 81559 * 2**20, ["h100", "h100-sxm"]),
    ("NVIDIA H100 PCIe", 81559 * 2**20, ["h100", "h100-pcie"]),
    ("NVIDIA H100 NVL", 95830 * 2**20, ["h100", "h100-nvl"]),
    ("NVIDIA H200", None, ["h200", "h200-sxm"]),
    ("NVIDIA H200 NVL", None, ["h200", "h200-nvl"]),
    ("NVIDIA GH200 480GB", None, ["gh200"]),
    ("NVIDIA B200", None, ["b200"]),
    ("NVIDIA A100-SXM4-80GB", None, ["a100", "a100-80gb", "a100-sxm"]),
    ("NVIDIA A100-PCIE-40GB", None, ["a100", "a100-40gb", "a100-pcie"]),
    ("NVIDIA A100 80GB PCIe", 80 * GIB, ["a100", "a100-80gb", "a100-pcie"]),
    ("NVIDIA A100-SXM4", 40 * GIB, ["a100", "a100-40gb", "a100-sxm"]),   # memory decides
    ("NVIDIA A100-SXM4", 80 * GIB, ["a100", "a100-80gb", "a100-sxm"]),
    ("NVIDIA A10", None, ["a10"]),
    ("NVIDIA A10G", None, ["a10g"]),
    ("NVIDIA L4", None, ["l4"]),
    ("NVIDIA L40S", None, ["l40s"]),
    ("NVIDIA L40", None, ["l40"]),
    ("Tesla T4", None, ["t4"]),
    ("Tesla V100-SXM2-16GB", None, ["v100", "v100-16gb", "v100-sxm"]),
    ("Tesla V100S-PCIE-32GB", None, ["v100", "v100-32gb", "v100-pcie"]),
    ("AMD Instinct MI250X", None, ["mi250", "mi250x"]),
    ("AMD Instinct MI300X OAM", None, ["mi300x"]),
    ("NVIDIA GeForce RTX 4090", None, []),
])
def test_classify(name: str, memory: int | None, expected: list[str]) -> None:
    assert classify(name, memory) == expected


def test_required_tags_are_in_the_table() -> None:
    required = {"h100", "h100-sxm", "h100-pcie", "h100-nvl", "h200", "gh200", "b200", "a100", "a100-40gb",
                "a100-80gb", "a10", "a10g", "l4", "l40s", "t4", "v100", "mi250", "mi300x"}
    assert required <= set(known_tags())


def test_readme_documents_every_tag() -> None:
    text = README.read_text()
    missing = [t for t in known_tags() if f"`{t}`" not in text]
    assert missing == []


def test_accelerator_list_counts_devices() -> None:
    assert accelerator_list([["h100", "h100-sxm"]] * 8) == ["h100", "h100-sxm", "8xh100"]
    assert accelerator_list([[], ["l4"]]) == ["l4", "1xl4"]
    assert accelerator_list([]) == []


def test_overrides() -> None:
    assert override_accelerators(parse_override("8xh100")) == ["h100", "8xh100"]
    assert override_accelerators(parse_override("H100-SXM")) == ["h100", "h100-sxm", "1xh100"]
    assert override_accelerators(parse_override("")) == []
    assert override_accelerators(parse_override("2xa100-80gb")) == ["a100", "a100-80gb", "2xa100"]


def test_unknown_tag_is_a_one_line_error() -> None:
    with pytest.raises(CmxError) as err:
        check_tag("h10", "recipe llama.yaml: requires.accelerator")
    message = str(err.value)
    assert message.startswith(
        "recipe llama.yaml: requires.accelerator: unknown accelerator tag 'h10'; known tags: a10,")
    assert "\n" not in message
    assert check_tag("8xH100", "x") == "8xh100"
