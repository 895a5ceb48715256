"""Output that fits the terminal (#33): the table layout and the number format
cmx's own commands use, for a plugin command that prints a table of its own.

Not the plugin contract (:mod:`cmx_core.api`): helpers a plugin may reuse. One import per
name, each re-exported by its alias.
"""

from __future__ import annotations

from cmx_core.results.grid import Column as Column
from cmx_core.results.grid import Grid as Grid
from cmx_core.results.grid import fit as fit
from cmx_core.results.grid import fit_text as fit_text
from cmx_core.results.grid import width_for as width_for
from cmx_core.results.numbers import fmt_number as fmt_number
