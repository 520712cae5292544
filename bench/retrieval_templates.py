"""The phrasings ``bench.retrieval_data`` fills in: knowledge facts, personal facts, chatter.

Every fact comes with two questions: a *lexical* one that reuses the fact's words, and a
*paraphrase* that shares with it no content word but the entity's name (a knowledge question
must name the service it asks about; a personal one names nothing), so only meaning connects
it to its evidence. Each personal fact also has a *distractor* (the same topic said of
someone else) and a *near miss* (the user's own words on the topic that do not answer it),
said in other sessions; a knowledge fact has a changelog line naming its service and topic.
Chinese (``zh``) phrasings cover part of both sets.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fact:
    """One kind of fact: ``{...}`` fields are filled from ``bench.retrieval_data.VALUES``."""

    key: str
    lang: str
    fact: str
    lexical: str
    paraphrase: str
    distractor: str = ""  # personal facts: the topic, said of someone else
    update: str = ""  # personal facts: a later statement that replaces ``fact``
    near: str = ""  # personal facts: the user's own words on the topic, not the answer


KNOWLEDGE: tuple[Fact, ...] = (
    Fact("retries", "en", "{E} retries a failed webhook delivery {n} times, waiting {s} seconds "
         "between attempts.", "How many times does {E} retry a failed webhook delivery?",
         "If {E} cannot notify a customer's callback URL, how often will it try to send the "
         "notification again?"),
    Fact("owner", "en", "The {team} team owns {E} and carries its pager.",
         "Which team owns {E}?",
         "Who is responsible for keeping {E} healthy, and who responds when it breaks at night?"),
    Fact("region", "en", "{E} is deployed in the {region} region, with a warm standby in "
         "{region2}.", "Which region is {E} deployed in?",
         "Where are the machines that host {E} located geographically?"),
    Fact("retention", "en", "Logs written by {E} are retained for {d} days and then deleted.",
         "How many days are logs written by {E} retained?",
         "For how long can I still look up {E}'s old diagnostic output before it is purged?"),
    Fact("deploy", "en", "Releases of {E} may only be deployed on {day}, starting at {t}:00 UTC "
         "for {w} hours.", "On which day may releases of {E} be deployed?",
         "When am I allowed to ship a new build of {E} to production?"),
    Fact("rate", "en", "Every API client of {E} is limited to {r} requests per minute.",
         "How many requests per minute is an API client of {E} limited to?",
         "How much traffic can a single caller send to {E} before it gets throttled?"),
    Fact("store", "en", "{E} keeps its state in a {db} cluster called {dbname}.",
         "Which cluster does {E} keep its state in?",
         "What storage system persists the data behind {E}?"),
    Fact("escalation", "en", "Escalations about {E} go to {person}, its technical lead.",
         "Who do escalations about {E} go to?",
         "If the on-call engineer is stuck with an {E} problem, which person should they "
         "contact next?"),
    Fact("timeout", "en", "Requests to {E} time out after {ms} milliseconds.",
         "After how many milliseconds do requests to {E} time out?",
         "How long does a call into {E} hang before the client gives up?"),
    Fact("backup", "en", "{E} takes a full backup every {h} hours and keeps the last {k} "
         "snapshots.", "How often does {E} take a full backup?",
         "How frequently is a disaster-recovery copy of {E}'s data saved?"),
    Fact("retries", "zh", "{E}在回调投递失败后会重试{n}次，每次间隔{s}秒。",
         "{E}在回调投递失败后会重试几次？", "如果{E}没能通知到客户的接口，它还会再发送多少遍？"),
    Fact("owner", "zh", "{E}由{team}团队负责，并由该团队值班。", "{E}由哪个团队负责？",
         "{E}半夜出故障时是谁来处理？"),
    Fact("region", "zh", "{E}部署在{region}区域，并在{region2}保留热备。",
         "{E}部署在哪个区域？", "承载{E}的机器在地理上位于哪里？"),
    Fact("retention", "zh", "{E}产生的日志保留{d}天后删除。", "{E}产生的日志保留多少天？",
         "{E}以前的运行记录能查到多久以前的？"),
    Fact("rate", "zh", "{E}的每个API客户端每分钟最多{r}次请求。",
         "{E}的每个API客户端每分钟最多多少次请求？", "单个调用方向{E}发送流量到什么程度会被限速？"),
    Fact("timeout", "zh", "访问{E}的请求在{ms}毫秒后超时。", "访问{E}的请求多少毫秒后超时？",
         "调用{E}时客户端要等多久才会放弃？"),
    Fact("backup", "zh", "{E}每{h}小时做一次全量备份，保留最近{k}个快照。",
         "{E}多久做一次全量备份？", "{E}的数据多长时间保存一份灾备副本？"),
)

# A changelog line per fact kind: the service and the fact's topic, never its value.
MENTIONS = {
    "en": {"retries": "{E} {v}: failed webhook delivery retries now show up on the dashboard.",
           "owner": "{E} {v}: the owning team rebalanced its pager rotation.",
           "region": "{E} {v}: the tooling that moves {E} to another region was rewritten.",
           "retention": "{E} {v}: the retention of logs written by {E} is now set in the "
                        "config repository.",
           "deploy": "{E} {v}: releases are now deployed behind a canary.",
           "rate": "{E} {v}: API clients now see how many requests per minute they have left.",
           "store": "{E} {v}: the cluster that keeps its state got a storage upgrade.",
           "escalation": "{E} {v}: escalations now open a ticket for the technical lead.",
           "timeout": "{E} {v}: requests that time out now log a trace id.",
           "backup": "{E} {v}: full backup snapshots are now encrypted."},
    "zh": {"retries": "{E} {v}：回调投递失败的重试次数现在显示在监控面板上。",
           "owner": "{E} {v}：负责团队调整了值班轮换。",
           "region": "{E} {v}：重写了把{E}迁移到其他区域的工具。",
           "retention": "{E} {v}：{E}产生的日志保留时间改为在配置仓库中设置。",
           "rate": "{E} {v}：API客户端现在可以看到每分钟剩余的请求次数。",
           "timeout": "{E} {v}：超时的请求现在会记录追踪编号。",
           "backup": "{E} {v}：全量备份快照现在会加密。"},
}

# An on-call notes heading per fact kind: the topic in the lexical question's words.
TOPICS = {
    "en": {"retries": "failed webhook delivery retries", "owner": "the owning team and its pager",
           "region": "the deployed region and the warm standby", "retention": "log retention",
           "deploy": "the days releases may be deployed", "rate": "requests per minute per "
           "API client", "store": "the cluster that keeps its state", "escalation":
           "escalations and the technical lead", "timeout": "request timeouts",
           "backup": "full backups and snapshots"},
    "zh": {"retries": "回调投递失败后的重试", "owner": "负责团队与值班", "region": "部署区域与热备",
           "retention": "日志保留天数", "rate": "API客户端每分钟请求次数", "timeout": "请求超时",
           "backup": "全量备份与快照"},
}

# How a distractor document restates a fact with other values: not the answer.
NOT_CURRENT = {"en": ("Until last spring the setup was different: ",
                      "A draft proposal, never approved, said: ",
                      "In the staging environment only: "),
               "zh": ("去年春天之前的旧配置是：", "一份未获批准的草案曾提出：", "仅在预发环境中：")}

FILLER = {
    "en": (
        "This runbook is reviewed every quarter by the owning team.",
        "Dashboards for latency and error rate are linked from the service catalog.",
        "Webhook payloads are signed with an HMAC header so receivers can verify them.",
        "Retries in general should use exponential backoff with jitter.",
        "Most teams keep logs for at least a week so incidents can be debugged.",
        "Backups are verified by a restore drill once a month.",
        "Rate limits protect shared infrastructure from noisy neighbours.",
        "Deploys outside the agreed window need approval from the change board.",
        "A timeout should be shorter than the caller's own deadline.",
        "The standby region is promoted by hand during a regional outage.",
        "Escalation paths are written down in the on-call handbook.",
        "Capacity is planned twice a year against the traffic forecast.",
        "Feature flags are cleaned up within two sprints of a full rollout.",
        "Secrets are rotated automatically and never stored in the repository.",
        "Alerts page only for symptoms that users can notice.",
        "Schema migrations run before the code that needs them is deployed.",
        "Every incident gets a blameless review within five working days.",
        "Health checks report readiness separately from liveness.",
        "Load tests run against a copy of production traffic every release.",
        "Client libraries are versioned together with the public API.",
        "Customer data never leaves the region it was collected in.",
        "Cost reports are sent to each owning team at the start of the month.",
        "Old API versions are deprecated with six months of notice.",
        "The service catalog lists every dependency and its owner.",
    ),
    "zh": (
        "本手册每个季度由负责团队复核一次。", "延迟和错误率的监控面板链接在服务目录中。",
        "回调内容带有签名，接收方可以校验。", "重试通常应采用带抖动的指数退避。",
        "大多数团队至少保留一周日志以便排查故障。", "备份每月通过一次恢复演练来验证。",
        "限流用于保护共享基础设施不被单个用户拖垮。", "在约定窗口之外发布需要变更委员会批准。",
        "超时时间应短于调用方自己的截止时间。", "区域故障时由人工切换到备用区域。",
        "升级路径写在值班手册里。", "每次故障都会在五个工作日内进行复盘。",
        "健康检查区分就绪和存活两种状态。", "客户数据不会离开采集它的区域。",
    ),
}

PERSONAL: tuple[Fact, ...] = (
    Fact("pet", "en", "Big news at home: we adopted a {species} and the kids named it {pet}.",
         "What is the name of the {species} we adopted?",
         "What did the children decide to call the animal that joined our family?",
         distractor="My neighbour's {species2} {pet2} kept everyone awake last night.",
         near="We keep talking about getting a pet, the kids want one badly."),
    Fact("city", "en", "I live in {city}, so the weather here has been a mess lately.",
         "Which city do I live in now?", "Where is home for me these days?",
         distractor="My brother lives in {city3} and keeps telling me to visit.",
         near="I'm so tired of the rent going up where we live.",
         update="We finally moved! I live in {city2} now, the new flat is much closer to the "
                "office."),
    Fact("job", "en", "I work as a {role} at {company}, mostly meetings this week.",
         "What is my job and which company do I work at now?",
         "Who employs me at the moment, and in what position?",
         distractor="My friend {name} works as a {role3} at {company3}.",
         near="Work has been exhausting, I might look for something new.",
         update="Quick update: I quit {company} and I'm now a {role2} at {company2}."),
    Fact("allergy", "en", "Please remember I'm allergic to {food}; last time it sent me to "
         "the hospital.", "What am I allergic to?",
         "Which ingredient must you keep out of any recipe you suggest for me?",
         distractor="My colleague is allergic to {food2}, so the office party had no dessert.",
         near="I used to think I was allergic to {food3}, but the test came back clean."),
    Fact("trip", "en", "We're flying to {place} in {month} for our anniversary.",
         "Where are we flying for our anniversary?",
         "What destination did I choose for the celebration trip with my partner?",
         distractor="My parents went to {place2} last year and loved it.",
         near="Our anniversary is coming up and I still haven't booked anything."),
    Fact("music", "en", "I signed up for {instrument} lessons every Tuesday evening.",
         "Which instrument did I sign up for lessons in?",
         "What kind of music class am I taking this season?",
         distractor="My daughter wants to quit her {instrument2} lessons.",
         near="I played the {instrument3} as a kid but gave it up."),
    Fact("car", "en", "I drive a {color} {car}, it's old but it runs.", "What car do I drive?",
         "What vehicle do I own?", distractor="My wife wants a {car2} for her commute.",
         near="I rented a {car3} on holiday and hated it."),
    Fact("dentist", "en", "My dentist appointment is on {weekday} at {hour} o'clock.",
         "When is my dentist appointment?", "When do I need to go get my teeth checked?",
         distractor="My son's doctor visit is on {weekday2}.",
         near="One of my molars has been aching since the weekend."),
    Fact("school", "en", "Our son {kid} starts at {school} in September.",
         "Which school does our son start at?",
         "Where will our boy be going for classes from the autumn?",
         distractor="The neighbours' kid goes to {school2}.",
         near="We toured {school3} last month but it felt too big."),
    Fact("pet", "zh", "家里有大事：我们领养了一只{species}，孩子们给它取名叫{pet}。",
         "我们领养的{species}叫什么名字？", "新来的小家伙叫啥？",
         distractor="邻居家的{species2}{pet2}昨晚叫了一整夜。", near="孩子们一直吵着要养宠物。"),
    Fact("city", "zh", "我住在{city}，最近这里天气很糟。", "我现在住在哪个城市？",
         "我目前的家安在什么地方？", distractor="我哥哥住在{city3}，一直叫我去玩。",
         update="我们终于搬家了！我现在住在{city2}，新房子离公司近多了。",
         near="房租又涨了，真想换个地方住。"),
    Fact("allergy", "zh", "请记住我对{food}过敏，上次还进了医院。", "我对什么过敏？",
         "给我推荐菜谱时必须避开哪种食材？",
         distractor="我同事对{food2}过敏，所以办公室聚会没有甜点。",
         near="我以前以为自己对{food3}过敏，结果检测是阴性。"),
    Fact("trip", "zh", "我们{month}要飞去{place}过结婚纪念日。", "我们飞去哪里过结婚纪念日？",
         "我和另一半庆祝的旅行目的地选在了哪儿？", distractor="我爸妈去年去了{place2}，很喜欢。",
         near="结婚纪念日快到了，我还什么都没订。"),
    Fact("music", "zh", "我报名了每周二晚上的{instrument}课。", "我报名了每周二晚上的什么课？",
         "这一季我在学哪种乐器？", distractor="我女儿想放弃她的{instrument2}课。",
         near="我小时候学过{instrument3}，后来放弃了。"),
    Fact("dentist", "zh", "我的牙医预约在{weekday}{hour}点。", "我的牙医预约在什么时候？",
         "我哪天要去检查牙齿？", distractor="我儿子的体检安排在{weekday2}。",
         near="我的一颗大牙从周末开始就一直疼。"),
)

# What users say between facts: plain chatter, and questions on a fact's topic that state
# nothing (so a session about pets is not yet evidence of the pet's name).
CHATTER = {
    "en": ("Morning! Coffee first, then questions.", "Can you help me draft an email to my "
           "landlord?", "What's a good way to stay focused in the afternoon?",
           "Thanks, that was helpful.", "Ugh, Mondays.", "Can you summarise that in two lines?",
           "Any tips for a rainy weekend?", "I'm trying to cook more at home.",
           "Let's plan my week.", "Remind me to drink more water, haha.",
           "Is it normal to feel tired after lunch?", "Tell me a fun fact about octopuses."),
    "zh": ("早上好！先喝杯咖啡。", "帮我写一封给房东的邮件好吗？", "下午怎么保持专注？",
           "谢谢，很有帮助。", "周末下雨有什么好玩的？", "我想多在家做饭。",
           "帮我安排一下这周的计划。", "午饭后犯困正常吗？"),
}
TOPICAL = {
    "en": {"pet": "What's the best food for a young animal?",
           "city": "How do I find a good moving company?",
           "job": "What do interviewers ask for senior roles?",
           "allergy": "Are food allergy tests reliable?",
           "trip": "What should I pack for a long flight?",
           "music": "How long does it take to learn an instrument?",
           "car": "How often should I service an old car?",
           "dentist": "Is flossing really necessary?",
           "school": "What should kids bring on the first day of school?"},
    "zh": {"pet": "小动物吃什么比较好？", "city": "怎么找靠谱的搬家公司？",
           "allergy": "食物过敏检测准吗？", "trip": "长途飞行要带什么？",
           "music": "学一门乐器要多久？", "dentist": "真的需要每天用牙线吗？"},
}
REPLIES = {
    "en": ("Sure, here's a quick take.", "Got it, I'll keep that in mind.",
           "That sounds exciting!", "Here are three ideas: plan, prioritise, rest.",
           "Happy to help with that.", "Noted.", "Good question; it depends on a few things.",
           "Let me know if you want more detail."),
    "zh": ("好的，我记下了。", "听起来很棒！", "可以，这里有几个建议。", "没问题。",
           "这要看具体情况。"),
}
