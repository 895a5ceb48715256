"""test solution: raises (RUNTIME_ERROR)."""
raise SystemExit("deliberate failure")
