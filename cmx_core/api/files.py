"""Writing a file so that readers see the old one or the new one, never half of either
(``atomic_write``: a temporary file in the same directory, then ``os.replace``; created 0644
less the umask, as cmx's own files are). For a plugin that writes files other tools read.

Not the plugin contract (:mod:`cmx_core.api`): a helper a plugin may reuse.
"""

from __future__ import annotations

from cmx_core.datautil import atomic_write as atomic_write
