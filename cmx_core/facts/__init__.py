"""Facts: what detectors report about the machine, read lazily and cached on disk
(:class:`~cmx_core.facts.store.FactStore`), and cmx-core's minimal detectors.

May import :mod:`cmx_core.providers` and the bottom helpers. Detectors are handed in; this
package never loads plugins.
"""
