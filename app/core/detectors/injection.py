"""Prompt-injection detectors, English and Chinese (proposed action ``quarantine``).

Contract: each detector finds one ``injection.*`` type (see ``docs/detectors.md``):

    injection.override       ignore/disregard/forget + (all|previous|above|system...) +
                             instructions/rules/prompt; "new instructions:"; 忽略/无视/忘记 +
                             之前/以上/所有 + 指令/规则/提示
    injection.role           "you are now <role>", act/pretend as system/developer/DAN, fake
                             chat headers (<|im_start|>system, [SYSTEM], <<SYS>>, "System
                             prompt:"); 你现在是<角色>, 你扮演/假装/充当, 从现在开始你是
    injection.tool_coercion  call/invoke/execute the X tool|function; urgency or a hidden-action
                             marker (immediately, silently, without asking) + a side effect
                             (send, delete all, transfer, grant, run command); 立即/悄悄/不要
                             告诉用户 + 调用/执行/删除/转账/发送
    injection.exfiltration   markdown images/links or <img> whose URL carries a placeholder
                             (``{chat}``, ``<secret>``, ``$KEY``) or a data-named parameter
                             (conversation=, secret=, history=...); "send the conversation/
                             secrets/system prompt to <url|email>"; 把对话/密钥/提示词 发送到…

Quoted injections (a security article showing a payload in a code block) are findings too: a
fence does not stop a model from reading a payload, and attackers can add fences at will. The
safety guard decides where detectors apply (not to ``system``/``reviewed`` content, not to the
user's own query) and what a finding costs (the redaction profile).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

from app.core.detectors.base import Accept, PatternDetector, always


def _detector(type_: str, *patterns: re.Pattern[str], accept: Accept = always,
              fold: bool = True) -> PatternDetector:
    """Keyword patterns are lower-case and run on the ASCII-folded text (see ``base``)."""
    return PatternDetector(name=type_, type=type_, action="quarantine", patterns=patterns,
                           accept=accept, fold=fold, word_start=fold)


_QUALIFIERS = frozenset({"all", "any", "previous", "prior", "above", "earlier", "preceding",
                         "foregoing", "your", "system", "original", "initial", "developer",
                         "safety", "every", "former", "existing"})


def _qualified(m: re.Match[str], _text: str) -> bool:
    return any(w in _QUALIFIERS for w in m.group("words").split())


OVERRIDE = _detector(
    "injection.override",
    re.compile(r"(?:ignore|disregard|forget|override|bypass|discard)\s{1,3}(?P<words>(?:[a-z']{1,12}"
               r"\s{1,3}){1,4})(?:instructions?|prompts?|rules?|directions?|guidelines?|messages?"
               r"|constraints?|context|commands?|guardrails|polic(?:y|ies)|restrictions|directives?"
               r"|guidance|orders|programming|safeguards)"
               r"\b"),
    accept=_qualified)
OVERRIDE_EXTRA = _detector(
    "injection.override",
    re.compile(r"(?:ignore|disregard|forget)\s{1,3}(?:everything|all|anything)\s{1,3}(?:above|"
               r"before|prior|previously|you(?:'ve|\s{1,2}have|\s{1,2}were)?\s{1,2}(?:been\s{1,2})?"
               r"(?:told|learned|said))"),
    re.compile(r"(?:new|updated|revised|real|actual)\s{1,3}(?:system\s{1,3})?"
               r"(?:instructions|rules|prompt)\s{0,3}:"),
    re.compile(r"(?:忽略|无视|忽视|不要理会|不要遵守|不必遵守|别管|抛开|忘记|忘掉|绕过|跳过)"
               r"[^。\n]{0,8}?(?:之前|以上|上面|前面|先前|此前|上述|原来|原有|原先|所有|全部|一切|系统)"
               r"[^。\n]{0,6}?(?:指令|指示|规则|提示|提示词|要求|设定|约束|限制|命令|说明)"),
)

_ROLE_WORDS = (r"(?:assistant|ai|model|chatbot|bot|system|developer|dan|unrestricted|unfiltered|"
               r"jailbroken|uncensored|evil|hacker|root|admin(?:istrator)?|god|free)")
ROLE = _detector(
    "injection.role",
    re.compile(rf"you\s{{1,3}}are\s{{1,3}}now\s{{1,3}}(?:[a-z-]{{1,15}}\s{{1,3}}){{0,3}}"
               rf"{_ROLE_WORDS}\b"),
    re.compile(rf"(?:act|behave|respond|pretend|roleplay)\s{{1,3}}(?:as|like|to\s{{1,2}}be|"
               rf"you\s{{1,2}}are)\s{{1,3}}(?:(?:a|an|the|my|if|you|were)\s{{1,3}}){{0,3}}"
               rf"(?:[a-z-]{{1,15}}\s{{1,3}})?{_ROLE_WORDS}\b"),
    re.compile(r"<\|im_start\|>\s{0,3}(?:system|developer)|<\|(?:system|endoftext|im_sep)\|>|"
               r"<<\s?sys\s?>>|\[/?inst\]|</?(?:system|developer)(?:[-_ ]prompt)?>"),
    re.compile(r"(?:^|\n)\s{0,8}(?:#{1,3}\s{0,2})?(?:\[(?:system|developer)\]|"
               r"(?:system|developer)\s{1,2}(?:prompt|message|override|instructions?))\s{0,2}:"),
    re.compile(r"你现在是[^。\n]{0,12}?(?:助手|ai|模型|系统|开发者|管理员|dan|没有(?:任何)?限制|不受"
               r"(?:任何)?(?:限制|约束)|黑客|另一个)"),
    re.compile(r"(?:请你|你(?:现在|接下来|从现在开始)?(?:要|将|需要|必须)?)(?:扮演|假装(?:是|成)?|充当|假扮)"),
    re.compile(r"从现在(?:开始|起)[，,]?\s{0,2}你(?:是|将是|就是|扮演)"),
)
# Upper-case headers only: ``SYSTEM:`` is a fake turn, ``system: linux`` is YAML.
ROLE_HEADERS = _detector(
    "injection.role", re.compile(r"(?:^|\n)\s{0,8}(?:#{1,3}\s{0,2})?(?:SYSTEM|DEVELOPER)\s{0,2}:"),
    fold=False)

_EN_ACTION = (r"(?:send|e-?mail|forward|transfer|wire|pay|refund|grant|approve|upload|disable|"
              r"delete\s{1,3}(?:all|every|everything|the\s{1,3}(?:entire|whole|database|repo))|"
              r"(?:run|execute|call|invoke)\s{1,3}(?:(?:the|this|a|following)\s{1,3}){0,2}"
              r"(?:tool|command|shell|script|code|function))\b")
TOOL_COERCION = _detector(
    "injection.tool_coercion",
    re.compile(r"(?:call|invoke|trigger|execute)\s{1,3}(?:the\s{1,3})?[`'\"]?[a-z][\w.-]{1,60}"
               r"[`'\"]?\s{1,3}(?:tool|function|action|plugin)\b"),
    re.compile(r"(?:call|invoke|use)\s{1,3}(?:the\s{1,3})?(?:tool|function)\s{1,3}[`'\"]?"
               r"[a-z]{1,30}_[\w.]{1,60}"),
    re.compile(rf"(?:immediately|silently|secretly|quietly|without\s{{1,3}}(?:asking|telling|"
               rf"informing|notifying|confirmation|approval)[^.\n]{{0,20}}?|(?:assistant|ai|agent|"
               rf"model)\s{{0,2}}[,:])\s{{1,3}}(?:[a-z]{{1,15}}\s{{1,3}}){{0,3}}?{_EN_ACTION}"),
    re.compile(r"(?:立即|马上|立刻|务必|悄悄|偷偷|秘密地|直接|无需确认|不需要确认|不要(?:告诉|通知|询问|让)"
               r"用户|助手[，,:：]|ai[，,:：])[^。\n]{0,15}?(?:调用|执行|运行|删除|清空|转账|汇款|支付|"
               r"发送|转发|发邮件|授权|批准)"),
    re.compile(r"(?:调用|执行)[^。\n]{0,6}?(?:工具|函数)\s{0,2}[`'\"“]?[a-z]{1,30}_[\w.]{1,60}"),
)

_PLACEHOLDER = re.compile(r"\{[^}]{1,40}\}|%7B|<|%3C|\$\{?[A-Za-z_]|\[[A-Z_ ]{2,40}\]|"
                          r"%s|INSERT|APPEND|BASE64")
_DATA_PARAMS = frozenset({"conversation", "chat", "history", "context", "secret", "secrets",
                          "password", "pwd", "prompt", "system_prompt", "memory", "leak", "exfil",
                          "apikey", "api_key", "token", "credentials", "ssn", "messages",
                          "summary"})


def _url_carries_data(m: re.Match[str], _text: str) -> bool:
    url = m.group("url")
    if _PLACEHOLDER.search(url):
        return True
    query = urlsplit(url).query
    return any(k.lower() in _DATA_PARAMS for k, _ in parse_qsl(query, keep_blank_values=True))


_EN_DATA = (r"(?:conversation|chat(?:\s{1,3}(?:history|log))?|history|secrets?|credentials?|"
            r"api\s?keys?|passwords?|tokens?|system\s{1,3}prompt|context|memory|messages|"
            r"(?:user|personal|customer)\s{1,3}data)")
EXFILTRATION = _detector(  # URLs are case-sensitive (placeholders): no folding here
    "injection.exfiltration",
    re.compile(r"!?\[[^\]\n]{0,200}\]\(\s{0,3}(?P<url>[hH][tT][tT][pP][sS]?://[^\s)]{1,1000})"),
    re.compile(r"<[iI][mM][gG]\s[^>]{0,200}?[sS][rR][cC]\s{0,2}=\s{0,2}[\"']?"
               r"(?P<url>[hH][tT][tT][pP][sS]?://[^\s\"'>]{1,1000})"),
    accept=_url_carries_data, fold=False,
)
EXFILTRATION_TEXT = _detector(
    "injection.exfiltration",
    re.compile(rf"(?:send|post|forward|upload|exfiltrate|transmit|leak|e-?mail|submit|append)"
               rf"\s{{1,3}}(?:[a-z']{{1,15}}\s{{1,3}}){{0,4}}?{_EN_DATA}\b[^.\n]{{0,60}}?\b"
               rf"(?:to|at|into)\s{{1,3}}(?:https?://|www\.|[\w.+-]{{1,64}}@|[\w-]{{1,60}}\."
               rf"(?:com|net|org|io|ru|cn|xyz|site|top)\b)"),
    re.compile(r"(?:把|将)[^。\n]{0,20}?(?:对话|聊天记录|历史记录|上下文|密钥|密码|令牌|凭证|系统提示|"
               r"提示词|用户(?:的)?(?:个人)?(?:信息|资料)|你的指令)[^。\n]{0,12}?(?:发送|发|上传|提交|转发|"
               r"泄露|传|附加)(?:到|给|至)"),
)

INJECTION_DETECTORS = (OVERRIDE, OVERRIDE_EXTRA, ROLE, ROLE_HEADERS, TOOL_COERCION, EXFILTRATION,
                       EXFILTRATION_TEXT)
