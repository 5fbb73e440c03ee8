"""Top kernels and queue time (analysis/kernels.py) on SYNTHETIC traces with hand-computed values."""

from __future__ import annotations

import pytest
from test_breakdown import make_trace

from traceprobe.analysis.device.kernels import kernel_table, queue_times


def test_kernel_table_groups_by_name_with_share():
    tr = make_trace([(0, 7, "compute", 0, 30, 1), (0, 7, "compute", 40, 50, 2), (0, 8, "copy", 0, 60, 3), (1, 7, "comm", 0, 5, 4)])
    k = kernel_table(tr)
    assert k[["device", "kind", "name", "count", "total_ns", "mean_ns", "max_ns"]].values.tolist() == [
        [0, "memcpy", "Memcpy HtoD (Pinned -> Device)", 1, 60, 60, 60],
        [0, "kernel", "gemm", 2, 40, 20, 30],
        [1, "kernel", "ncclDevKernel_AllReduce", 1, 5, 5, 5],
    ]
    assert k["share"].tolist() == pytest.approx([0.6, 0.4, 1.0])


def test_queue_time_from_launch_end_to_start():
    # launches end at 2, 12 and 13; kernels start at 10, 20 and 113: delays 8, 8 and 100; the fourth has no launch
    tr = make_trace(
        [(0, 7, "compute", 10, 15, 1), (0, 7, "compute", 20, 25, 2), (0, 7, "compute", 113, 120, 3), (0, 7, "compute", 200, 210, 9)],
        [("cuda_runtime", "cudaLaunchKernel", 0, 2, 1), ("cuda_runtime", "cudaLaunchKernel", 10, 12, 2),
         ("cuda_runtime", "cudaLaunchKernel", 11, 13, 3)],
    )
    q = queue_times(tr)
    assert q.values.tolist() == [[0, "kernel", 3, 38, 8, 100, 100]]
    assert queue_times(make_trace([(0, 7, "compute", 0, 1, 1)])).empty
