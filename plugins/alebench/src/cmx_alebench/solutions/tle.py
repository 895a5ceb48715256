"""test solution: spins forever (TIME_LIMIT_EXCEEDED)."""
while True:
    pass
