"""apt pinned from the recorded ``apt.lock``: the pins are part of the tag, a rebuild over the same
inputs installs the same apt content, and a build whose apt content differs from the lock is
refused (real builds on the test engine)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cmx_docker import aptlock, aptpins, templates
from cmx_docker.build import ensure_image
from cmx_docker.context import image_spec
from cmx_docker.digests import DigestMemo
from cmx_docker.engine import sdk_client
from cmx_docker.errors import BuildFailed, TemplateError

CONTAINERS = Path(__file__).resolve().parents[3] / "containers"


def _copy_python(template_dir: Path, name: str) -> Path:
    """The shipped python template (and the shared snippets) under ``name`` in template_dir."""
    shutil.copytree(CONTAINERS / templates.SHARED, template_dir / templates.SHARED, dirs_exist_ok=True)
    target = template_dir / name
    shutil.copytree(CONTAINERS / "python", target)
    return target


def _apt_only(template_dir: Path, name: str) -> Path:
    """A template with just the shared pinned-apt step and the python template's lock (no cmx:
    no wheels to build, so the apt step is all the build does)."""
    target = _copy_python(template_dir, name)
    (target / "Dockerfile.j2").write_text('FROM {{ base }}\n{% include "_apt.j2" %}\n')
    (target / templates.TEMPLATE_FILE).write_text("base: {local: cmx-base:bookworm-minbase}\ninstall_cmx: false\n"
                                                  "params: {apt_packages: []}\n")
    return target


def _edit_lock(folder: Path, drop: str | None = None, version: tuple[str, str] | None = None) -> None:
    lock = folder / aptpins.APT_LOCK
    lines = []
    for line in lock.read_text().splitlines():
        if drop and line.startswith(f"{drop}="):
            continue
        if version and line.startswith(f"{version[0]}="):
            line = f"{version[0]}={version[1]}"
        lines.append(line)
    lock.write_text("\n".join(lines) + "\n")


def _installed(engine: object, image: str) -> list[str]:
    client = sdk_client(engine)  # type: ignore[arg-type]
    try:
        out = client.containers.run(image, ["cat", "/etc/cmx-apt-installed.txt"], network_mode="none", remove=True)
    finally:
        client.close()
    return out.decode().split()


def test_every_shipped_template_pins_what_it_installs_and_names_no_mirror() -> None:
    for name in templates.available():
        template = templates.load(name)
        if not template.install_cmx:
            continue
        assert template.apt is not None, f"{name} has no apt.lock"
        aptpins.check_covers(template.apt, aptpins.requested(template.params.get("apt_packages")))
        text = template.apt.path.read_text()
        assert "://" not in text and not re.search(r"\b[a-z0-9-]+\.(org|com|net)\b", text), name
        assert "# list bookworm-security:" in text and "# list bookworm-updates:" in text, name


def test_a_bad_lock_line_names_the_file_and_line(tmp_path: Path) -> None:
    lock = tmp_path / "t" / aptpins.APT_LOCK
    lock.parent.mkdir()
    lock.write_text("# header\npython3=3.11.2-1+b1\npython3 3.11\n")
    with pytest.raises(TemplateError, match=r"apt\.lock:3: 'python3 3\.11' is not a pin; write NAME=VERSION"):
        aptpins.read_lock(lock)
    lock.write_text("python3=1\npython3=2\n")
    with pytest.raises(TemplateError, match=r"apt\.lock:2: python3 is pinned twice"):
        aptpins.read_lock(lock)
    lock.write_text("# nothing\n")
    with pytest.raises(TemplateError, match=r"pins nothing; record it: python -m cmx_docker\.aptlock t"):
        aptpins.read_lock(lock)


def test_the_apt_pins_are_part_of_the_tag(home: Path, template_dir: Path) -> None:
    folder = _copy_python(template_dir, "aptpins")
    before = image_spec("aptpins", None, DigestMemo(None))
    assert "'python3=" in before.dockerfile and "'python3-venv=" in before.dockerfile
    pin = next(p for p in templates.load("aptpins").apt.pins if p.name == "readline-common")  # type: ignore[union-attr]
    _edit_lock(folder, version=("readline-common", pin.version + "+cmx1"))
    changed = image_spec("aptpins", None, DigestMemo(None))
    assert changed.tag != before.tag and f"'readline-common={pin.version}+cmx1'" in changed.dockerfile
    _edit_lock(folder, version=("readline-common", pin.version))
    assert image_spec("aptpins", None, DigestMemo(None)).tag == before.tag  # back to the same content


def test_a_lock_that_misses_a_requested_package_or_is_absent_is_refused(home: Path, template_dir: Path) -> None:
    folder = _copy_python(template_dir, "aptmiss")
    meta = folder / templates.TEMPLATE_FILE
    meta.write_text(meta.read_text().replace("apt_packages: []", "apt_packages: [libgomp1]"))
    with pytest.raises(TemplateError, match=r"apt\.lock: pins no version of libgomp1 .*python -m cmx_docker\.aptlock "
                                            r"aptmiss"):
        image_spec("aptmiss", None, DigestMemo(None))
    (folder / aptpins.APT_LOCK).unlink()
    with pytest.raises(TemplateError, match=r"apt\.lock: missing; the template's Dockerfile installs apt packages, "
                                            r"which must be pinned: record the lock with"):
        image_spec("aptmiss", None, DigestMemo(None))


def test_a_rebuild_over_the_same_inputs_gives_the_same_tag_and_apt_content(engine, base_image,  # type: ignore[no-untyped-def]
                                                                            template_dir: Path) -> None:
    """The shared apt step alone (no cmx wheels, whose sources may change between two builds of a
    working tree), built, then built again without the layer cache."""
    _apt_only(template_dir, "aptsame")
    first = ensure_image("aptsame", endpoint=engine)
    again = ensure_image("aptsame", endpoint=engine, rebuild=True)  # no layer cache: apt runs again
    assert again.built and again.tag == first.tag and again.content_digest == first.content_digest
    pinned = sorted(str(p) for p in templates.load("aptsame").apt.pins)  # type: ignore[union-attr]
    assert _installed(engine, first.image_id) == pinned
    assert _installed(engine, again.image_id) == pinned  # the rebuilt image, now under the same tag


def test_apt_content_the_lock_does_not_pin_is_refused(engine, base_image, template_dir: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _apt_only(template_dir, "aptdrift")
    _edit_lock(folder, drop="readline-common")  # apt still installs it, as a dependency
    with pytest.raises(BuildFailed, match=r"apt content differs from apt\.lock: installed but not pinned: "
                                          r"readline-common=\S+ ; pinned but not installed: ;"):
        ensure_image("aptdrift", endpoint=engine)
    tag = image_spec("aptdrift", engine, DigestMemo(None)).tag
    from cmx_docker.engine import inspect_image

    assert inspect_image(engine, tag) is None  # nothing was tagged


def test_a_version_the_mirror_no_longer_has_is_refused_with_the_fix(engine, base_image, template_dir: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _apt_only(template_dir, "aptgone")
    _edit_lock(folder, version=("readline-common", "0.0-cmx-gone"))
    with pytest.raises(BuildFailed, match=r"the mirror no longer has a version .*apt\.lock pins \(Version "
                                          r"'0\.0-cmx-gone' for 'readline-common' was not found\): record the lock "
                                          r"again with python -m cmx_docker\.aptlock aptgone"):
        ensure_image("aptgone", endpoint=engine)


def test_the_recorder_pins_the_closure_of_what_the_template_asks(engine, base_image, template_dir: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _copy_python(template_dir, "aptrec")
    (folder / aptpins.APT_LOCK).unlink()
    path, body = aptlock.record("aptrec")
    lock = aptpins.read_lock(path)
    assert {"python3", "python3-venv", "python3.11", "libpython3.11-stdlib"} <= lock.names()
    assert "# list bookworm-security:" in body and "://" not in body
