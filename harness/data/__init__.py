"""What a benchmark is made of: the catalogue of benchmark records (benchmarks.py), its dataset readers,
model builders, scorers and host NMS, the one step that makes a record concrete for a run, and the
integrity check of a prepared data dir."""
