"""What every suite shares: leaks surface in the module that made them."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="module")
def _collect_what_the_module_left() -> Iterator[None]:
    """Collect garbage as each module ends. A socket or connection a module leaves unclosed
    warns when the collector finalizes it (an error under ``filterwarnings = error``); collected
    here, the warning fails the module that leaked (at its last test's teardown), not whichever
    later test the collector happened to run in."""
    yield
    gc.collect()
