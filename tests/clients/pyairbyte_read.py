"""Reads a packaged Sluice source with PyAirbyte, as a user would: check, then read every stream
into PyAirbyte's default DuckDB cache three times: twice with the first config, once with the second (the
API grown). Prints one JSON line per read: records processed and rows per stream in the cache.

Usage: pyairbyte_read.py SOURCE_EXECUTABLE CONFIG_1 CONFIG_2 WORK_DIR (the cache goes there)
"""

import json
import os
import sys

# No registry, no telemetry: the tests reach nothing but the demo API on loopback.
os.environ.setdefault("AIRBYTE_OFFLINE_MODE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

import airbyte as ab  # noqa: E402

executable, first, second, cache_dir = sys.argv[1:5]
# PyAirbyte's default cache (DuckDB, under .cache in the working folder), as a user gets it.
os.chdir(cache_dir)
cache = ab.get_default_cache()
for config_path in (first, first, second):
    with open(config_path) as f:
        config = json.load(f)
    source = ab.get_source("source-demo", config=config, local_executable=executable, install_if_missing=False)
    source.check()
    source.select_all_streams()
    result = source.read(cache=cache)
    counts = {name: len(dataset) for name, dataset in result.streams.items()}
    print(json.dumps({"processed": result.processed_records, "counts": counts}), flush=True)
