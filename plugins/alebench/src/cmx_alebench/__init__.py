"""cmx-alebench: ALE-Bench problems judged in cmx's sandbox (or one container per call).

Importing this package is cheap: the sandbox, the docker SDK and the judge load only when
an evaluation runs.
"""

__version__ = "0.1.0"
