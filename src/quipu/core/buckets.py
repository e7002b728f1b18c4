"""Token-bucket arithmetic for per-key write limits (MEM-5). Pure; the stores and the
in-process limiter keep the state."""

from __future__ import annotations


def spend(tokens: float, elapsed_s: float, rate: float, burst: int) -> tuple[float, float]:
    """Refill ``tokens`` for ``elapsed_s`` seconds at ``rate`` (capped at ``burst``), then try
    to spend one. Returns (tokens left, seconds to wait): wait 0.0 means admitted."""
    available = min(float(burst), tokens + max(0.0, elapsed_s) * rate)
    if available >= 1.0:
        return available - 1.0, 0.0
    return available, (1.0 - available) / rate
