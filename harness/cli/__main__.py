"""`python -m harness.cli`: the `appliance` command."""

import sys

from harness.cli.entry import main

sys.exit(main())
