"""cmx-textstats: a worked example of a third-party cmx plugin (see docs/plugins.md)."""

__version__ = "0.1.0"
