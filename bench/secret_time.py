"""Time of the secret detectors per MB, as the service runs them (behind ``Prefiltered``).

Inputs: the installed packages' READMEs (``METADATA``) and Python sources of the venv, cut
into 2 KB chunks as candidates arrive, and the labelled secrets set. Best of 3, ms per MB.

    python -m bench.secret_time
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from app.core.detectors import SECRET_DETECTORS
from app.core.detectors.prefilter import Prefiltered

CHUNK = 2048
ROOT = Path(sys.prefix)


def _chunks(texts: list[str]) -> list[str]:
    return [t[i:i + CHUNK] for t in texts for i in range(0, len(t), CHUNK)]


def _read(paths: list[Path], limit: int) -> list[str]:
    out, size = [], 0
    for p in sorted(paths):
        text = p.read_text(encoding="utf-8", errors="replace")
        out.append(text)
        size += len(text)
        if size >= limit:
            break
    return out


def inputs() -> dict[str, list[str]]:
    site = next(ROOT.glob("lib/python3*/site-packages"))
    data = Path(__file__).resolve().parents[1] / "tests" / "data" / "detectors"
    sets = {"package READMEs": _read(list(site.glob("*.dist-info/METADATA")), 1_500_000),
            "python sources": _read(list(site.glob("[a-m]*/**/*.py")), 2_000_000)}
    labelled = data / "secrets.jsonl"
    if labelled.exists():
        sets["secrets set"] = [labelled.read_text(encoding="utf-8")]
    return sets


def main() -> None:
    scan = Prefiltered(SECRET_DETECTORS)
    for label, texts in inputs().items():
        chunks = _chunks(texts)
        size = sum(len(c.encode()) for c in chunks) / 1e6
        best = min(_timed(scan, chunks) for _ in range(3))
        print(f"{label}: {size:.2f} MB, {best / size * 1000:.0f} ms per MB")


def _timed(scan: Prefiltered, chunks: list[str]) -> float:
    start = time.perf_counter()
    for c in chunks:
        scan(c)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
