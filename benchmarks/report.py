"""What the benchmarks share to report: figures summarized as median and min-max over
repetitions, the printed table, the machine and source state, and the JSON file written to
``benchmarks/results/<name>-<date>.json`` (``-2``, ``-3``... when that file exists)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
RESULTS = REPOSITORY / "benchmarks" / "results"

Figure = tuple[str, str, str]  # (dotted key into a repetition's result, label, unit)


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def lookup(result: dict[str, Any], key: str) -> float | None:
    """The number at a dotted key (``steady.dispatch_ms.p50``), or None."""
    value: Any = result
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return float(value) if isinstance(value, int | float) else None


def summarize(results: list[dict[str, Any]],
              figures: list[Figure]) -> dict[str, dict[str, float]]:
    """Median, min, max and count of every figure present in at least one repetition."""
    summary: dict[str, dict[str, float]] = {}
    for key, _label, _unit in figures:
        values = [v for r in results if (v := lookup(r, key)) is not None]
        if values:
            summary[key] = {"median": statistics.median(values), "min": min(values),
                            "max": max(values), "n": len(values)}
    return summary


def number(value: float) -> str:
    if value == int(value) or abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}" if abs(value) < 1 else f"{value:.1f}"


def print_table(summary: dict[str, dict[str, float]], runs: int, figures: list[Figure],
                title: str = "") -> None:
    print()
    if title:
        print(title)
    print(f"{'figure':<40}{'median':>10}  {'min-max':<18}{'unit'}")
    print("-" * 80)
    for key, label, unit in figures:
        if key not in summary:
            continue
        s = summary[key]
        spread = f"{number(s['min'])}-{number(s['max'])}" if runs > 1 else ""
        print(f"{label:<40}{number(s['median']):>10}  {spread:<18}{unit}")
    print(flush=True)


def print_targets(summary: dict[str, dict[str, float]], size: int,
                  targets: list[tuple[str, str, float]]) -> None:
    """Each target (text, figure key, upper bound) met or MISSED by the figure's median."""
    for text, key, bound in targets:
        value = summary.get(key, {}).get("median")
        met = "met" if value is not None and value <= bound else "MISSED"
        print(f"target for {size:,}: {text}: {met} (median {'-' if value is None else number(value)})")
    print(flush=True)


def machine() -> dict[str, Any]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {"nproc": os.cpu_count(), "cpu_model": model, "ram_gib": round(mem_kib / 1024**2, 1),
            "kernel": platform.release(), "load_average": os.getloadavg()}


def source_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPOSITORY, capture_output=True, text=True,
                              check=False)
        return done.stdout

    changed = [line[3:] for line in git("status", "--porcelain", "--", "src").splitlines()]
    return {"commit": git("rev-parse", "HEAD").strip(), "uncommitted_src_files": changed}


def output_path(name: str, date: str, output: Path | None = None) -> Path:
    if output is not None:
        return output
    path = RESULTS / f"{name}-{date}.json"
    n = 2
    while path.exists():
        path = RESULTS / f"{name}-{date}-{n}.json"
        n += 1
    return path


@dataclass
class Report:
    """A benchmark run's record, begun when the run starts (date, machine, source) and
    written at its end with the options, the summary and every repetition."""

    name: str
    started_at: str = field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    date: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%d"))
    machine: dict[str, Any] = field(default_factory=machine)
    source: dict[str, Any] = field(default_factory=source_state)

    def announce(self) -> None:
        info = self.machine
        say(f"machine: {info['nproc']} CPU ({info['cpu_model']}), {info['ram_gib']} GiB RAM, "
            f"load {info['load_average'][0]:.2f}")

    def write(self, options: dict[str, Any], summary: dict[str, Any],
              repetitions: list[dict[str, Any]], versions: dict[str, Any] | None = None,
              output: Path | None = None, **extra: Any) -> Path:
        report = {
            "benchmark": self.name,
            "command": " ".join(["python", *sys.orig_argv[1:]]),
            "date": self.started_at,
            "machine": self.machine,
            "versions": {"python": platform.python_version(),
                         "qinglong": importlib.metadata.version("qinglong"),
                         **(versions or {}), "source": self.source,
                         "source_at_end": source_state()},
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()},
            **extra,
            "summary": summary,
            "repetitions": repetitions,
        }
        path = output_path(self.name, self.date, output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n")
        say(f"wrote {path.relative_to(REPOSITORY) if path.is_relative_to(REPOSITORY) else path}")
        return path


def verdict(results: list[dict[str, Any]], passed: str) -> int:
    """Every repetition's ``failed_checks``, printed loudly: exit code 1 if there is one,
    else ``passed`` is printed and 0 returned."""
    failed = [(r["repetition"], text) for r in results for text in r["failed_checks"]]
    if not failed:
        print(passed, flush=True)
        return 0
    print("!" * 80)
    print(f"!!! CHECKS FAILED ({len(failed)}):")
    for number, text in failed:
        print(f"!!!   repetition {number}: {text}")
    print("!" * 80, flush=True)
    return 1
