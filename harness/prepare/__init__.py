"""`appliance prepare`: the model, its int8 / fp16 / bf16 variants, the preprocessed shards and the golden
references. Only the CLI imports it (an import-linter contract); everything else reads a data dir through
harness.records.layout."""
