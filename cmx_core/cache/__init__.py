"""The content-addressed cache: entries, atomic staging, locks and validation.

A layer of its own beside the resolver: the plan asks it whether a node is a hit, and the
run layer stores into it. May import only the bottom helpers.
"""
