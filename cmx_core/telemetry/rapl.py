"""CPU package energy through Linux RAPL (``/sys/class/powercap/intel-rapl:N/energy_uj``).

Only the top-level package domains are read (``intel-rapl:0``, ``intel-rapl:1``; their
``intel-rapl:0:0`` subdomains are parts of the package and would count twice). The counter
wraps at ``max_energy_range_uj``; :class:`RaplSource` unwraps it, which is exact as long as
it reads more often than one wrap (minutes at full load). Since Linux 5.10 ``energy_uj`` is
readable by root only on most distributions; the source then says so.
"""

from __future__ import annotations

import re
from pathlib import Path

from cmx_core.telemetry.reading import Reading, Unavailable

POWERCAP = Path("/sys/class/powercap")
_PACKAGE = re.compile(r"^intel-rapl:\d+$")


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def unwrap(previous_raw: int, raw: int, max_range: int) -> int:
    """The counter's increase from ``previous_raw`` to ``raw`` (µJ), across one wrap."""
    return raw - previous_raw if raw >= previous_raw else raw + max_range - previous_raw


class _Domain:
    def __init__(self, path: Path) -> None:
        self.path = path
        name = path / "name"
        self.name = name.read_text().strip() if name.is_file() else path.name
        self.max_range = _read_int(path / "max_energy_range_uj") if (path / "max_energy_range_uj").is_file() else 0
        self.raw = _read_int(path / "energy_uj")
        self.total_uj = 0

    def advance(self) -> float:
        """Read the counter; return the unwrapped cumulative energy in joules."""
        raw = _read_int(self.path / "energy_uj")
        self.total_uj += unwrap(self.raw, raw, self.max_range)
        self.raw = raw
        return self.total_uj / 1e6


class RaplSource:
    """Every RAPL package domain under ``root`` (the sysfs powercap directory)."""

    name = "rapl"

    def __init__(self, root: Path = POWERCAP) -> None:
        paths = sorted(p for p in root.glob("intel-rapl:*") if _PACKAGE.match(p.name)) if root.is_dir() else []
        if not paths:
            raise Unavailable(f"RAPL: {root} has no intel-rapl package domain")
        try:
            self._domains = tuple(_Domain(p) for p in paths)
        except PermissionError as err:
            raise Unavailable(f"RAPL: {err.filename} is not readable (root only since Linux 5.10)") from None
        except (OSError, ValueError) as err:
            raise Unavailable(f"RAPL: cannot read {root}: {err}") from None
        self._devices = tuple(f"{d.path.name}:{d.name}" for d in self._domains)

    @property
    def devices(self) -> tuple[str, ...]:
        return self._devices

    def read(self) -> tuple[Reading, ...]:
        return tuple(Reading(dev, energy_j=d.advance()) for dev, d in zip(self._devices, self._domains, strict=True))

    def close(self) -> None:
        pass
