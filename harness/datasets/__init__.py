"""Dataset readers, synthetic generators and the preprocessed-shard store."""
