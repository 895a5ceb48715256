"""cmx002 test solution: raises (RUNTIME_ERROR)."""
raise SystemExit(3)
