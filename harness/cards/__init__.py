"""Card backends: each card is one object with `infer(batch) -> outputs`, nothing more."""

BACKENDS = ("onnxruntime", "null")
