"""cmx-train: data-parallel training benchmarks (throughput, time to accuracy, largest batch)."""

__version__ = "0.1.0"
