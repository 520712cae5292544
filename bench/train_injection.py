"""Train, measure and export the learned injection detector (``app.core.detectors.learned``).

Reads public corpora from local git snapshots (one directory per repository, named
``owner+name``, each holding a bare-ish git directory ``repo``; the commits used are pinned in
``SOURCES`` and read with ``git show``), never from the network, and never writes them
anywhere: only the weights (``app/core/detectors/injection_weights.py``) and a JSON report
are written. The sources, their commits and licences are listed in docs/detectors.md.

    python -m bench.train_injection --mirror /work/.mirror [--write] [--report out.json]
                                    [--scores s.jsonl | --from-scores s.jsonl]

``--scores`` saves the held-out scores; ``--from-scores`` reports from them without training
(the model does not read the rules, so a change of the rules alone needs no retraining).

Held-out method: sources are grouped into folds (``FOLDS``); each fold's texts are scored by
a model trained on every other fold, so a score never comes from a model that saw that
corpus. The threshold is the lowest that keeps the pooled held-out benign false-positive rate
at or under ``TARGET_FPR``. ``tensortrust`` (attacks written by players of a public game; the
data repository states no licence) is scored only, never trained on. The exported model is
trained on every trainable source with that threshold.
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import io
import json
import math
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.core.detectors.injection import INJECTION_DETECTORS
from app.core.detectors.learned import (
    Feature,
    LinearModel,
    parse_model,
    score,
    tokens,
    window_features,
    windows,
)

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = ROOT / "app" / "core" / "detectors" / "injection_weights.py"
OWN = ROOT / "tests" / "data" / "detectors"
WINDOW, STRIDE = 48, 24
L2 = 1e-4
STEPS = 400
MIN_COUNT = 2
KEEP = 0.02  # features whose |weight| is below this are not exported
TARGET_FPR = 0.01
SEED = 7

# repository -> (commit, licence)
SOURCES = {
    "JailbreakBench/artifacts": ("909e68c01d94222b8ad2e397a017e2e12e2adb73", "MIT"),
    "sherdencooper/GPTFuzz": ("1eddeb565740ae311b5f4950492b011a6f866fe7", "MIT"),
    "whylabs/langkit": ("5d6cab1e2ff32181ba5c514aaa2a4473421dc413", "Apache-2.0"),
    "swisskyrepo/PayloadsAllTheThings": ("f9fa51417886ac11476cb62db2dff21773dc570b", "MIT"),
    "protectai/llm-guard": ("53af270c69316ed82cb71ba7b19d11b55bda3151", "MIT"),
    "greshake/llm-security": ("87f4b7ffa568b7261a79b31573068d8113319212", "MIT"),
    "openai/grade-school-math": ("3101c7d5072418e28b9008a6636bde82a006892c", "MIT"),
    "tldr-pages/tldr": ("08e345f42639f67d99282813247ac670dc6e87cb", "CC-BY-4.0"),
    "Anduin2017/HowToCook": ("cbeb536760320efe24f9a61fe354a318d5887e30", "Unlicense"),
    "HumanCompatibleAI/tensor-trust-data": ("e2385ea9cf448c9641b96e2e39f113ed4979a5b0",
                                            "none stated: scored only, never trained on"),
}
FOLDS = (
    ("jbb", "tldr-en"),
    ("gptfuzz", "langkit", "howtocook"),
    ("payloads", "greshake", "gsm8k"),
    ("llmguard", "tldr-zh"),
    ("own",),
)
EVAL_ONLY = ("tensortrust",)


@dataclass(frozen=True, slots=True)
class Sample:
    source: str
    label: int  # 1: injection or jailbreak, 0: benign
    text: str
    origin: str = ""  # the payload an in-carrier copy was made from ("": the text itself)


def half(s: Sample) -> str:
    """``dev`` or ``blind`` by a hash of the sample's payload (an in-carrier copy goes with its
    bare payload): rules are written from the dev half's misses only, so the blind half's
    rules columns stay an estimate for text the rule writer never read."""
    digest = hashlib.sha256((s.origin or s.text).encode("utf-8")).digest()
    return "dev" if digest[0] % 2 == 0 else "blind"


class Mirror:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.git = shutil.which("git") or "git"

    def _git(self, repo: str, *args: str) -> bytes:
        where = self.root / repo.replace("/", "+") / "repo"
        return subprocess.run([self.git, "-C", str(where), *args],  # noqa: S603 - fixed argv
                              check=True, capture_output=True).stdout

    def show(self, repo: str, path: str) -> str:
        return self._git(repo, "show", f"{SOURCES[repo][0]}:{path}").decode("utf-8", "replace")

    def files(self, repo: str, under: str) -> list[str]:
        out = self._git(repo, "ls-tree", "-r", "-z", "--name-only", SOURCES[repo][0], under)
        return [p for p in out.decode("utf-8").split("\0") if p]


def _clean(texts: Iterable[str], *, low: int = 12, high: int = 6000) -> list[str]:
    seen: set[str] = set()
    out = []
    for t in texts:
        t = t.strip()
        key = " ".join(t.lower().split())
        if low <= len(t) <= high and key not in seen:
            seen.add(key)
            out.append(t)
    return out


def jbb(m: Mirror) -> list[str]:
    repo = "JailbreakBench/artifacts"
    paths = [p for p in m.files(repo, "attack-artifacts")
             if p.endswith(".json") and "/" in p.split("attack-artifacts/")[1]
             and any(k in p for k in ("/PAIR/", "/JBC/", "/prompt_with_random_search/"))]
    prompts = []
    for p in paths:
        for j in json.loads(m.show(repo, p)).get("jailbreaks", []):
            if j.get("prompt"):
                prompts.append(j["prompt"])
    return _clean(prompts)


def gptfuzz(m: Mirror) -> list[str]:
    repo = "sherdencooper/GPTFuzz"
    questions = [r["text"] for r in csv.DictReader(io.StringIO(
        m.show(repo, "datasets/questions/question_list.csv")))]
    rows = list(csv.DictReader(io.StringIO(m.show(repo, "datasets/prompts/GPTFuzzer.csv"))))
    return _clean(r["text"].replace("[INSERT PROMPT HERE]", questions[i % len(questions)])
                  for i, r in enumerate(rows))


def langkit(m: Mirror) -> tuple[list[str], list[str]]:
    repo = "whylabs/langkit"
    themes = json.loads(m.show(repo, "langkit/themes.json"))
    chats = json.loads(m.show(repo, "langkit/whylogs/reference_chats.json"))
    benign = [t for c in chats["archived_chats"] for t in (c["prompt"], c["response"])]
    return _clean(themes["jailbreak"]), _clean(benign)


def payloads(m: Mirror) -> list[str]:
    """Payloads shown in the Prompt Injection page: inline code in list items and table
    rows, and fenced blocks, from the injection sections on."""
    text = m.show("swisskyrepo/PayloadsAllTheThings", "Prompt Injection/README.md")
    text = text[text.find("## Direct Prompt Injection"):]
    found = re.findall(r"```[a-z0-9]*\n(.*?)```", text, re.S)
    found += re.findall(r"`([^`\n]{20,})`", re.sub(r"```.*?```", "", text, flags=re.S))
    return _clean(found, low=20)


def llmguard(m: Mirror) -> tuple[list[str], list[str]]:
    src = m.show("protectai/llm-guard", "tests/input_scanners/test_prompt_injection.py")
    pos: list[str] = []
    neg: list[str] = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Tuple) and len(node.elts) == 4:
            prompt, valid = node.elts[1], node.elts[2]
            try:
                text, ok = ast.literal_eval(prompt), ast.literal_eval(valid)
            except ValueError:
                continue
            if isinstance(text, str) and isinstance(ok, bool):
                (neg if ok else pos).append(text)
    return _clean(pos), _clean(neg)


def greshake(m: Mirror) -> list[str]:
    repo = "greshake/llm-security"
    out = []
    for p in m.files(repo, "scenarios"):
        if not p.endswith(".py"):
            continue
        try:
            tree = ast.parse(m.show(repo, p))
        except SyntaxError:  # a deliberately broken file of a code-completion scenario
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if any("inject" in n or "payload" in n for n in names):
                    out.append(node.value.value)
    return _clean(out)


def gsm8k(m: Mirror, n: int) -> list[str]:
    lines = m.show("openai/grade-school-math", "grade_school_math/data/test.jsonl").splitlines()
    return _clean(json.loads(line)["question"] for line in lines[:n])


def tldr(m: Mirror, under: str, n: int) -> list[str]:
    repo = "tldr-pages/tldr"
    paths = sorted(p for p in m.files(repo, under) if p.endswith(".md"))
    paths = random.Random(SEED).sample(paths, min(n, len(paths)))
    return _clean(m.show(repo, p) for p in paths)


def howtocook(m: Mirror, n: int) -> list[str]:
    repo = "Anduin2017/HowToCook"
    paths = sorted(p for p in m.files(repo, "dishes") if p.endswith(".md"))
    out = []
    for p in random.Random(SEED).sample(paths, min(n, len(paths))):
        out += [s for s in re.split(r"\n(?=## )", m.show(repo, p)) if len(s) > 40]
    return _clean(out)


def tensortrust(m: Mirror) -> list[str]:
    repo = "HumanCompatibleAI/tensor-trust-data"
    out = []
    for p in ("benchmarks/hijacking-robustness/v1/hijacking_robustness_dataset.jsonl",
              "benchmarks/extraction-robustness/v1/extraction_robustness_dataset.jsonl"):
        out += [json.loads(line)["attack"] for line in m.show(repo, p).splitlines() if line]
    return _clean(out)


def own() -> tuple[list[str], list[str]]:
    """The project's own labelled cases (tests/data/detectors): injections, and every
    benign text of the injection, secret, personal-data and mixed sets."""
    pos, neg = [], []
    for path in sorted(OWN.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            case = json.loads(line)
            expect = case.get("expect") or []
            if any(e.startswith("injection") for e in expect):
                pos.append(case["text"])
            elif not expect or path.name == "injection.jsonl":
                neg.append(case["text"])
    return _clean(pos, low=1), _clean(neg, low=1)


def load(mirror: Path) -> list[Sample]:
    m = Mirror(mirror)
    lk_pos, lk_neg = langkit(m)
    lg_pos, lg_neg = llmguard(m)
    own_pos, own_neg = own()
    parts: list[tuple[str, int, list[str]]] = [
        ("jbb", 1, jbb(m)), ("gptfuzz", 1, gptfuzz(m)), ("langkit", 1, lk_pos),
        ("payloads", 1, payloads(m)), ("llmguard", 1, lg_pos), ("greshake", 1, greshake(m)),
        ("own", 1, own_pos), ("tensortrust", 1, tensortrust(m)),
        ("gsm8k", 0, gsm8k(m, 1500)), ("tldr-en", 0, tldr(m, "pages/common", 1500)),
        ("tldr-zh", 0, tldr(m, "pages.zh", 1500)), ("howtocook", 0, howtocook(m, 400)),
        ("langkit", 0, lk_neg), ("llmguard", 0, lg_neg), ("own", 0, own_neg),
    ]
    samples = [Sample(src, label, t) for src, label, texts in parts for t in texts]
    return samples + embedded(samples)


def _fold_of(source: str) -> tuple[str, ...]:
    return next((f for f in FOLDS if source in f), (source,))


def embedded(samples: list[Sample]) -> list[Sample]:
    """Each short payload again, set inside a slice of benign text of its own fold (a line
    or two before and after), as injections arrive in e-mails, pages and tool results: the
    corpora are mostly bare jailbreaks. Kept short so the payload is most of a window."""
    rng = random.Random(SEED)
    out = []
    for s in samples:
        if not s.label or s.source in EVAL_ONLY or len(tokens(s.text)) > WINDOW // 2:
            continue
        carriers = [c.text for c in samples if not c.label and c.source in _fold_of(s.source)]
        if not carriers:
            continue
        lines = [ln for ln in rng.choice(carriers).splitlines() if ln.strip()] or [""]
        at = rng.randrange(len(lines))
        before, after = lines[max(0, at - 2):at], lines[at:at + 2]
        out.append(Sample(s.source, 1, "\n".join([*before, s.text, *after])[:1200], s.text))
    return out


# -- training ------------------------------------------------------------------------------

def _rows(samples: list[Sample]) -> Iterator[tuple[int, float, Counter[Feature]]]:
    """Per window: (label, sample weight, feature counts). A text's windows share weight
    1/sqrt(windows) so a long jailbreak does not outweigh a hundred short ones."""
    for s in samples:
        toks = tokens(s.text)
        spans = windows(len(toks), WINDOW, STRIDE)
        for a, b in spans:
            yield s.label, 1 / math.sqrt(len(spans)), Counter(window_features(toks, a, b))


def train(samples: list[Sample]) -> tuple[float, dict[Feature, float]]:
    """L2-regularised logistic regression, full-batch Adam, classes weighted equally."""
    rows = list(_rows(samples))
    df: Counter[Feature] = Counter(f for _, _, c in rows for f in c)
    vocab = {f: i for i, f in enumerate(sorted((f for f, n in df.items() if n >= MIN_COUNT),
                                               key=repr))}
    idx, val, ptr = [], [], [0]
    for _, _, counts in rows:
        m = sum(counts.values())
        for f, n in counts.items():
            if f in vocab:
                idx.append(vocab[f])
                val.append(n / math.sqrt(m))
        ptr.append(len(idx))
    y = np.array([r[0] for r in rows], dtype=np.float64)
    sw = np.array([r[1] for r in rows])
    for label in (0, 1):
        sw[y == label] /= sw[y == label].sum()
    indices, data = np.array(idx, dtype=np.int64), np.array(val)
    lengths = np.diff(np.array(ptr))
    row_of = np.repeat(np.arange(len(rows)), lengths)
    w, b = np.zeros(len(vocab)), 0.0
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), 0.0, 0.0
    lr, beta1, beta2, eps = 0.05, 0.9, 0.999, 1e-8
    for t in range(1, STEPS + 1):
        z = np.bincount(row_of, weights=data * w[indices], minlength=len(rows)) + b
        p = 1 / (1 + np.exp(-z))
        r = (p - y) * sw
        gw = np.bincount(indices, weights=data * r[row_of], minlength=len(w)) + L2 * w
        gb = float(r.sum())
        mw = beta1 * mw + (1 - beta1) * gw
        vw = beta2 * vw + (1 - beta2) * gw * gw
        mb = beta1 * mb + (1 - beta1) * gb
        vb = beta2 * vb + (1 - beta2) * gb * gb
        w -= lr * (mw / (1 - beta1 ** t)) / (np.sqrt(vw / (1 - beta2 ** t)) + eps)
        b -= lr * (mb / (1 - beta1 ** t)) / (math.sqrt(vb / (1 - beta2 ** t)) + eps)
    inv = {i: f for f, i in vocab.items()}
    return b, {inv[i]: float(w[i]) for i in range(len(w))}


def model_of(bias: float, weights: dict[Feature, float], threshold: float) -> LinearModel:
    return parse_model(serialize(bias, weights, threshold))


def serialize(bias: float, weights: dict[Feature, float], threshold: float) -> str:
    head = f"bias {bias:.4f}\nthreshold {threshold:.4f}\nwindow {WINDOW}\nstride {STRIDE}"
    kept = sorted(((round(w, 3), f) for f, w in weights.items() if abs(w) >= KEEP),
                  key=lambda x: (-abs(x[0]), repr(x[1])))
    lines = [f"{w}\t{f}" if isinstance(f, str) else f"{w}\t{f[0]}\t{f[1]}" for w, f in kept]
    return head + "\n\n" + "\n".join(lines) + "\n"


# -- measuring ------------------------------------------------------------------------------

def rules(text: str) -> bool:
    return any(d(text) for d in INJECTION_DETECTORS)


def threshold_for(benign: list[float], target: float = TARGET_FPR) -> float:
    """The lowest threshold flagging at most ``target`` of ``benign`` scores."""
    ranked = sorted(benign, reverse=True)
    allowed = int(target * len(ranked))
    return ranked[allowed] + 1e-4 if allowed < len(ranked) else -math.inf


def heldout(samples: list[Sample]) -> tuple[list[tuple[Sample, float]],
                                             tuple[float, dict[Feature, float]]]:
    """Every sample with a score from a model that never saw its source, and the model
    trained on every trainable source (the one exported; it scores ``EVAL_ONLY``)."""
    scored: list[tuple[Sample, float]] = []
    trainable = [s for s in samples if s.source not in EVAL_ONLY]
    for fold in FOLDS:
        bias, weights = train([s for s in trainable if s.source not in fold])
        model = model_of(bias, weights, 0.0)
        scored += [(s, score(model, s.text)) for s in trainable if s.source in fold]
        print(f"fold {fold}: trained", file=sys.stderr)
    bias, weights = train(trainable)
    model = model_of(bias, weights, 0.0)
    scored += [(s, score(model, s.text)) for s in samples if s.source in EVAL_ONLY]
    return scored, (bias, weights)


def report(scored: list[tuple[Sample, float]], threshold: float) -> dict[str, object]:
    def rate(items: list[tuple[Sample, float, bool]], pick: str) -> float:
        hits = [(s.label, sc >= threshold, r) for s, sc, r in items]
        got = [{"model": m, "rules": r, "either": m or r}[pick] for _, m, r in hits]
        return round(sum(got) / len(got), 3) if got else float("nan")

    def rates(items: list[tuple[Sample, float, bool]]) -> dict[str, float]:
        return {"n": len(items), **{k: rate(items, k) for k in ("rules", "model", "either")}}

    with_rules = [(s, sc, rules(s.text)) for s, sc in scored]
    out: dict[str, object] = {"threshold": round(threshold, 4)}
    for name, eval_only in (("heldout", False), ("tensortrust", True)):
        part = [x for x in with_rules if (x[0].source in EVAL_ONLY) is eval_only]
        pos, neg = [x for x in part if x[0].label], [x for x in part if not x[0].label]
        out[name] = {k: {"recall": rate(pos, k), "fpr": rate(neg, k) if neg else None,
                         "positives": len(pos), "benign": len(neg)}
                     for k in ("rules", "model", "either")}
    per: dict[str, dict[str, float]] = {}
    for src in sorted({s.source for s, _ in scored}):
        for label in (0, 1):
            part = [x for x in with_rules if x[0].source == src and x[0].label == label]
            if part:
                key = "recall" if label else "fpr"
                per[f"{src}:{'pos' if label else 'neg'}"] = {
                    "n": len(part), **{f"{k}_{key}": rate(part, k)
                                       for k in ("rules", "model", "either")}}
    out["per_source"] = per
    halves: dict[str, dict[str, float]] = {}
    for name in ("dev", "blind"):
        part = [x for x in with_rules if half(x[0]) == name]
        for label, key in ((1, "recall"), (0, "fpr")):
            held = [x for x in part if x[0].label == label and x[0].source not in EVAL_ONLY]
            game = [x for x in part if x[0].label == label and x[0].source in EVAL_ONLY]
            for tag, items in (("heldout", held), ("tensortrust", game)):
                if items:
                    halves[f"{name}:{tag}:{key}"] = rates(items)
        for src in sorted({s.source for s, _, _ in part}):
            pos = [x for x in part if x[0].source == src and x[0].label == 1]
            if pos:
                halves[f"{name}:{src}:recall"] = rates(pos)
    out["halves"] = halves
    return out


MODULE = '''# ruff: noqa: E501 - a feature may be a long token (a pasted hash or base64 run)
"""Weights of the learned injection detector (``app.core.detectors.learned``).

