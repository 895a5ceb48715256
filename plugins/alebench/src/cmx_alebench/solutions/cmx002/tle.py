"""cmx002 test solution: never ends (TIME_LIMIT_EXCEEDED)."""
while True:
    pass
