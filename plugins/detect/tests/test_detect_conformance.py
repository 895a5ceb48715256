"""cmx's conformance kit run against cmx-detect through its installed entry point.

cmx-detect registers no step types of its own (its recipes use core's ``cmx.facts``), so
the kit checks the entry point, hooks, provider metadata, recipes and import weight."""

from cmx_core.testing import PluginConformance


class TestDetectConformance(PluginConformance):
    plugin = "detect"
