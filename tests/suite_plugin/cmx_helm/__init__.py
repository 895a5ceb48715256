"""cmx-helm: a test suite plugin (see ../README.md)."""
