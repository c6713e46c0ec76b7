"""MLPerf Inference benchmark appliance: LoadGen-driven, affinity-aware multi-card harness."""

__version__ = "0.1.0"
