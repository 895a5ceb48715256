"""Tar archives unpacked through tarfile's PEP 706 filters (``data``, ``tar``), with the same
checks done member by member on a Python whose tarfile lacks them (Debian 12's 3.11.2):
:mod:`cmx_core.sandbox.tarsafe`. For a suite that unpacks an archive it did not make.

Not the plugin contract (:mod:`cmx_core.api`): a helper a plugin may reuse.
"""

from __future__ import annotations

from cmx_core.sandbox.tarsafe import FilterError as FilterError
from cmx_core.sandbox.tarsafe import data_filter as data_filter
from cmx_core.sandbox.tarsafe import extract_all as extract_all
from cmx_core.sandbox.tarsafe import tar_filter as tar_filter
