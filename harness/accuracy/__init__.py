"""Accuracy scripts: read LoadGen's mlperf_log_accuracy.json and score it like the references do."""
