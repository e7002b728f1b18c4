#!/usr/bin/env python3
"""Wall time of `quipu --help` (issue 27), as JSON: the median and minimum of ``--runs`` runs
of the installed `quipu` command, beside the same for ``python -c "import typer"`` (the floor
any typer CLI pays on this machine under its current load).

    python scripts/cli_startup.py [--runs 15] [--quipu .venv/bin/quipu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _times(command: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quipu", default=str(Path(sys.executable).parent / "quipu"))
    args = parser.parse_args()
    report = {}
    for name, command in (
        ("quipu --help", [args.quipu, "--help"]),
        ("quipu recall --help", [args.quipu, "recall", "--help"]),
        ("python -c 'import typer'", [sys.executable, "-c", "import typer"]),
    ):
        times = _times(command, args.runs)
        report[name] = {
            "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3),
        }
    load = [round(x, 2) for x in os.getloadavg()]  # 1, 5, 15 min: the machine is shared
    print(json.dumps({"runs": args.runs, "load_average": load, **report}, indent=2))


if __name__ == "__main__":
    main()
