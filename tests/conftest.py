"""Skip GPU-marked tests where torch sees no CUDA device."""

from __future__ import annotations

import pytest


def swept(path) -> bool:
    """Whether a sample trace is in the sweeps over every sample (reading in pieces, step figures, breakdowns, summary
    round trips): of sample_traces/matrix (21 scenarios x 4 ranks, tested by tests/test_what_if.py) rank 0 only."""
    p = str(path).replace("\\", "/")
    return "sample_traces/matrix/" not in p or "/rank0." in p


def _gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords or "multigpu" in i.keywords]
    if not gpu_items:
        return
    n = _gpus()
    for item in gpu_items:
        if "multigpu" in item.keywords and n < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2 CUDA GPUs, found {n}"))
        elif "gpu" in item.keywords and n < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))


@pytest.fixture(scope="session")
def dask_scheduler():
    """Address of a Dask LocalCluster of 2 worker processes (1 thread each), shared by the session's tests."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address
