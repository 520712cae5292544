"""Stable facts and preferences a user states about themselves in a session, as memory candidates.

Contract: ``fact_writes(events, session_id=..., user_id=...)`` is pure: for each sentence of
the user's own messages that states a lasting preference, habit or personal fact in the first
person ("I prefer…", "please always…", "my name is…", "我喜欢…", "以后都…", "我对…过敏"), one
``MemoryWrite`` of user scope, origin ``user_stated``, the event as ``evidence_ref``. These are
candidates: the write gate (``app.core.memory_gate``) still decides, and dedupes the same fact
said twice. Questions, conditionals and statements about others are not facts; neither is the
one-off ("I want a refund for this order"): a preference must be about how the user is or
wants things in general.

Confidence is ``CONFIDENCE``: above the gate's hypothesis threshold, since the user said it,
below 1 because a pattern, not the user, decided it was lasting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.core.compaction.text import sentences
from app.core.memory_gate import MemoryWrite
from app.core.model import DataLevel, SessionEvent
from app.core.refs import event_ref

FACT_ACTOR = "ctxgate:session-facts"  # the owner and actor of every candidate proposed here
CONFIDENCE = 0.7
MAX_STATEMENT_CHARS = 280
MAX_PER_EVENT = 3

_EN = re.compile(
    r"^(?:(?:also|and|so|btw|by the way|fyi|note|oh|ok|okay|well|actually|just so you know)"
    r"[,:]?\s+)?(?:"
    r"i(?:'d| would)? (?:really |much |strongly |generally |usually )?(?:prefer|rather)\b"
    r"|i (?:really |generally |usually )?(?:like|love|hate|dislike|enjoy|can't stand"
    r"|cannot stand)\b"
    r"|i (?:always|never|usually|normally|typically|mostly) \w+"
    r"|i(?:'m| am) (?:allergic|vegetarian|vegan|lactose|gluten|left-handed|right-handed"
    r"|based in|located in|living in|from |in the \w+ (?:time ?zone|team))"
    r"|i (?:live|work|grew up|was born) (?:in|at|for|as|on)\b"
    r"|i don't (?:eat|drink|like|want|use)\b|i do not (?:eat|drink|like|want|use)\b"
    r"|my (?:name|nickname|pronouns|birthday|time ?zone|email|role|job|title|team|manager"
    r"|wife|husband|partner|son|daughter|kids?|children|dog|cat|pet|favou?rite [\w ]{1,30}"
    r"|preferred [\w ]{1,30}|home ?town|native language|first language) (?:is|are)\b"
    r"|call me\b|please (?:always|never)\b|from now on\b|going forward\b|in (?:the )?future,?"
    r" (?:please )?(?:always|never)\b"
    r")", re.IGNORECASE)
_ZH = re.compile(
    r"^(?:另外|顺便说一下|对了|其实)?[，,]?(?:"
    r"我(?:比较|更|很|特别|一直|通常|总是|从来不|从不)?(?:喜欢|偏好|讨厌|不喜欢|习惯|爱吃|不吃|不喝)"
    r"|我对.{1,12}过敏|我是(?:素食|左撇子|.{1,8}(?:人|工程师|经理|医生|老师|学生))"
    r"|我(?:住在|在.{1,12}(?:工作|上班)|叫)"
    r"|我的(?:名字|生日|邮箱|时区|职位|团队|宠物|狗|猫|孩子)(?:是|叫)"
    r"|请叫我|以后(?:都|请|一律)|今后(?:都|请)|从现在开始"
    r")")
_QUESTION = re.compile(
    r"[?？]\s*$|^(?:do|does|did|can|could|would|should|is|are|what|why|how|when|where|which"
    r"|who)\b|吗\s*[。.]?$|呢\s*[。.]?$", re.IGNORECASE)
_CONDITIONAL = re.compile(r"^(?:if|when|unless|suppose|imagine)\b|如果|假如|要是", re.IGNORECASE)


def is_fact(sentence: str) -> bool:
    """Whether one sentence states a lasting first-person preference or fact.

    >>> is_fact("I prefer answers in Chinese.")
    True
    >>> is_fact("Do you prefer tea?")
    False
    >>> is_fact("我对花生过敏。")
    True
    >>> is_fact("I want a refund for order 123.")
    False
    """
    s = sentence.strip()
    if not s or len(s) > MAX_STATEMENT_CHARS or _QUESTION.search(s) or _CONDITIONAL.search(s):
        return False
    return bool(_EN.search(s) or _ZH.search(s))


def fact_writes(events: Iterable[SessionEvent], *, session_id: str, user_id: str
                ) -> list[MemoryWrite]:
    """One candidate per fact sentence of the user's messages, in event order."""
    out: list[MemoryWrite] = []
    for e in events:
        if e.type != "message" or e.role != "user":
            continue
        facts = [s.strip() for s in sentences(e.content) if is_fact(s)][:MAX_PER_EVENT]
        out += [MemoryWrite(
            statement=s, scope_level="user", user_id=user_id, domain=None,
            origin="user_stated", evidence_ref=event_ref(session_id, e.seq),
            source_session=session_id, owner=FACT_ACTOR, confidence=CONFIDENCE,
            sensitivity=DataLevel.INTERNAL, key=None, expires_at=None, task_id=None)
            for s in facts]
    return out
