"""Benchmark: memory and time of tiled attention (assignment 7's reference) against full attention.

Three measurements, all in this run:

* **peak memory as T grows** — :func:`traced_peak_bytes` (tracemalloc, which NumPy reports its buffers
  to) of full causal attention (``full_attention`` of the student package's memory module, the memory plot's
  baseline: T × T scores, exponentials and weights) and of ``tiled_attention`` with 256 × 256 tiles, d_head = 8,
  by the memory plot's own :func:`memory_growth`;
* **time** — both at T = 4096 (the baseline: full attention, which still fits), median of 3;
* **the memory case** — in a child process limited to the grading sandbox's address space
  (2 GiB, RLIMIT_AS as ``prlimit --as``): forming the T × T scores at T = 20 000 raises MemoryError,
  ``tiled_attention`` returns, with its time and the process's peak resident memory.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/tiled_attention_memory.py``; writes
``benchmarks/tiled_attention_memory.md``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from attention_lab.a07_tiled_attention.memory import memory_growth  # noqa: E402
from autograder.assignments.a07_tiled_attention import reference as ref  # noqa: E402
from autograder.assignments.a01_attention.reference import scaled_dot_product_attention  # noqa: E402
from autograder.assignments.a05_kv_cache.reference import causal_mask  # noqa: E402

CHILD = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
sys.path[:0] = [{repo!r}]
import numpy as np
from autograder.assignments.a07_tiled_attention import reference as ref
case = ref.MEMORY_CASE
rng = np.random.default_rng(0)
Q, K, V = (rng.normal(size=(case["T"], case["d_head"])) for _ in range(3))
report = {{}}
try:
    Q @ K.T
    report["scores"] = "returned"
except MemoryError as error:
    report["scores"] = f"MemoryError: {{error}}"
times = []
for _ in range(3):
    start = time.perf_counter()
    ref.tiled_attention(Q, K, V, case["block_q"], case["block_k"], case["causal"])
    times.append(time.perf_counter() - start)
report["tiled_seconds"] = times
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
report["peak_resident_MiB"] = int(status["VmHWM"].split()[0]) / 1024  # this process's peak (ru_maxrss counts the parent's)
report["peak_virtual_MiB"] = int(status["VmPeak"].split()[0]) / 1024  # what RLIMIT_AS limits
print(json.dumps(report))
"""


def main() -> None:
    lines = ["# Tiled attention: memory and time (assignment 7 reference)", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, NumPy {np.__version__}, OPENBLAS_NUM_THREADS="
             f"{os.environ['OPENBLAS_NUM_THREADS']}. Command: `.venv/bin/python benchmarks/tiled_attention_memory.py`.",
             "", "## Peak traced memory (tracemalloc), causal, d_head = 8, tiles 256 × 256", "",
             "| T | one T × T float64 matrix | full attention | tiled attention | full / tiled |", "|---|---|---|---|---|"]
    table = memory_growth(ref.tiled_attention, [256, 512, 1024, 2048, 4096], d_head=8, block=256, causal=True)
    for T, matrix, full, tiled in zip(table["T"], table["score_matrix"], table["full"], table["tiled"]):
        lines.append(f"| {T} | {matrix / 2**20:.2f} MiB | {full / 2**20:.2f} MiB | {tiled / 2**20:.2f} MiB | "
                     f"{full / tiled:.1f} |")
    lines += ["", "Full attention holds about three T × T float64 arrays at once (the masked scores, exponentials, "
              "weights): quadratic. Tiled attention holds a few 256 × 256 tiles and (T, d) arrays: its growth "
              "per extra position is a few d-vectors.", ""]

    rng = np.random.default_rng(1)
    T = 4096
    Q, K, V = (rng.normal(size=(T, 8)) for _ in range(3))
    mask = causal_mask(T)

    def median_seconds(function) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    full_s = median_seconds(lambda: scaled_dot_product_attention(Q, K, V, mask=mask))
    tiled_s = median_seconds(lambda: ref.tiled_attention(Q, K, V, 512, 256, True))
    lines += [f"## Time at T = {T}, causal, d_head = 8 (median of 3)", "",
              "| full attention (baseline) | tiled, 512 × 256 tiles | tiled / full |", "|---|---|---|",
              f"| {full_s:.3f} s | {tiled_s:.3f} s | {tiled_s / full_s:.2f} |", ""]

    code = CHILD.format(limit=ref.SANDBOX_MEMORY_LIMIT, repo=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    report = json.loads(done.stdout.strip().splitlines()[-1])
    case = ref.MEMORY_CASE
    lines += [f"## The memory case under the sandbox's {ref.SANDBOX_MEMORY_LIMIT // 2**30} GiB address space", "",
              f"Causal, T = {case['T']}, d_head = {case['d_head']}, tiles {case['block_q']} × {case['block_k']}; "
              f"one T × T float64 matrix is {ref.score_matrix_bytes(case['T'], case['T']):,} bytes "
              f"({ref.score_matrix_bytes(case['T'], case['T']) / 2**30:.2f} GiB); the smallest T whose matrix "
              f"exceeds the limit is {ref.smallest_T_exceeding(ref.SANDBOX_MEMORY_LIMIT)}.", "",
              f"- `Q @ K.T`: {report['scores']}",
              f"- `tiled_attention`: {', '.join(f'{s:.2f} s' for s in report['tiled_seconds'])} (3 runs), "
              f"peak resident memory of the whole process {report['peak_resident_MiB']:.0f} MiB, peak address space "
              f"{report['peak_virtual_MiB']:.0f} MiB (Linux /proc/self/status VmHWM, VmPeak)", ""]
    (HERE / "tiled_attention_memory.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
