"""What an auditor runs: compliance tests (TEST01 / TEST04 / TEST05), `reproduce` of a published tree, and
the v6.1 submission tree build and its check against every round since v4.1."""
