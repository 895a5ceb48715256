"""cmx-mlebench: MLE-bench competitions in cmx.

The competition format is read as MLE-bench writes it (``config.yaml``, ``description.md``, a
grader, ``leaderboard.csv``, ``<data>/<id>/prepared/{public,private}``); grading follows the
rules of MLE-bench (rounded scores, thresholds by team count, exclusive medals, strict
above-median), implemented here; agents run confined in cmx-core's sandbox. See
``docs/mlebench.md``.
"""

__version__ = "0.1.0"
