"""What the Ray tests share: a local Ray cluster per test module (import this module only
after ``pytest.importorskip("ray")``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray cluster with two CPUs; its address."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()
