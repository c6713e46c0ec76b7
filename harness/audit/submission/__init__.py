"""Submission trees: build a v6.1 tree from finished runs, and check any tree from v4.1 to v6.1.

`tree.build()` writes `closed/<submitter>/...` from `appliance run` results; `check.check_tree()` applies
the rules of the tree's round (`rounds.py`, one record per round, detected from the RNG seeds) through
typed readers (harness.records.readers, harness.records.detail_log) and keeps problems that come only
from synthetic models or data apart.
"""
