"""`appliance tune`: card layouts x precisions x backends x batch sizes x requests timed through the SUT; the
tuned record it writes is harness.records.tuned."""
