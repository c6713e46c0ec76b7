"""Names in harness/ that `vulture` reports as unused but that are used, each with who uses it.

Used as `vulture harness tools/vulture_whitelist.py --min-confidence 60` (run by ci/test, which must print
nothing): vulture counts every name mentioned here as used. The file is read by vulture, never imported.
Add a name only with a comment saying who reads it; delete dead code instead of listing it here.
"""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# Attributes set on third-party objects, read by that library
_.imgIds  # pycocotools Params: COCOeval.evaluate reads it (harness/data/accuracy/coco.py)
_.performance_sample_count_override  # LoadGen TestSettings: read by StartTest
_.enable_trace  # LoadGen LogSettings: read by StartTestWithLogSettings
_.log_output  # LoadGen LogSettings: read by StartTestWithLogSettings
_.copy_summary_to_stdout  # LoadGen LogOutputSettings: read by StartTestWithLogSettings
_.intra_op_num_threads  # onnxruntime SessionOptions: read by InferenceSession
_.inter_op_num_threads  # onnxruntime SessionOptions: read by InferenceSession
_.execution_mode  # onnxruntime SessionOptions: read by InferenceSession
_.graph_optimization_level  # onnxruntime SessionOptions: read by InferenceSession
_.log_severity_level  # onnxruntime SessionOptions: read by InferenceSession
_.get_next  # onnxruntime CalibrationDataReader method: called by quantize_static (harness/prepare/quantize.py)
_.readable  # io.RawIOBase method of inbound._Capped: called by io.BufferedReader (harness/core/inbound.py)
_.readinto  # io.RawIOBase method of inbound._Capped: called by io.BufferedReader (harness/core/inbound.py)
_.MAX_IMAGE_PIXELS  # Pillow's Image module global: read by Image.open's own bomb check (inbound.image_pixels)
_.meaning  # environment.Variable: docs/environment.md's last column, compared by tests/test_environment_rule.py

# Click commands: registered by their decorators, called by click
_.detect_cmd  # `appliance topology detect`
_.show_cmd  # `appliance topology show`

# Named by the backend records as "module:attribute" (harness/run/cards/backends.py), imported when first called
_.from_spec  # null_card, simulated_card, openvino_process, gpu_iobinding: a record's `card`
_.check_gpu_libraries  # onnxruntime_card: the GPU records' `libraries`
_.check_gpus_start  # onnxruntime_card: the GPU records' `starts`
_.provider_available  # onnxruntime_card: the GPU records' `available`

# Record fields written to JSON through dataclasses.asdict (read by people, `reproduce`, `report`, the tree)
_.created_utc  # manifest.RunManifest and tuned.TunedRecord
_.backend_choice  # manifest.RunManifest: read by tests/test_tune.py, docs/tune.md documents it
_.quantization  # manifest.RunManifest and model_record.ModelRecord
_.sample_buffers  # manifest.RunManifest: read by reproduce.py
_.appliance  # manifest.RunManifest: the harness version and commit
_.loadgen  # manifest.RunManifest: LoadGen's version, read as a key by reproduce.py, report/html.py, submission/tree.py
_.requests_per_card  # manifest.RunManifest: read by reproduce.py (the recorded --requests) and the tests
_.shared_cores  # manifest.RunManifest: other appliance runs on its cores (harness.run.neighbours), read by tests
_.precision_eligibility  # manifest.RunManifest: read by submission/check.py and report/html.py from the JSON
# manifest.RunManifest's sections, read field by field (harness.records.fields) and written back: the keys a
# person, `reproduce` (comparing two runs' JSON) or another tool reads; the appliance's own code reads the rest
_.manifest_sha256  # manifest.Dataset
_.batches_in_flight  # manifest.Card
_.queue_depth_batches  # manifest.Dispatch
_.server_max_wait_us  # manifest.Dispatch
_.backlogged_batches  # manifest.Dispatch
_.redispatched_samples  # manifest.Dispatch
_.image_digest  # manifest.Host
_.nvidia  # manifest.Host
_.golden_top1  # manifest.Result
_.golden_mAP  # manifest.Result
_.figures  # manifest.Result: a scorer's other figures (COCO's image and detection counts)
_.filter_stream  # native_lines.py: the filter process's entry point, named in its `python -c` line
_.official_artefact  # model_record.ModelRecord: read by runner.py and submission/tree.py
_.builder_sha256  # model_record.ModelRecord: read by prepare.py (rebuild when the builder changed)
_.adopted_from  # model_record.ModelRecord: provenance of a --model FILE rewritten for the appliance

# Public API used by tools/ (and tests/)
_.letterbox_geometry  # datasets/coco.py: tools/check_letterbox.py, tools/bench_host.py
_.verify_prepared  # integrity.py: tools/bench_integrity.py, docs/prepare.md's integrity section
_.params_for  # nms.py: tools/bench_nms.py, tests/test_nms.py
_.postprocess  # nms.py: tools/bench_nms.py (timed per image), tests/test_nms.py (the kernels' entry point)
_.lstopo_xml  # topology/hwloc_xml.py: tools/topology_vs_lstopo.py, tests/test_topology_hwloc.py
_.differences  # topology/hwloc_xml.py: tools/topology_vs_lstopo.py, tests/test_topology_hwloc.py

# Parameter-record fields the NMS kernels read by position (harness/data/nms_kernels.py: called with plain tuples)
_.box_scale  # YoloParams: unpacked by _yolo_box
_.box_zero_point  # YoloParams: unpacked by _yolo_box

# TypedDict keys (issue 45): a JSON document's fields, written and read as string keys, which vulture cannot follow
_.device_type, _.channel  # power.Analyzer: server.json's ptd_config, read by power._ptd_config
_.timezone, _.modules, _.messages, _.session_name, _.ptd_messages, _.ptd_config  # power.Session: client/server.json
_.cores_per_package, _.frequency, _.caches, _.memory, _.storage_type, _.storage_capacity  # system_json.HostFacts
_.networking, _.network_cards  # system_json.HostFacts: read by system_json.build
_.seq_id  # accuracy.Response: LoadGen's mlperf_log_accuracy.json field
_.category_id, _.bbox, _.file_name, _.iscrowd, _.licenses  # COCO documents and pycocotools detections
_.source_index, _.source_index_sha256  # store.PreparedManifest: written by prepare, read by steps.prepare_dataset
_.ms_per_sample, _.done_thread_busy, _.cores_busy  # completion_meter: the manifest's host_postprocess, report reads
