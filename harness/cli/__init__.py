"""`appliance`: click commands only (main.py; topology.py and submission.py for their groups); the work is done
below. `python -m harness.cli` is the same command."""