Generated by ``python -m bench.train_injection --mirror DIR --write``; do not edit. Trained
on public corpora (sources, commits and licences: docs/detectors.md, "Learned injection
detector"); held-out numbers in the same section.
"""

from app.core.detectors.learned import LinearModel, parse_model

MODEL: LinearModel = parse_model("""\\
{body}""")
'''


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, required=True)
    ap.add_argument("--write", action="store_true", help="write the weights module")
    ap.add_argument("--report", type=Path)
    ap.add_argument("--scores", type=Path, help="save the held-out scores (JSON lines)")
    ap.add_argument("--from-scores", type=Path, help="report from saved held-out scores: no "
                    "training, the rules as they are now (for a change of the rules alone)")
    args = ap.parse_args(argv)
    random.seed(SEED)
    t0 = time.time()
    samples = load(args.mirror)
    counts = Counter((s.source, s.label) for s in samples)
    print(json.dumps({f"{k[0]}:{k[1]}": v for k, v in sorted(counts.items())}), file=sys.stderr)
    final: tuple[float, dict[Feature, float]] | None
    if args.from_scores:
        saved = [json.loads(line) for line in args.from_scores.read_text().splitlines()]
        if [(r["source"], r["label"]) for r in saved] != [(s.source, s.label) for s in samples]:
            raise SystemExit("the saved scores are not of these samples (other snapshots?)")
        scored = [(s, float(r["score"])) for s, r in zip(samples, saved, strict=True)]
        final = None
    else:
        scored, final = heldout(samples)
        order = {id(s): i for i, s in enumerate(samples)}  # in load order, as --scores saves
        scored.sort(key=lambda x: order[id(x[0])])
    if args.scores:
        args.scores.write_text("".join(json.dumps({"source": s.source, "label": s.label,
                                                   "score": round(sc, 6)}) + "\n"
                                       for s, sc in scored))
    benign = [sc for s, sc in scored if not s.label and s.source not in EVAL_ONLY]
    threshold = threshold_for(benign)
    result = report(scored, threshold)
    result["samples"] = {f"{k[0]}:{k[1]}": v for k, v in sorted(counts.items())}
    print(json.dumps(result, indent=1))
    if args.report:
        args.report.write_text(json.dumps(result, indent=1) + "\n")
    if args.write:
        if final is None:
            raise SystemExit("--write needs training: drop --from-scores")
        body = serialize(*final, threshold)
        if '"""' in body or "\\" in body:
            raise SystemExit("a feature would break the generated module's string")
        WEIGHTS.write_text(MODULE.format(body=body), encoding="utf-8")
    print(f"done in {time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
