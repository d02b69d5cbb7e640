"""memray's temporary allocations (freed before `threshold` other allocations were made), as
`memray transform csv --temporary-allocation-threshold` writes them, but only the stacks whose
allocations average at least `min_bytes` (the large buffers the report reads; the rest is
dropped before its stack is even read). memray's own CSV of every temporary allocation of a
Lightning training was 7.9 GB and took minutes; these rows are the few the parser keeps.

argv: capture, threshold, min_bytes, out.
"""
import sys

from memray import FileReader
from memray.reporters.transform import TransformReporter

capture, threshold, min_bytes, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
reader = FileReader(capture)
large = [
    r
    for r in reader.get_temporary_allocation_records(threshold=threshold, merge_threads=True)
    if r.size >= min_bytes * r.n_allocations
]
reporter = TransformReporter(
    large, format="csv", native_traces=reader.metadata.has_native_traces, memory_records=()
)
with open(out, "w", newline="") as f:
    reporter.render_as_csv(f)
