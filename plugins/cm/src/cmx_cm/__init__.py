"""cmx-cm: run existing CM/CMX and MLC script collections as cmx recipes (docs/cm-bridge.md)."""
