#!/usr/bin/env python3
"""Parses Prometheus text (stdin) with the official client's parser, prometheus_client
(`text_string_to_metric_families`), and prints one JSON object per sample:
{"family": ..., "type": ..., "name": ..., "labels": {...}, "value": ...}.
A parse error exits 1 with the parser's message; a missing module exits 3."""
import json
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as error:
    print(f"prometheus_client is not installed ({error}): pip install prometheus_client", file=sys.stderr)
    sys.exit(3)

text = sys.stdin.read()
try:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            print(json.dumps({"family": family.name, "type": family.type, "name": sample.name,
                              "labels": sample.labels, "value": sample.value}))
except Exception as error:  # the parser raises ValueError and friends on bad input
    print(f"not valid Prometheus text: {error!r}", file=sys.stderr)
    sys.exit(1)
