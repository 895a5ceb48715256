"""The classes of lock drift ``--allow-drift`` names (import-light: the ``cmx run`` parser lists them)."""

from __future__ import annotations

DRIFT_CLASSES = {
    "remote": "the far side of a remote executor: it detects its own facts, so cache keys may change, and "
              "plugins the plan does not use (the executor's own) may be missing; recipes, versions, "
              "variations, inputs, steps and the plugins the plan uses may not differ",
    "hardware": "other hardware (a controlled A/B, e.g. another GPU): a node's cache key may change when only "
                "hardware facts it used differ (gpus, accelerator, cpu, memory, cuda), and `cmx bundle replay` "
                "runs on another hardware_class; recipes, versions, variations, inputs, steps and plugins may not",
    "software": "other system software: a node's cache key may change when only non-hardware facts it used "
                "differ (os, python, torch, packages, container engines); recipes, inputs, steps and plugins may not",
    "plugins": "other plugin versions (swap one plugin for an A/B): plugin and step versions and the cache keys "
               "they feed may change; recipes, versions, variations and inputs may not",
}
"""Classes of drift ``cmx run --lock FILE --allow-drift=CLASS`` (and ``cmx bundle replay``) let through."""
