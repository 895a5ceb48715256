"""Checks of the conformance kit (:mod:`cmx_core.testing`) that exercise what a plugin
provides: its requirement, its detectors, its step schemas and examples, its recipes'
plans and its metric values. Each returns a list of one-line problems (empty: none)."""
