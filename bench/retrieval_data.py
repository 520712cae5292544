"""The retrieval benchmark's data: knowledge documents, users' earlier sessions, questions with
their ground-truth evidence; generated from a seed or read from a JSONL file.

Generated (``generate(seed, users)``), the same seed and user count give the same data:

- **Knowledge**: one runbook per fictional service, two services per user (``Falcon Ledger``,
  ``Falcon Gateway``, ``Heron Ledger``: first names and kinds recur, so services look alike),
  a fifth of them in Chinese, each stating 5-6 facts of the same ten kinds (retries, owner,
  region, ...) among filler sentences on the same topics, long enough for 2-3 server chunks;
  per service a changelog with a line on each fact's topic and on-call notes with a paragraph
  under each topic, neither with a value; half as many *distractor* documents (incident
  reviews) that restate two services' facts with other values, as history or unapproved
  proposals: lexically closest to the evidence, yet not it.
- **Sessions**: each user (a fifth write Chinese) has 8 earlier sessions of 4-6 exchanges:
  chatter, questions on a fact's topic that state nothing, 5 personal facts (some said inside
  a longer message), per fact a distractor (the topic, said of someone else) and a near miss
  (the user on the topic, not answering it) in any session, and for facts that change (where
  they live, their job) the first statement in an early session and its update in a later
  one: the update is the evidence, the first statement its question's ``stale`` event.
- **Questions**: per user 3 about their own earlier sessions and 3 about the knowledge, each
  lexical or a paraphrase (``bench.retrieval_templates``) at even odds.

The JSONL format (``load``/``dump``), one object a line, in the order they are written:

- ``{"type": "document", "doc_id", "title", "text", "lang"}``
- ``{"type": "session", "session_id", "user_id", "events": [{"role", "content"}, ...]}``
  (a user's sessions are written in file order, which is their chronology)
- ``{"type": "question", "qid", "user_id", "kind": "knowledge"|"session", "query", "style",
  "lang", "evidence": [...]}``: knowledge evidence ``{"doc_id", "quote"}`` (a passage of the
  document's text: every server chunk holding it is evidence), session evidence
  ``{"session_id", "event"}`` (the event's 0-based index in its session). A question is
  answered when any one of its evidence items is in the context. Optional ``"stale"``: events
  (same shape) holding a superseded answer (where the user lived before they moved); the
  benchmark ignores them, the fact sets ``ctxgate eval generate`` makes from this format
  expect them absent (docs/eval.md).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.retrieval_templates import (
    CHATTER,
    FILLER,
    KNOWLEDGE,
    MENTIONS,
    NOT_CURRENT,
    PERSONAL,
    REPLIES,
    TOPICAL,
    TOPICS,
    Fact,
)

SESSIONS_PER_USER = 8
FACTS_PER_USER = 5
QUESTIONS_PER_USER = {"session": 3, "knowledge": 3}
STALE = "stale:"  # a plan key's prefix: the superseded first statement of a fact that changes

_NUM = {"n": range(2, 10), "s": (15, 30, 45, 60, 90, 120), "d": (7, 14, 30, 45, 60, 90, 180),
        "t": range(8, 16), "w": (2, 3, 4), "r": (60, 120, 300, 600, 1000, 1200, 3000),
        "ms": (250, 500, 800, 1500, 2000, 3000, 5000), "h": (1, 4, 6, 12, 24),
        "k": (3, 5, 7, 10, 14, 30), "hour": range(8, 18)}
_COMMON = {
    "team": ("Payments Core", "Platform Reliability", "Data Plumbing", "Identity", "Storage",
             "Edge Networking", "Observability", "Search Quality", "Messaging"),
    "region": ("eu-west-1", "us-east-2", "ap-southeast-1", "eu-central-1", "us-west-2",
               "ap-northeast-1", "sa-east-1"),
    "db": ("PostgreSQL", "MySQL", "Cassandra", "CockroachDB", "MongoDB", "ScyllaDB"),
    "dbname": ("ledger-main-03", "core-store-11", "state-primary-07", "events-db-02",
               "records-09", "blue-cluster-04", "ha-pair-12", "archive-main-05"),
    "person": ("Priya Raman", "Tomasz Nowak", "Aisha Bello", "Lukas Weber", "Mei Tanaka",
               "Diego Alvarez", "Sofia Rossi", "Kwame Mensah", "Hana Kim", "Omar Haddad"),
}
VALUES: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {**_COMMON,
           "day": ("Mondays", "Tuesdays", "Wednesdays", "Thursdays"),
           "species": ("dog", "cat", "rabbit", "parrot", "hamster", "tortoise"),
           "pet": ("Biscuit", "Pepper", "Mochi", "Ziggy", "Luna", "Noodle", "Waffles",
                   "Pickles", "Clover", "Otis"),
           "city": ("Austin", "Denver", "Lisbon", "Toronto", "Glasgow", "Osaka", "Porto",
                    "Seattle", "Melbourne", "Utrecht"),
           "role": ("product manager", "nurse", "data analyst", "civil engineer", "teacher",
                    "UX designer", "accountant", "sous chef"),
           "company": ("Northwind", "Globex", "Initech", "Umbrella Health", "Hooli",
                       "Vandelay Imports", "Stark Logistics", "Wayne Foods"),
           "name": ("Priya", "Tom", "Aisha", "Lukas", "Mei", "Diego"),
           "food": ("peanuts", "shellfish", "sesame", "kiwi", "eggs", "soy", "mustard"),
           "place": ("Kyoto", "Reykjavik", "Marrakech", "Santorini", "Patagonia", "Bali",
                     "Quebec City", "Cape Town"),
           "month": ("March", "April", "May", "June", "September", "October", "November"),
           "instrument": ("cello", "piano", "ukulele", "trumpet", "violin", "drums", "flute"),
           "color": ("red", "silver", "dark blue", "white", "green"),
           "car": ("Volvo estate", "Toyota Corolla", "Honda Civic", "Ford Fiesta",
                   "Subaru Outback", "VW Golf"),
           "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
           "kid": ("Sam", "Leo", "Noah", "Arjun", "Felix", "Theo"),
           "school": ("Maplewood Primary", "St. Anne's", "Riverside Academy",
                      "Oakridge Elementary", "Hillcrest School")},
    "zh": {**_COMMON,
           "species": ("小狗", "小猫", "兔子", "鹦鹉", "仓鼠", "乌龟"),
           "pet": ("豆豆", "团团", "球球", "可乐", "旺财", "咪咪", "年糕", "花卷"),
           "city": ("杭州", "成都", "深圳", "南京", "西安", "厦门", "青岛", "武汉"),
           "food": ("花生", "海鲜", "芝麻", "芒果", "鸡蛋", "大豆"),
           "place": ("京都", "冰岛", "巴厘岛", "大理", "三亚", "清迈"),
           "month": ("三月", "四月", "五月", "六月", "九月", "十月"),
           "instrument": ("大提琴", "钢琴", "古筝", "小提琴", "二胡", "吉他"),
           "weekday": ("周一", "周二", "周三", "周四", "周五")},
}
_FIRST = ("Falcon", "Heron", "Osprey", "Kestrel", "Merlin", "Condor", "Puffin", "Plover",
          "Egret", "Ibis", "Tern", "Wren", "Finch", "Lark", "Raven", "Rook", "Crane", "Stork",
          "Swift", "Magpie", "Robin", "Gannet", "Curlew", "Dunlin")
_KINDS = {  # a service kind: what it is, in English and in Chinese
    "Ledger": ("the ledger that records every payment and refund", "记录每笔付款和退款的账本服务"),
    "Gateway": ("the front door for partner API traffic", "合作方API流量的入口网关"),
    "Indexer": ("the pipeline that keeps search indexes fresh", "保持搜索索引新鲜的流水线"),
    "Scheduler": ("the service that runs periodic jobs", "运行定时任务的服务"),
    "Notifier": ("the service that sends emails, pushes and webhooks",
                 "发送邮件、推送和回调的服务"),
    "Vault": ("the store for encrypted customer documents", "存放加密客户文件的存储"),
    "Relay": ("the message relay between regions", "区域之间的消息中继"),
    "Catalog": ("the product catalog service", "商品目录服务")}


@dataclass(frozen=True, slots=True)
class Document:
    doc_id: str
    title: str
    text: str
    lang: str


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    user_id: str
    events: tuple[tuple[str, str], ...]  # (role, content), in order


@dataclass(frozen=True, slots=True)
class Question:
    qid: str
    user_id: str
    kind: str  # knowledge | session
    query: str
    style: str  # lexical | paraphrase
    lang: str
    evidence: tuple[tuple[str, str | int], ...]  # (doc_id, quote) or (session_id, event index)
    stale: tuple[tuple[str, int], ...] = ()  # (session_id, event index) superseded answers


@dataclass(frozen=True, slots=True)
class RetrievalSet:
    documents: tuple[Document, ...]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]


def _values(rng: random.Random, fact: Fact, lang: str, **given: str) -> dict[str, str]:
    """A value for every ``{field}`` of ``fact`` (all its statements); fields that share a
    stem (``city``, ``city2``, ``city3``) get distinct values."""
    text = " ".join((fact.fact, fact.lexical, fact.distractor, fact.update, fact.near))
    fields = sorted({f.split("}")[0] for f in text.split("{")[1:]} - set(given))
    out = dict(given)
    for stem in sorted({f.rstrip("0123456789") for f in fields}):
        pool = [str(v) for v in _NUM[stem]] if stem in _NUM else list(VALUES[lang][stem])
        mine = [f for f in fields if f.rstrip("0123456789") == stem]
        out.update(zip(mine, rng.sample(pool, len(mine)), strict=True))
    return out


def _join(lang: str, sentences: list[str]) -> str:
    return ("" if lang == "zh" else " ").join(sentences)


Stated = tuple[Fact, dict[str, str], str]  # a fact kind, its values, the document stating it


def _documents(rng: random.Random, n: int) -> tuple[list[Document], list[Stated]]:
    """``n`` runbooks and ``n // 2`` distractor documents; the facts stated, as (kind,
    values, doc_id)."""
    names = rng.sample([f"{a} {b}" for a in _FIRST for b in _KINDS], n)
    docs: list[Document] = []
    stated: list[Stated] = []
    by_entity: dict[str, tuple[str, list[Fact]]] = {}
    for i, name in enumerate(names):
        lang = "zh" if i % 5 == 4 else "en"
        kinds = rng.sample([f for f in KNOWLEDGE if f.lang == lang], 6 if lang == "en" else 5)
        doc_id = f"runbook-{i:03d}"
        desc = _KINDS[name.split()[1]][lang == "zh"]
        intro = f"{name}是{desc}。" if lang == "zh" else f"{name} is {desc}."
        paragraphs = [_join(lang, [intro, *rng.sample(FILLER[lang], 2)])]
        for fact in kinds:
            values = _values(rng, fact, lang, E=name)
            sentences = rng.sample(FILLER[lang], rng.randint(2, 4))
            sentences.insert(rng.randrange(len(sentences) + 1), fact.fact.format(**values))
            paragraphs.append(_join(lang, sentences))
            stated.append((fact, values, doc_id))
        title = f"{name}运行手册" if lang == "zh" else f"{name} runbook"
        docs.append(Document(doc_id, title, "\n\n".join(paragraphs), lang))
        by_entity[name] = (lang, kinds)
        docs.append(_changelog(rng, name, lang, f"changelog-{i:03d}"))
        docs.append(_notes(rng, name, lang, f"notes-{i:03d}"))
    for j in range(n // 2):
        lang = "zh" if j % 5 == 4 else "en"
        pair = rng.sample([e for e, (lg, _) in by_entity.items() if lg == lang], 2)
        paragraphs = []
        for name in pair:
            fact = rng.choice(by_entity[name][1])
            old = rng.choice(NOT_CURRENT[lang]) + fact.fact.format(**_values(rng, fact, lang,
                                                                             E=name))
            paragraphs.append(_join(lang, [*rng.sample(FILLER[lang], 2), old,
                                           *rng.sample(FILLER[lang], 2)]))
        title = (f"故障复盘{j}：{pair[0]}与{pair[1]}" if lang == "zh"
                 else f"Incident review {j}: {pair[0]} and {pair[1]}")
        docs.append(Document(f"review-{j:03d}", title, "\n\n".join(paragraphs), lang))
    return docs, stated


def _changelog(rng: random.Random, name: str, lang: str, doc_id: str) -> Document:
    """A service's changelog: a line on every fact kind's topic, none with a value."""
    lines = [line.format(E=name, v=f"2.{v}") for v, line in enumerate(
        rng.sample(list(MENTIONS[lang].values()), len(MENTIONS[lang])))]
    for _ in range(4):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(FILLER[lang]))
    title = f"{name}变更记录" if lang == "zh" else f"{name} changelog"
    return Document(doc_id, title, "\n".join(lines), lang)


def _notes(rng: random.Random, name: str, lang: str, doc_id: str) -> Document:
    """A service's on-call notes: a paragraph under each fact kind's topic, with no value."""
    paragraphs = [_join(lang, [f"{name}：{topic}。" if lang == "zh" else f"{name}: {topic}.",
                               *rng.sample(FILLER[lang], rng.randint(2, 4))])
                  for topic in rng.sample(list(TOPICS[lang].values()), len(TOPICS[lang]))]
    title = f"{name}值班笔记" if lang == "zh" else f"{name} on-call notes"
    return Document(doc_id, title, "\n\n".join(paragraphs), lang)


def _user(rng: random.Random, user_id: str, lang: str) -> tuple[list[Session], list[Question]]:
    """A user's earlier sessions and the questions about them."""
    plan: list[list[tuple[str, str | None]]] = [[] for _ in range(SESSIONS_PER_USER)]
    half = SESSIONS_PER_USER // 2
    facts = rng.sample([f for f in PERSONAL if f.lang == lang], FACTS_PER_USER)
    for fact in facts:
        values = _values(rng, fact, lang)
        said = rng.randrange(half) if fact.update else rng.randrange(SESSIONS_PER_USER)
        plan[said].append((fact.fact.format(**values),
                           STALE + fact.key if fact.update else fact.key))
        if fact.update:
            plan[rng.randrange(half, SESSIONS_PER_USER)].append(
                (fact.update.format(**values), fact.key))
        for said_instead in (fact.distractor, fact.near):
            if rng.random() < 0.8:
                plan[rng.randrange(SESSIONS_PER_USER)].append(
                    (said_instead.format(**values), None))
        if fact.key in TOPICAL[lang] and rng.random() < 0.7:
            plan[rng.randrange(SESSIONS_PER_USER)].append((TOPICAL[lang][fact.key], None))
    sessions: list[Session] = []
    found: dict[str, tuple[str, int]] = {}
    for s, lines in enumerate(plan):
        lines += [(rng.choice(CHATTER[lang]), None)
                  for _ in range(max(0, rng.randint(4, 6) - len(lines)))]
        rng.shuffle(lines)
        sid = f"{user_id}-s{s}"
        events: list[tuple[str, str]] = []
        for text, key in lines:
            if key is not None:
                found[key] = (sid, len(events))
                # said in passing, inside a longer message (never the superseded statement:
                # the draw order, hence every seed's data, predates recording it)
                if not key.startswith(STALE) and rng.random() < 0.5:
                    text = _join(lang, [rng.choice(CHATTER[lang]), text])
            events += [("user", text), ("assistant", rng.choice(REPLIES[lang]))]
        sessions.append(Session(sid, user_id, tuple(events)))
    questions = []
    for i, fact in enumerate(rng.sample(facts, QUESTIONS_PER_USER["session"])):
        style = rng.choice(("lexical", "paraphrase"))
        query = _personal_query(sessions, found[fact.key], str(getattr(fact, style)), lang)
        stale = (found[STALE + fact.key],) if STALE + fact.key in found else ()
        questions.append(Question(f"{user_id}-q{i}", user_id, "session", query, style, lang,
                                  (found[fact.key],), stale))
    return sessions, questions


