"""The files the appliance reads and writes, one owner each: the benchmark record's types, the data-dir layout,
the model record, the preprocessed shard store, the tuned record, a run's manifest, LoadGen's detail log, and
lenient readers for other people's trees. Imports only harness.core."""
