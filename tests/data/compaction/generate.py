"""Builds the compaction regression sessions (``python tests/data/compaction/generate.py``).

Each session mixes facts (decisions, qualifiers in English and Chinese, tool effects,
pending approvals, failures) with chatter, long tool results and red herrings (an unqualified
quote of a constrained fact, a superseded plan), and labels what must survive compaction.
Deterministic: rerunning rewrites the same JSON files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
CHATTER = ("Thanks, noted.", "Let me look at the file.", "好的，我看一下。",
           "Reading the logs now.", "OK, continuing with the review.", "收到。",
           "Here is the excerpt you asked for.")


class Session:
    def __init__(self, name: str, goal: str) -> None:
        self.name, self.labels = name, _labels(goal)
        self.events: list[dict[str, Any]] = []
        self.say("system", "You are a careful assistant.")
        self.say("user", goal)

    def say(self, role: str, content: str) -> int:
        seq = len(self.events)
        self.events.append({"seq": seq, "type": "message", "role": role, "content": content})
        return seq

    def tool(self, name: str, args: dict[str, Any], result: str, *, error: bool = False) -> int:
        cid = f"call-{len(self.events)}"
        self.events.append({"seq": len(self.events), "type": "tool_call", "call_id": cid,
                            "name": name, "arguments": args})
        self.events.append({"seq": len(self.events), "type": "tool_result", "call_id": cid,
                            "name": name, "content": result, "is_error": error})
        return len(self.events) - 1

    def constraint(self, role: str, text: str, kind: str, lead: str = "") -> None:
        self.say(role, f"{lead}{text}")
        # the constraint is the whole sentence, verbatim, lead-in included
        self.labels["constraints"].append({"text": f"{lead}{text}", "kind": kind})

    def chatter(self, n: int, topic: str) -> None:
        for i in range(n):
            if i % 5 == 4:
                self.tool("read_file", {"path": f"docs/{topic}-{i}.md"},
                          f"{topic} reference text. " * (30 if i % 10 == 9 else 4))
            else:
                self.say("user" if i % 2 == 0 else "assistant",
                         f"{CHATTER[i % len(CHATTER)]} ({topic} step {i})")

    def save(self, keep_recent: int = 12, budget_tokens: int = 1500) -> None:
        doc = {"name": self.name, "session_id": f"s-{self.name}", "task_id": f"t-{self.name}",
               "keep_recent": keep_recent, "budget_tokens": budget_tokens,
               "events": self.events, "labels": self.labels}
        (HERE / f"{self.name}.json").write_text(
            json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def _labels(goal: str) -> dict[str, Any]:
    return {"goal": goal, "constraints": [], "approvals": [], "effects": [], "decisions": [],
            "superseded": [], "forbidden_claims": [], "evidence_seqs": [], "sticky_seqs": []}


def effect(s: Session, name: str, key: str, result: str, effect_id: str) -> None:
    s.tool(name, {"idempotency_key": key}, result)
    s.labels["effects"].append({"effect_id": effect_id, "idempotency_key": key})


def decide(s: Session, role: str, text: str) -> None:
    s.say(role, text)
    s.labels["decisions"].append(text)


def approval(s: Session, role: str, text: str) -> None:
    s.say(role, text)
    s.labels["approvals"].append(text)


def herring(s: Session, text: str) -> None:
    """A later, unqualified quote of a constrained fact that must not become a conclusion."""
    s.say("assistant", text)
    s.labels["forbidden_claims"].append(text)


def contract_en() -> None:
    s = Session("contract_discount_en", "Review the ACME reseller agreement and answer "
                "pricing questions from sales.")
    s.chatter(6, "contract")
    s.constraint("assistant", "The 15% launch discount applies only before 2026-06-30, "
                 "channel customers excepted.", "except", "Clause 7.2 says: ")
    s.chatter(10, "contract")
    decide(s, "assistant", "We decided to quote list price plus the 15% discount for "
           "direct enterprise accounts.")
    s.constraint("user", "Volume rebates are capped at no more than 5% per quarter.", "limit")
    s.chatter(14, "contract")
    approval(s, "assistant", "The revised quote for Globex needs approval from the deal desk.")
    effect(s, "send_email", "mail-globex-1", "Sent email id=msg-5521 to Globex procurement.",
           "send_email:msg-5521")
    s.chatter(20, "contract")
    herring(s, "Sales keeps repeating that channel customers get the launch discount too.")
    s.chatter(14, "contract")
    s.save()


def contract_zh() -> None:
    s = Session("contract_discount_zh", "审阅与华信的渠道合同，回答销售关于折扣的问题。")
    s.chatter(8, "合同")
    s.constraint("assistant", "该折扣仅限 2026-06-30 前下单、渠道客户除外。", "except",
                 "条款 7.2 规定：")
    s.chatter(12, "合同")
    s.constraint("user", "单笔订单折扣上限为 8%。", "limit")
    decide(s, "assistant", "我们决定按直销价目表报价。")
    s.chatter(12, "合同")
    approval(s, "assistant", "给华信的报价单待审批（财务部）。")
    effect(s, "create_quote", "quote-hx-01", "已创建报价单 id=Q-20931。", "create_quote:Q-20931")
    s.chatter(18, "合同")
    herring(s, "销售说渠道客户也可以享受这个折扣。")
    s.chatter(16, "合同")
    s.save()


def refund_timeout() -> None:
    s = Session("refund_timeout", "Fix the refund timeout and add a regression test.")
    s.chatter(6, "refund")
    decide(s, "assistant", "We decided to use exponential backoff and not change the public API.")
    s.chatter(8, "refund")
    fail = s.tool("run_tests", {"suite": "RefundIT"}, "RefundIT FAILED: timeout after 30s",
                  error=True)
    s.labels["sticky_seqs"].append(fail)
    s.chatter(10, "refund")
    s.constraint("user", "Only modify RetryConfig, nothing else in the payment module.", "only")
    effect(s, "create_pr", "pr-refund-1", "Created draft PR #4821.", "create_pr:4821")
    s.chatter(12, "refund")
    s.say("assistant", "Open question: the production retry limit is TBD until SRE confirms.")
    s.chatter(16, "refund")
    s.save()


def deploy_release() -> None:
    s = Session("deploy_release", "Ship release 4.2 to production safely.")
    s.chatter(6, "release")
    s.say("assistant", "We decided to deploy release 4.2 on Friday evening.")
    s.labels["superseded"].append("We decided to deploy release 4.2 on Friday evening.")
    s.chatter(8, "release")
    s.constraint("user", "Deploying to production requires approval from the release manager.",
                 "precondition")
    effect(s, "deploy", "deploy-staging-42", "Deployed build id=b-7781 to staging.",
           "deploy:b-7781")
    s.chatter(10, "release")
    decide(s, "assistant", "We decided to deploy release 4.2 on Monday morning instead of "
           "Friday evening.")
    approval(s, "assistant", "The production deploy of release 4.2 needs approval from Lee.")
    s.chatter(24, "release")
    s.save()


def procurement_zh() -> None:
    s = Session("procurement_zh", "为华东区门店完成第三季度的设备采购。")
    s.chatter(8, "采购")
    s.constraint("user", "单笔采购上限 5 万元。", "limit")
    s.constraint("user", "本次采购仅限华东区门店。", "only")
    s.chatter(10, "采购")
    decide(s, "assistant", "我们决定采用框架协议供应商。")
    approval(s, "assistant", "采购合同待审批（财务）。")
    s.chatter(10, "采购")
    s.constraint("user", "所有订单须先完成供应商资质审核。", "precondition")
    effect(s, "send_po", "po-east-7", "已发送采购单 id=PO-88213 给供应商。", "send_po:PO-88213")
    s.chatter(20, "采购")
    s.save()


def data_migration() -> None:
    s = Session("data_migration", "Migrate tenant billing data to the new ledger schema.")
    s.chatter(6, "migration")
    s.constraint("user", "Migrate at most 10000 rows per batch.", "limit")
    s.constraint("user", "All tenants are in scope, excluding archived tenants.", "except")
    s.chatter(8, "migration")
    s.constraint("user", "The migration must be finished by 2026-08-01.", "deadline")
    effect(s, "open_ticket", "ops-ledger-1", "Opened ticket OPS-1234 for the maintenance window.",
           "open_ticket:OPS-1234")
    s.chatter(8, "migration")
    fail = s.tool("run_check", {"name": "MigrationCheck"},
                  "MigrationCheck FAILED: 12 ledger rows do not balance.")
    s.labels["sticky_seqs"].append(fail)
    s.chatter(10, "migration")
    decide(s, "assistant", "We decided to migrate tenants in alphabetical order.")
    s.chatter(22, "migration")
    s.save()


def support_mixed() -> None:
    s = Session("support_mixed",
                "Handle refund tickets for the CN storefront / 处理中国站退款工单。")
    s.chatter(6, "support")
    s.constraint("user", "退款仅限 30 天内的订单，团购订单除外。", "except")
    s.chatter(8, "support")
    s.constraint("user", "Refunds above 2000 CNY require manager approval first.", "precondition")
    approval(s, "assistant", "Ticket 7781 refund of 3500 CNY is awaiting sign-off from the "
             "support manager.")
    s.chatter(10, "support")
    effect(s, "issue_refund", "refund-7702", "Created refund id=RF-7702 for 120 CNY.",
           "issue_refund:RF-7702")
    decide(s, "assistant", "We agreed to reply to every ticket within 4 hours.")
    s.chatter(14, "support")
    herring(s, "The customer insists group-buy orders from last year get a full refund.")
    s.chatter(16, "support")
    s.save()


def newsletter() -> None:
    s = Session("newsletter", "Send the September newsletter.")
    s.chatter(6, "newsletter")
    s.constraint("user", "Send only to opted-in users, except EU users until the DPA is signed.",
                 "except")
    s.chatter(10, "newsletter")
    approval(s, "assistant", "The final copy is awaiting sign-off from legal.")
    effect(s, "create_campaign", "camp-sep", "Created campaign id=cmp-3391 in draft state.",
           "create_campaign:cmp-3391")
    s.chatter(12, "newsletter")
    decide(s, "assistant", "We decided to send at 09:00 local time.")
    s.say("assistant", "Preview render test passed for all templates.")
    s.labels["evidence_seqs"].append(len(s.events) - 1)
    s.chatter(20, "newsletter")
    s.save()


def incident2() -> None:
    """Seeds, scenario 2: a 52-turn contract review whose summary dropped the qualifier."""
    s = Session("incident2_contract_review", "审阅经销合同并答复销售的折扣问题。")
    s.constraint("assistant", "该折扣仅限 2026-06-30 前下单、渠道客户除外。", "except",
                 "合同第 7.2 条：")
    s.constraint("assistant", "The discount applies only before 2026-06-30, channel customers "
                 "excepted.", "except", "In English, clause 7.2: ")
    for turn in range(51):
        s.say("user", f"第 {turn} 轮：请继续核对附件 {turn} 的付款条款。")
        if turn % 7 == 3:
            s.tool("read_file", {"path": f"annex-{turn}.pdf"}, "付款条款原文。" * 60)
        s.say("assistant", f"附件 {turn} 的付款条款已核对，没有发现问题。")
    herring(s, "渠道客户可以使用该折扣。")
    s.save(keep_recent=8, budget_tokens=1200)


if __name__ == "__main__":
    for build in (contract_en, contract_zh, refund_timeout, deploy_release, procurement_zh,
                  data_migration, support_mixed, newsletter, incident2):
        build()
