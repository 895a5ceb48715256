"""The recipe language's evaluators, for tests of what a plugin writes into recipes
(re-exported on purpose).

* ``compile_expression``: a recipe condition (``when:``), as the engine compiles it.
* ``render_value``, ``template_functions``: a template value, rendered with the functions
  recipes can call (those a plugin registers with ``api.register_template_function`` included).
"""

from __future__ import annotations

from cmx_core.recipes.expr import compile_expression
from cmx_core.recipes.template import render_value, template_functions

__all__ = ["compile_expression", "render_value", "template_functions"]
