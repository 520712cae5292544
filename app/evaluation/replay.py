"""``ctxgate eval replay``: a server's recorded turns replayed under variants (``POST
/v1/replays``, an ops or admin key in CTXGATE_API_KEY), summed up and judged.

The server does the work and answers refs, tokens and hashes only, so this runs anywhere:
nothing of the turns' content reaches the machine that asks. Pass/fail: every variant after
the first must fail no more turns than the first (an error is a turn the change would have
broken), and, with ``--min-overlap``, keep at least that median overlap of refs with what the
turns recorded.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml

from app.evaluation import report


def add_parser(ev: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = ev.add_parser("replay", help="replay recorded turns under variants (server-side)",
                      description="docs/eval.md#replaying-recorded-turns")
    p.add_argument("--url", required=True, help="the server (key in CTXGATE_API_KEY)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--session", help="the turns of this session")
    which.add_argument("--turn-ids", help="comma-separated turn ids")
    p.add_argument("--from", dest="turn_from", help="turn_id range start (inclusive)")
    p.add_argument("--to", dest="turn_to", help="turn_id range end (inclusive)")
    p.add_argument("--limit", type=int, default=50, help="at most this many, newest (≤ 200)")
    p.add_argument("--variant", type=Path, action="append", default=[],
                   help="a variant (YAML: name, budget, retrieval, redaction_profile, "
                        "bundle_revision, compaction); repeat; the first is the baseline")
    p.add_argument("--min-overlap", type=float, default=None,
                   help="fail when a variant's median ref overlap with the recorded turns "
                        "is below this")
    p.add_argument("--out", type=Path, default=Path("eval-report"),
                   help="directory for replay.json and replay.html")
    p.set_defaults(func=cmd_replay)


def _variant(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: a variant is a mapping (name, budget, retrieval, ...)")
    data.setdefault("name", path.stem)
    return data


def verdict(summary: dict[str, dict[str, Any]], names: list[str],
            min_overlap: float | None) -> list[str]:
    """What fails the replay, as lines; empty when it passes."""
    failed: list[str] = []
    base = summary[names[0]]
    base_errors = base["turns"] - base["ok"]
    for name in names:
        s = summary[name]
        if s["turns"] - s["ok"] > base_errors:
            failed.append(f"{name}: {s['turns'] - s['ok']} turns failed ({s['errors']}), "
                          f"baseline {names[0]} {base_errors}")
        overlap = s["median_overlap_with_recorded"]
        if min_overlap is not None and overlap is not None and overlap < min_overlap:
            failed.append(f"{name}: median overlap {overlap} < {min_overlap}")
    return failed


def cmd_replay(args: argparse.Namespace) -> None:
    from ctxgate_client import CtxgateClient, CtxgateError

    key = os.environ.get("CTXGATE_API_KEY")
    if not key:
        raise SystemExit("ctxgate eval replay needs an ops or admin key in CTXGATE_API_KEY")
    variants = [_variant(p) for p in args.variant]
    try:
        with CtxgateClient(args.url, key) as client:
            got = client.replay(
                turn_ids=args.turn_ids.split(",") if args.turn_ids else (),
                session_id=args.session, turn_id_from=args.turn_from, turn_id_to=args.turn_to,
                limit=args.limit, variants=variants)
    except CtxgateError as exc:
        raise SystemExit(f"ctxgate eval replay: {exc}") from exc
    data = got.model_dump()
    names = list(data["summary"])
    failed = verdict(data["summary"], names, args.min_overlap)
    data["passed"], data["failed"] = not failed, failed
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "replay.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    (args.out / "replay.html").write_text(report.replay_html(data), encoding="utf-8")
    print(f"{'variant':<20} {'turns':>5} {'ok':>4} {'changed':>7} {'tokens':>8} {'overlap':>7}")
    for name in names:
        s = data["summary"][name]
        print(f"{name:<20} {s['turns']:>5} {s['ok']:>4} {s['turns_changed']:>7} "
              f"{s['median_tokens']!s:>8} {s['median_overlap_with_recorded']!s:>7}")
    skipped = [t for t in data["turns"] if t["status"] != "replayed"]
    if skipped:
        print(f"not replayed: {len(skipped)} ("
              + ", ".join(f"{t['turn_id']}: {t['status']}" for t in skipped[:5]) + ")")
    print("\n".join(failed))
    print(f"{'PASSED' if not failed else 'FAILED'}: {args.out / 'replay.html'}")
    sys.exit(0 if not failed else 1)