def _personal_query(sessions: list[Session], where: tuple[str, int], template: str,
                    lang: str) -> str:
    """A personal question names no value but the pet's species: the one the user stated."""
    if "{species}" not in template:
        return template
    sid, idx = where
    said = next(s for s in sessions if s.session_id == sid).events[idx][1]
    return template.format(species=next(v for v in VALUES[lang]["species"] if v in said))


def generate(seed: int, users: int) -> RetrievalSet:
    rng = random.Random(seed)
    docs, stated = _documents(rng, min(len(_FIRST) * len(_KINDS), max(10, 2 * users)))
    sessions: list[Session] = []
    questions: list[Question] = []
    rng.shuffle(stated)
    asked = iter(stated * 2)  # each fact asked once before any is asked twice
    for u in range(users):
        user_id = f"user{u:03d}"
        mine, qs = _user(rng, user_id, "zh" if u % 5 == 2 else "en")
        sessions += mine
        questions += qs
        for i in range(QUESTIONS_PER_USER["knowledge"]):
            fact, values, doc_id = next(asked)
            style = rng.choice(("lexical", "paraphrase"))
            questions.append(Question(
                f"{user_id}-k{i}", user_id, "knowledge",
                str(getattr(fact, style)).format(**values), style, fact.lang,
                ((doc_id, fact.fact.format(**values)),)))
    return RetrievalSet(tuple(docs), tuple(sessions), tuple(questions))


