"""Model artefacts and model runners for the benchmarks.

IR_VERSION is the ONNX IR version of every graph the appliance makes (the seeded models, the GPU cards' start
probe): 8, which every onnxruntime of the last years reads. onnx's `helper.make_model` otherwise writes its own
newest (IR 14 with onnx 1.23), which the locked onnxruntime 1.31 refuses ("Unsupported model IR version"): the
first H100 run refused every GPU card on exactly that. The graphs the appliance rewrites (uint8 front, output
casts, fp16, bf16, int8) keep their source's version; tests/test_models_load.py loads them all."""

IR_VERSION = 8
