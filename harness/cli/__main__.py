"""`python -m harness.cli`: the `appliance` command."""

import sys

from harness.cli.main import main

sys.exit(main())
