"""cmx-mlperf: MLPerf Inference through LoadGen for cmx.

Importing this package is cheap: LoadGen, numpy and torch are imported only inside the
functions that use them.
"""

__version__ = "0.1.0"
