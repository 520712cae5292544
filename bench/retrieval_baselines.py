"""The retrieval benchmark's baselines: BM25 (``bm25s``) and dense-only (exact cosine in numpy
over the server's own stored vectors), each over exactly what the API may show the asking
user: the tenant's current knowledge chunks and that user's earlier session events.

Contract: ``Baselines(items)`` indexes once per user; ``ranked(system, user,
query, query_vector)`` returns every visible item's index, best first; ``top_k`` takes the
best ``k`` chunks and the best ``k`` events (the API's limits are per layer too);
``within_budget`` fills a token budget by rank, skipping an item that no longer fits and
trying the next (as the API's budget gives leftovers a second chance). The budget is the API
turn's own room for retrieved items (``bench.retrieval.room``: its usable budget less the
query), so both sides rank into the same number of tokens.

BM25 tokens are what the server's full-text side sees of a text: lowercased words, bm25s's
English stopwords dropped, Snowball-stemmed (PyStemmer); Chinese as character bigrams.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

SYSTEMS = ("bm25", "dense")
_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]+")
_STOP = frozenset(STOPWORDS_EN)  # bm25s's own English list, as its users get it


@dataclass(frozen=True, slots=True)
class Item:
    ref: str
    layer: str  # knowledge | session
    user_id: str | None  # a session event's owner; None: knowledge, visible to all
    text: str
    tokens: int
    vector: npt.NDArray[np.float32]


def tokenize(text: str, stemmer: Stemmer.Stemmer) -> list[str]:
    out: list[str] = []
    for run in _WORD.findall(text.lower()):
        if run[0] >= "\u3400":  # a CJK run: its bigrams (a lone character as itself)
            out += [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]
        elif run not in _STOP:
            out.append(stemmer.stemWord(run))
    return out


class Baselines:
    def __init__(self, items: Sequence[Item]) -> None:
        self.items = list(items)
        self._stemmer = Stemmer.Stemmer("english")
        tokens = [tokenize(i.text, self._stemmer) or ["∅"] for i in self.items]
        self._vectors = np.stack([i.vector for i in self.items]).astype(np.float32)
        shared = [n for n, i in enumerate(self.items) if i.user_id is None]
        self._visible: dict[str, npt.NDArray[np.int64]] = {}
        self._bm25: dict[str, bm25s.BM25] = {}
        for user in sorted({i.user_id for i in self.items if i.user_id is not None}):
            visible = np.array(shared + [n for n, i in enumerate(self.items)
                                         if i.user_id == user], dtype=np.int64)
            index = bm25s.BM25()
            index.index([tokens[n] for n in visible], show_progress=False)
            self._visible[user], self._bm25[user] = visible, index

    def ranked(self, system: str, user: str, query: str,
               query_vector: npt.NDArray[np.float32]) -> list[int]:
        visible = self._visible[user]
        if system == "bm25":
            scores = np.asarray(self._bm25[user].get_scores(tokenize(query, self._stemmer)))
        else:
            scores = self._vectors[visible] @ query_vector
        # Stable: equal scores keep corpus order, so a run is reproducible.
        return [int(visible[n]) for n in np.argsort(-scores, kind="stable")]

    def top_k(self, ranked: Sequence[int], k: int) -> list[int]:
        out: list[int] = []
        for layer in ("knowledge", "session"):
            out += [n for n in ranked if self.items[n].layer == layer][:k]
        return out

    def within_budget(self, ranked: Sequence[int], max_tokens: int) -> list[int]:
        out: list[int] = []
        left = max_tokens
        for n in ranked:
            if self.items[n].tokens <= left:
                out.append(n)
                left -= self.items[n].tokens
        return out
