"""cmx_core.sandbox.tarsafe: archives unpack through tarfile's PEP 706 filters, and on a Python whose
tarfile lacks them (Debian 12's 3.11.2, the interpreter an unprivileged user has there) the
fallback refuses and changes the same members. Each case runs through the fallback, and
through tarfile's own filters where this Python has them, and the two must agree. (Named
test_sandbox_* so that scripts/test-as-user.sh runs it under the system Python too.)"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmx_core.sandbox import tarsafe


def _info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    return info


def _tar(*members: tarfile.TarInfo) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info in members:
            data = f"data of {info.name}".encode() if info.isreg() else b""
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    buffer.seek(0)
    return buffer


IMPLEMENTATIONS = ["fallback"] + (["native"] if hasattr(tarfile, "data_filter") else [])


@pytest.fixture(params=IMPLEMENTATIONS)
def native(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    monkeypatch.setattr(tarsafe, "NATIVE", request.param == "native")
    yield request.param == "native"


def _unpack(dest: Path, keep: tarsafe.Filter, *members: tarfile.TarInfo) -> None:
    with tarfile.open(fileobj=_tar(*members), mode="r|") as tar:
        tarsafe.extract_all(tar, dest, keep)


def test_this_python_uses_the_fallback_exactly_when_tarfile_lacks_the_filters() -> None:
    assert tarsafe.NATIVE == hasattr(tarfile, "data_filter") == hasattr(tarfile, "tar_filter")


@pytest.mark.parametrize("members", [
    [_info("../outside")],
    [_info("a/../../outside")],
    [_info("escape", tarfile.SYMTYPE, "/tmp"), _info("escape/planted")],
    [_info("up", tarfile.SYMTYPE, "../.."), _info("up/planted")],
], ids=["dotdot", "nested-dotdot", "through-absolute-link", "through-relative-link"])
@pytest.mark.parametrize("keep", [tarsafe.tar_filter, tarsafe.data_filter], ids=["tar", "data"])
def test_nothing_lands_outside_the_destination(tmp_path: Path, native: bool, keep: tarsafe.Filter,
                                               members: list[tarfile.TarInfo]) -> None:
    dest = tmp_path / "root"
    dest.mkdir()
    with pytest.raises(tarfile.TarError):
        _unpack(dest, keep, *members)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    assert not (tmp_path.parent / "outside").exists()


@pytest.mark.parametrize("member", [
    _info("abs-link", tarfile.SYMTYPE, "/etc/passwd"),
    _info("out-link", tarfile.SYMTYPE, "../../etc/passwd"),
    _info("hard", tarfile.LNKTYPE, "../../etc/passwd"),
    _info("fifo", tarfile.FIFOTYPE),
    _info("console", tarfile.CHRTYPE),
], ids=["absolute-symlink", "outside-symlink", "outside-hardlink", "fifo", "device"])
def test_the_data_filter_refuses_links_out_and_special_files(tmp_path: Path, native: bool,
                                                             member: tarfile.TarInfo) -> None:
    with pytest.raises(tarfile.TarError):
        _unpack(tmp_path, tarsafe.data_filter, member)
    assert list(tmp_path.iterdir()) == []


def test_the_tar_filter_keeps_absolute_symlinks_and_strips_a_leading_slash(tmp_path: Path, native: bool) -> None:
    _unpack(tmp_path, tarsafe.tar_filter, _info("etc", tarfile.DIRTYPE, mode=0o755),
            _info("etc/cc", tarfile.SYMTYPE, "/usr/bin/g++"), _info("/etc/absolute"))
    assert os.readlink(tmp_path / "etc" / "cc") == "/usr/bin/g++"
    assert (tmp_path / "etc" / "absolute").read_text() == "data of /etc/absolute"


def test_both_filters_clear_setuid_and_group_write_bits(tmp_path: Path, native: bool) -> None:
    for keep, folder in ((tarsafe.tar_filter, "tar"), (tarsafe.data_filter, "data")):
        dest = tmp_path / folder
        dest.mkdir()
        _unpack(dest, keep, _info("tool", mode=0o4777), _info("notes", mode=0o666))
        assert stat.S_IMODE((dest / "tool").stat().st_mode) == 0o755
        assert stat.S_IMODE((dest / "notes").stat().st_mode) == 0o644


def test_the_data_filter_makes_files_the_owner_can_read_and_write(tmp_path: Path, native: bool) -> None:
    _unpack(tmp_path, tarsafe.data_filter, _info("locked", mode=0o044), _info("run", mode=0o100))
    assert stat.S_IMODE((tmp_path / "locked").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == 0o700


def test_a_tree_with_links_inside_unpacks_whole(tmp_path: Path, native: bool) -> None:
    _unpack(tmp_path, tarsafe.data_filter, _info("pkg", tarfile.DIRTYPE, mode=0o555),
            _info("pkg/a.py"), _info("pkg/b.py", tarfile.SYMTYPE, "a.py"),
            _info("pkg/c.py", tarfile.LNKTYPE, "pkg/a.py"))
    assert (tmp_path / "pkg" / "b.py").read_text() == (tmp_path / "pkg" / "c.py").read_text() == "data of pkg/a.py"
    assert os.readlink(tmp_path / "pkg" / "b.py") == "a.py"
    assert (tmp_path / "pkg").stat().st_mode & 0o500 == 0o500


def test_a_custom_filter_that_skips_a_member_leaves_it_out(tmp_path: Path, native: bool) -> None:
    def no_docs(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        return None if member.name.startswith("docs/") else tarsafe.data_filter(member, dest)
    _unpack(tmp_path, no_docs, _info("docs", tarfile.DIRTYPE, mode=0o755), _info("docs/x"), _info("y"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "y"]
    assert list((tmp_path / "docs").iterdir()) == []
