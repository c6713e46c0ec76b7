"""Submission trees in the MLPerf Inference v6.1 layout: build them from finished runs, and check them.

`tree.build()` writes `closed/<submitter>/...` from `appliance run` results; `check.check_tree()` applies
the round's rules (SPEC §5) and keeps problems that come only from synthetic models or data apart.
"""