def dump(data: RetrievalSet, path: Path) -> None:
    lines: list[dict[str, Any]] = [
        *({"type": "document", "doc_id": d.doc_id, "title": d.title, "text": d.text,
           "lang": d.lang} for d in data.documents),
        *({"type": "session", "session_id": s.session_id, "user_id": s.user_id,
           "events": [{"role": r, "content": c} for r, c in s.events]} for s in data.sessions),
        *({"type": "question", "qid": q.qid, "user_id": q.user_id, "kind": q.kind,
           "query": q.query, "style": q.style, "lang": q.lang,
           "evidence": [{"doc_id": a, "quote": b} if q.kind == "knowledge"
                        else {"session_id": a, "event": b} for a, b in q.evidence],
           **({"stale": [{"session_id": a, "event": b} for a, b in q.stale]}
              if q.stale else {})}
          for q in data.questions)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def load(path: Path) -> RetrievalSet:
    docs, sessions, questions = [], [], []
    for raw in path.read_bytes().splitlines():
        if not raw.strip():
            continue
        o = orjson.loads(raw)
        if o["type"] == "document":
            docs.append(Document(o["doc_id"], o.get("title") or o["doc_id"], o["text"],
                                 o.get("lang", "en")))
        elif o["type"] == "session":
            sessions.append(Session(o["session_id"], o["user_id"], tuple(
                (e["role"], e["content"]) for e in o["events"])))
        elif o["type"] == "question":
            ev = tuple((e["doc_id"], e["quote"]) if o["kind"] == "knowledge"
                       else (e["session_id"], int(e["event"])) for e in o["evidence"])
            stale = tuple((e["session_id"], int(e["event"])) for e in o.get("stale", ()))
            questions.append(Question(o["qid"], o["user_id"], o["kind"], o["query"],
                                      o.get("style", "unknown"), o.get("lang", "en"), ev, stale))
        else:
            raise ValueError(f"unknown record type {o['type']!r} in {path}")
    return RetrievalSet(tuple(docs), tuple(sessions), tuple(questions))
