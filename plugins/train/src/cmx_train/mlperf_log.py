"""MLPerf Training-style events through mlperf-logging's ``mllog``, written by rank 0 of a
time-to-accuracy run (``mlperf_log.txt``); a ``MlLog(None, ...)`` logs nothing."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from cmx_train.config import TrainConfig

MLPERF_LOG = "mlperf_log.txt"
"""The log's name in the run's train work directory."""
BENCHMARK = {"digits-cnn": "digits_cnn", "resnet50": "resnet", "bert-base": "bert"}
PRECISION = {"fp32": "fp32", "bf16": "bfloat16", "fp16": "fp16"}


class MlLog:
    def __init__(self, path: Path | None, config: TrainConfig) -> None:
        self.config = config
        self.log: Any = None
        if path is None:
            return
        # deferred: mlperf_logging only when this runs (105 modules)
        from mlperf_logging.mllog import constants, mllog  # type: ignore[import-untyped]

        logger = logging.getLogger(f"cmx_train.mllog.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        self.log = mllog.MLLogger(logger=logger)
        self.c = constants

    def _event(self, key: str, value: Any = None, metadata: dict[str, Any] | None = None) -> None:
        if self.log is not None:
            self.log.event(key=key, value=value, metadata=metadata)

    def init_start(self) -> None:
        if self.log is None:
            return
        c, cfg = self.c, self.config
        self._event(c.CACHE_CLEAR, True)
        self.log.start(key=c.INIT_START)
        for key, value in ((c.SUBMISSION_BENCHMARK, BENCHMARK[cfg.model]), (c.SUBMISSION_ORG, "cmx"),
                           (c.SUBMISSION_DIVISION, "open"), (c.SUBMISSION_STATUS, "research"),
                           (c.SUBMISSION_PLATFORM, f"{cfg.nodes}x{cfg.nproc}-{cfg.device}"),
                           (c.GLOBAL_BATCH_SIZE, cfg.global_batch_size), (c.SEED, cfg.seed),
                           (c.OPT_NAME, "sgd"), (c.OPT_BASE_LR, cfg.lr),
                           ("lowest_numerical_precision_in_linear", PRECISION[cfg.precision]),
                           ("lowest_numerical_precision_in_attn", PRECISION[cfg.precision]),
                           ("lowest_numerical_precision_in_comm", "fp32"),
                           ("tensor_parallelism", 1), ("pipeline_parallelism", 1), ("context_parallelism", 1),
                           ("expert_parallelism", 1), ("micro_batch_size", cfg.per_rank_batch),
                           ("config_filename", "config.json"), ("target_accuracy", cfg.target_accuracy)):
            self._event(key, value)

    def params(self, train: int, val: int) -> None:
        if self.log is not None:
            self._event(self.c.TRAIN_SAMPLES, train)
            self._event(self.c.EVAL_SAMPLES, val)

    def init_stop(self) -> None:
        if self.log is not None:
            self.log.end(key=self.c.INIT_STOP)

    def run_start(self) -> None:
        if self.log is not None:
            self.log.start(key=self.c.RUN_START)

    def epoch_start(self, epoch: int) -> None:
        if self.log is not None:
            self.log.start(key=self.c.EPOCH_START, metadata={"epoch_num": epoch + 1})

    def epoch_stop(self, epoch: int) -> None:
        if self.log is not None:
            self.log.end(key=self.c.EPOCH_STOP, metadata={"epoch_num": epoch + 1})
            self.log.start(key=self.c.EVAL_START, metadata={"epoch_num": epoch + 1})

    def eval_accuracy(self, epoch: int, accuracy: float, samples: int) -> None:
        if self.log is not None:
            self._event(self.c.EVAL_ACCURACY, accuracy, {"epoch_num": epoch + 1, "samples_count": samples})
            self.log.end(key=self.c.EVAL_STOP, metadata={"epoch_num": epoch + 1})

    def run_stop(self, converged: bool) -> None:
        if self.log is not None:
            self.log.end(key=self.c.RUN_STOP, metadata={"status": "success" if converged else "aborted"})
