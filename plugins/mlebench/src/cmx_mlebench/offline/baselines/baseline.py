"""The baseline agent: runs the baseline of $COMPETITION_ID (a script beside this one)."""

import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
competition = os.environ.get("COMPETITION_ID", "")
script = os.path.join(here, f"{competition}.py")
if not competition or not os.path.isfile(script):
    sys.exit(f"baseline: no baseline agent for competition {competition!r}")
sys.path.insert(0, here)
runpy.run_path(script, run_name="__main__")
