"""Template locks: parsing and checks (no engine), the vllm image installing exactly its
committed lock, and pip proving that lock consistent and complete for the image's platform."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx_docker import context, lockfile, lockgen, templates
from cmx_docker.digests import DigestMemo
from cmx_docker.errors import TemplateError

VLLM_LOCK = Path(__file__).resolve().parents[3] / "containers" / "vllm" / "requirements.lock"
META = "base: {local: cmx-base:bookworm-minbase}\nplugins: [detect]\npackages: [tiny==1.0]\n"


def _memo(tmp_path: Path) -> DigestMemo:
    return DigestMemo(tmp_path / "digests.json")


def test_lock_lines_must_be_pinned_once(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("# header\nFoo_Bar==1.0\nbaz==2  # why\n")
    assert [str(p) for p in lockfile.read_pins(lock)] == ["baz==2", "foo-bar==1.0"]
    lock.write_text("foo==1\nbaz>=2\n")
    with pytest.raises(TemplateError, match=r"requirements.lock:2: 'baz>=2' is not NAME==VERSION"):
        lockfile.read_pins(lock)
    lock.write_text("foo==1\nFOO==2\n")
    with pytest.raises(TemplateError, match="foo is pinned twice"):
        lockfile.read_pins(lock)
    with pytest.raises(TemplateError, match="lock file missing; generate it with"):
        lockfile.read_pins(tmp_path / "absent.lock")


def test_bad_lock_sections_name_the_key(make_template, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    make_template("locked", "FROM {{ base }}\n", META + "lock: {file: r.lock, pins: x}\n")
    with pytest.raises(TemplateError, match=r"lock: unknown key\(s\) \['pins'\]"):
        templates.load("locked")
    make_template("locked2", "FROM {{ base }}\n", META + "lock: [r.lock]\n")
    with pytest.raises(TemplateError, match="lock: give a mapping with 'file'"):
        templates.load("locked2")


def test_a_lock_must_hold_the_packages_and_what_cmx_needs(make_template, home: Path,  # type: ignore[no-untyped-def]
                                                          tmp_path: Path) -> None:
    target = make_template("locked", "FROM {{ base }}\n", META + "lock: requirements.lock\n",
                           {"requirements.lock": "tiny==1.0\n"})
    with pytest.raises(TemplateError, match=r"the cmx packages need .*nvidia-ml-py.*which the lock lacks"):
        context.image_spec("locked", None, _memo(tmp_path))
    (target / "requirements.lock").write_text("tiny==1.1\n")
    with pytest.raises(TemplateError, match=r"packages pins tiny==1\.0 but the lock has tiny==1\.1"):
        context.image_spec("locked", None, _memo(tmp_path))


def test_a_complete_lock_is_installed_exactly(make_template, home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = make_template("locked", "FROM {{ base }}\n", META + "lock: requirements.lock\n")
    cmx_deps = lockfile.requirement_names(lockgen.cmx_lines(templates.load("locked")))
    assert "nvidia-ml-py" in cmx_deps and "pluggy" in cmx_deps  # cmx-detect's and cmx-core's
    pins = sorted({*(f"{lockfile.canonical(n)}==9.9" for n in cmx_deps), "tiny==1.0", "extra-dep==0.1"})
    (target / "requirements.lock").write_text("\n".join(pins) + "\n")
    spec = context.image_spec("locked", None, _memo(tmp_path))
    assert spec.floating == () and list(spec.pinned) == pins
    lines = spec.requirements.splitlines()
    assert lines[0] == "cmx-core==0.1.0" and lines[len(spec.packages):] == pins


def test_the_vllm_image_installs_exactly_its_committed_lock(home: Path, tmp_path: Path) -> None:
    template = templates.load("vllm")
    assert template.lock is not None and template.lock.file == VLLM_LOCK
    pins = {str(p) for p in lockfile.read_pins(VLLM_LOCK)}
    assert {"vllm==0.10.1.1", "numba==0.61.2", "torch==2.7.1"} <= pins
    numpy = next(p for p in pins if p.startswith("numpy=="))
    assert tuple(int(x) for x in numpy.split("==")[1].split(".")[:2]) < (2, 3)  # numba 0.61.2's bound
    spec = context.image_spec("vllm", None, _memo(tmp_path))
    assert spec.floating == ()  # nothing fetched with floating dependencies
    own = {f"{p.dist}=={p.version}" for p in spec.packages}
    assert set(spec.requirements.splitlines()) == own | pins
    assert "build-essential" in spec.dockerfile and "python3-dev" in spec.dockerfile  # Triton's JIT
    assert "HF_HUB_OFFLINE=1" in spec.dockerfile


@pytest.mark.slow
def test_the_vllm_lock_resolves_to_exactly_itself_on_the_image_platform() -> None:
    """pip --dry-run --report for Linux x86_64 / CPython 3.11 / wheels, given every pin and the
    cmx packages' requirements: an inconsistent lock fails to resolve, an incomplete one
    makes pip add a distribution; either fails here. Needs the package index (via pip)."""
    pins, resolved = lockgen.verify("vllm")
    assert len(pins) > 100
    assert set(map(str, resolved)) - set(map(str, pins)) == set(), "pip added distributions the lock lacks"
    assert set(map(str, pins)) - set(map(str, resolved)) == set(), "the lock holds distributions nothing needs"
