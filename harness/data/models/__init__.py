"""Model artefacts and model runners for the benchmarks."""
