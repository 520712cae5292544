"""``ctxgate eval run|compare|replay|generate``: argument parsing and where the server comes from.

Without ``--url`` the suite runs on embedded stores and a ``ctxgate serve`` started for it
(one per configuration, so a configuration's ``env`` applies); with ``--url`` it runs against
that server, with the platform admin token from ``--admin-token`` or CTXGATE_ADMIN_TOKEN.
Exit status: 0 when the run (or the comparison) passes, 1 when it fails.

``compare --record BUNDLE@REVISION`` also records the comparison as an evaluation of that
bundle revision (B, against ``--against``, A) on the server at ``--record-url`` (default:
``--url``) with the admin or ops key in CTXGATE_API_KEY: passed or not, it is what the
tenant's release gate reads (docs/bundles.md).

``replay`` asks a server to replay its recorded turns under variants
(``app.evaluation.replay``).

``generate`` writes a ``facts`` suite (``app.evaluation.generate``) from the retrieval
benchmark's generated data (``--from bench``) or a JSONL file in its format (``--from jsonl
PATH``); it starts nothing and calls no server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from app.evaluation import replay, report
from app.evaluation.runner import Config, Runner, RunResult, progress_bar
from app.evaluation.suite import Suite, load


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ev = sub.add_parser("eval", help="run evaluation suites (docs/eval.md)").add_subparsers(
        dest="eval", required=True)
    run = ev.add_parser("run", help="run a suite and report its metrics",
                        description="SUITE is a path or a shipped suite's name (starter).")
    run.add_argument("suite")
    run.add_argument("--config", type=Path, help="a configuration file (YAML: name, request, "
                                                 "env)")
    compare = ev.add_parser("compare", help="one suite under configurations A and B",
                            description="Fails on a metric where B is worse than A by more "
                                        "than the suite's max_regression, or on a threshold.")
    compare.add_argument("suite")
    compare.add_argument("--a", type=Path, required=True, help="configuration A (YAML)")
    compare.add_argument("--b", type=Path, required=True, help="configuration B (YAML)")
    compare.add_argument("--record", metavar="BUNDLE@REVISION",
                         help="record the result as an evaluation of this bundle revision "
                              "(B's), with the key in CTXGATE_API_KEY")
    compare.add_argument("--against", metavar="REVISION",
                         help="with --record: the revision A pinned (the live one)")
    compare.add_argument("--record-url", help="with --record: the bundle's server (default: "
                                              "--url)")
    for p in (run, compare):
        p.add_argument("--url", help="a running server (default: embedded, started here)")
        p.add_argument("--admin-token", help="its platform admin token (default: "
                                             "CTXGATE_ADMIN_TOKEN)")
        p.add_argument("--out", type=Path, default=Path("eval-report"),
                       help="directory for report.json and report.html")
    gen = ev.add_parser("generate", help="a facts suite with ground-truth evidence",
                        description="From the retrieval benchmark's data (--from bench) or a "
                                    "JSONL dataset in its format (--from jsonl PATH); "
                                    "docs/eval.md#generating-a-fact-set")
    gen.add_argument("--from", dest="source", choices=("bench", "jsonl"), required=True)
    gen.add_argument("path", nargs="?", type=Path, help="with --from jsonl: the dataset")
    gen.add_argument("--users", type=int, default=2, help="--from bench: users (default 2)")
    gen.add_argument("--seed", type=int, default=7, help="--from bench: seed (default 7)")
    gen.add_argument("-o", "--out", type=Path, required=True, help="the suite file to write")
    gen.add_argument("--name", help="the suite's name (default facts-bench / facts-<file>)")
    gen.add_argument("--budget", type=int, default=4000, help="each turn's max_tokens")
    gen.add_argument("--k", type=int, default=5, help="the k of Recall@k")
    gen.add_argument("--min-recall", type=float, default=0.5,
                     help="the recall_at_k threshold (default 0.5)")
    gen.add_argument("--max-freshness-error", type=float, default=None,
                     help="a freshness_error threshold (default: none)")
    replay.add_parser(ev)
    run.set_defaults(func=cmd_run)
    compare.set_defaults(func=cmd_compare)
    gen.set_defaults(func=cmd_generate)


def _config(path: Path | None) -> Config:
    if path is None:
        return Config()
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: a configuration is a mapping (name, request, env)")
    return Config.parse(data)


@contextlib.contextmanager
def _servers(args: argparse.Namespace, configs: list[Config]) -> Iterator[list[tuple[str, str]]]:
    """(base URL, admin token) for each configuration."""
    if args.url:
        token = args.admin_token or os.environ.get("CTXGATE_ADMIN_TOKEN")
        if not token:
            raise SystemExit("--url needs --admin-token or CTXGATE_ADMIN_TOKEN")
        if any(c.env for c in configs):
            raise SystemExit("a configuration's env applies to an embedded server only")
        yield [(args.url, token)] * len(configs)
        return
    from app.localserver import local_server, local_stores

    with local_stores(prefix="ctxgate-eval-") as (owner, redis), contextlib.ExitStack() as stack:
        yield [
            (s.base_url, s.admin_token) for s in (
                stack.enter_context(local_server(owner, redis, f"ctxgate-eval-{i}", 1, c.env))
                for i, c in enumerate(configs))]


def _run(suite: Suite, base: str, token: str, config: Config) -> RunResult:
    return asyncio.run(Runner(base, token, config=config, progress=progress_bar).run(suite))


def _write(out: Path, data: dict[str, Any], page: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    (out / "report.html").write_text(page, encoding="utf-8")


def cmd_run(args: argparse.Namespace) -> None:
    suite, config = load(args.suite), _config(args.config)
    with _servers(args, [config]) as [(base, token)]:
        result = _run(suite, base, token, config)
    data = report.run_json(result)
    _write(args.out, data, report.run_html(data))
    for c in data["cases"]:
        print(f"{'PASS' if c['passed'] else 'FAIL'} {c['set']:<11} {c['id']}"
              + "".join(f"\n     {f}" for f in c["failed_checks"]))
    print(orjson.dumps(data["metrics"], option=orjson.OPT_INDENT_2).decode())
    print(f"{'PASSED' if data['passed'] else 'FAILED'}: {args.out / 'report.html'}")
    sys.exit(0 if data["passed"] else 1)


def _record_target(args: argparse.Namespace) -> tuple[str, str, str, str] | None:
    """(server, key, bundle id, revision) for ``--record``, checked before the runs."""
    if not args.record:
        return None
    bundle_id, _, revision = args.record.rpartition("@")
    url, key = args.record_url or args.url, os.environ.get("CTXGATE_API_KEY")
    if not bundle_id or not revision:
        raise SystemExit("--record takes BUNDLE@REVISION")
    if not url or not key:
        raise SystemExit("--record needs --record-url (or --url) and CTXGATE_API_KEY")
    return url, key, bundle_id, revision


def _record(target: tuple[str, str, str, str], against: str | None, data: dict[str, Any],
            report_json: bytes) -> None:
    from ctxgate_client import CtxgateClient, CtxgateError

    url, key, bundle_id, revision = target
    try:
        with CtxgateClient(url, key) as client:
            client.record_bundle_evaluation(
                bundle_id, revision, suite=data["b"]["suite"]["name"],
                suite_version=data["b"]["suite"]["version"], passed=data["passed"],
                report_sha256=hashlib.sha256(report_json).hexdigest(),
                metrics=data["b"]["metrics"], against_revision=against)
    except CtxgateError as exc:
        raise SystemExit(f"ctxgate eval compare: recording the evaluation failed: {exc}"
                         ) from exc
    print(f"recorded: {bundle_id}@{revision} "
          f"{'passed' if data['passed'] else 'failed'} against {against or 'nothing'}")


def cmd_compare(args: argparse.Namespace) -> None:
    suite, a, b = load(args.suite), _config(args.a), _config(args.b)
    target = _record_target(args)
    with _servers(args, [a, b]) as [(base_a, token_a), (base_b, token_b)]:
        ra, rb = _run(suite, base_a, token_a, a), _run(suite, base_b, token_b, b)
    data = report.compare_json(ra, rb)
    _write(args.out, data, report.compare_html(data))
    if target is not None:
        _record(target, args.against, data, (args.out / "report.json").read_bytes())
    for row in data["deltas"]:
        mark = "REGRESSION" if row["regression"] else ""
        print(f"{row['metric']:<24} A={row['a']!s:<8} B={row['b']!s:<8} "
              f"delta={row['delta']!s:<8} {mark}")
    print(f"{'PASSED' if data['passed'] else 'FAILED'}"
          + (f" ({', '.join(data['failed'])})" if data["failed"] else "")
          + f": {args.out / 'report.html'}")
    sys.exit(0 if data["passed"] else 1)


def cmd_generate(args: argparse.Namespace) -> None:
    from app.evaluation.generate import facts_suite, file_digest
    from bench import retrieval_data

    if args.source == "jsonl":
        if args.path is None:
            raise SystemExit("--from jsonl needs the dataset's PATH")
        data = retrieval_data.load(args.path)
        name = args.name or "facts-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", args.path.stem)[:58]
        origin = f"jsonl-{file_digest(args.path)}"
    else:
        if args.path is not None:
            raise SystemExit("--from bench takes no PATH (--users, --seed)")
        data = retrieval_data.generate(args.seed, args.users)
        name = args.name or "facts-bench"
        origin = f"bench-seed{args.seed}-users{args.users}"
    suite = facts_suite(data, name=name, version=f"g2-{origin}-k{args.k}-b{args.budget}",
                        budget=args.budget, k=args.k, min_recall=args.min_recall,
                        max_freshness_error=args.max_freshness_error)
    Suite.model_validate(suite)  # what `eval run` will load: refuse to write what it refuses
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(yaml.safe_dump(suite, sort_keys=False, allow_unicode=True, width=100),
                        encoding="utf-8")
    turns = sum(s["call"] == "POST /v1/context" for c in suite["cases"] for s in c["steps"])
    print(f"{args.out}: {len(suite['cases'])} cases, {turns} questions "
          f"({suite['name']} {suite['version']})")
