"""``timing.json``'s process figures: the peak resident memory follows what the process
touched, in GiB."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trkx.pipeline.process_usage import (
    own_peak_memory_gb,
    peak_memory_gb,
    process_cpu_seconds,
    reset_peak_memory,
)


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise KeyError(key)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").is_file(), reason="Linux /proc only")
def test_the_peak_rises_with_memory_touched_past_the_high_water_mark() -> None:
    reset_peak_memory()                            # the mark starts at the resident size
    before = own_peak_memory_gb()
    assert before == pytest.approx(_status_kib("VmHWM") / 2**20, abs=0.01)
    extra = 300 * 2**20
    block = np.ones(extra // 8)                    # every page written: resident
    after = own_peak_memory_gb()
    del block
    assert after - before >= 0.25                  # GiB: a KiB or MB slip fails this
    assert after < before + extra / 2**30 + 0.1
    # the command's figure: this process's, or a finished child's (the workers) when larger
    assert peak_memory_gb() >= after - 0.01       # the kernel batches its RSS counters
    cpu = process_cpu_seconds()
    assert cpu["user"] > 0 and cpu["system"] >= 0


@pytest.mark.skipif(not Path("/proc/self/clear_refs").is_file(), reason="Linux /proc only")
def test_a_reset_forgets_the_memory_touched_before() -> None:
    block = np.ones(400 * 2**20 // 8)              # 400 MiB, resident
    high = own_peak_memory_gb()
    del block                                      # a large block goes back to the OS
    reset_peak_memory()
    own = own_peak_memory_gb()
    assert own < high - 0.3                        # the mark restarted from the resident size
    assert own == pytest.approx(_status_kib("VmRSS") / 2**20, abs=0.05)
