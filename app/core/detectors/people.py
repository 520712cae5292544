"""Person names and postal addresses where the text says so: labels and address structure.

Contract: ``PERSON_NAME`` (``pii.person_name``) and ``ADDRESS`` (``pii.address``) are
``PatternDetector``s (proposed action ``mask``) whose span is the name or the address only.

    pii.person_name  a name after a label — ``Name:``, ``Customer name:``, ``Contact:``,
                     ``Cardholder:``, JSON ``"full_name": "…"``, ``From: Jane Doe <…>``,
                     ``Dear Jane Doe,``, ``Mr./Ms./Dr. Doe`` — as 2-3 capitalised words (one
                     after an honorific); 姓名/联系人/收件人/收货人/持卡人/客户：+ 2-4 Han
                     characters starting with a common surname; 张先生/李女士/王小姐
    pii.address      a street line: ``221B Baker Street``, ``1600 Pennsylvania Ave NW, Suite
                     4, Washington, DC 20500``; ``Hauptstraße 12, 10115 Berlin``; ``12 rue de
                     Rivoli, 75001 Paris``; ``Via Roma 10, 00184 Roma``; a UK postcode after a
                     town or comma; 省/市/区…路/街/道/巷/弄 + 号/號 (mainland, HK, TW)

Why no NER model: no trustworthy spaCy pipeline installs from PyPI (the English and Chinese
models are published as GitHub release assets; the PyPI names are third-party mirrors of
unknown provenance or placeholders), presidio's name and address recognizers need such a
model, and a CNN pipeline costs seconds per MB on every candidate. So names in free prose
("I spoke to Jane yesterday") are deliberately not found.
"""

from __future__ import annotations

import re

from app.core.detectors.base import PatternDetector

_CAP = r"[A-ZÀ-Ý][a-zß-ÿ'’\-]{1,20}"
_FULL = rf"{_CAP}(?: [A-Z]\.)?(?: (?:van |von |de |da |di |del |le |O')?{_CAP}){{1,2}}"
_NOT_NAMES = frozenset({  # capitalised words after a name label that name no person
    "Customer", "Sir", "Madam", "Team", "Support", "All", "Colleagues", "User", "Valued",
    "Hiring", "Admin", "Friends", "Member", "Members", "Client", "Partner", "Partners", "Set",
    "Run", "Build", "Install", "Check", "Deploy", "Test", "Tests", "Upload", "Update", "Create",
    "Add", "Use", "Get", "The", "New", "Release", "Publish", "Setup", "Cache", "Lint",
    "Staging", "Production", "Prod", "Dev", "Demo", "Sandbox", "Cluster", "Server", "Service",
    "Default", "Main", "Primary", "Backup", "Database", "Node", "Worker", "Pipeline", "Project",
    "Group", "Instance", "Bucket", "Queue", "Topic", "App", "Application", "Web", "Frontend",
    "Backend", "System", "Root", "Guest", "Anonymous", "Unknown", "Example", "Sample", "Robot",
    "Bot", "Account", "Sales", "Billing", "Office", "Department", "Desk", "Center", "Centre",
    "Suite", "Runner", "Job", "Task", "Report", "Dashboard", "Store", "Shop", "Bank"})
# 120 most common Chinese surnames (single character) and the common double ones
_SURNAMES = ("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡"
             "余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯"
             "龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章"
             "鲁岳翟殷詹申欧耿关兰焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷盛曲翁冉"
             "骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦"
             "戚岑景党宫费卜冷晏席卫米柏宗瞿桂全佟应臧闵苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄"
             "丛仲虞敖巩明佘池查麻苑迟邝陳張劉楊黃趙吳鄭謝許馮鄧蕭葉蘇呂盧鍾譚陸範賈韋鄒孟熊邱"
             "薛閻雷龍陶賀顧郝龔萬錢嚴覃湯溫莊聶魯")
_DOUBLE_SURNAMES = "欧阳|司马|诸葛|上官|东方|皇甫|令狐|慕容|尉迟|长孙|歐陽|司馬|諸葛"


def _name_ok(m: re.Match[str], _text: str) -> bool:
    return _NOT_NAMES.isdisjoint(m.group("v").split(" "))


PERSON_NAME = PatternDetector(
    name="pii.person_name", type="pii.person_name", action="mask", group="v",
    patterns=(
        re.compile(  # English labels, the value on the same line
            r"(?<![A-Za-z_])(?:(?:[Ff]ull|[Cc]ustomer|[Cc]ontact|[Pp]atient|[Cc]ard ?[Hh]older|"
            r"[Aa]ccount [Hh]older|[Ss]ender|[Rr]ecipient|[Ll]egal|[Cc]lient|[Ee]mployee|"
            r"[Pp]assenger|[Gg]uest|[Aa]pplicant)[ _]?(?:[Nn]ame)?|[Nn]ame|NAME|Attn\.?|"
            r"Requester|Reporter|Caller|Signed|Assignee|Owner|Tenant|Beneficiary)"
            rf"[\"']?[ \t]{{0,2}}[:=：][ \t]{{0,3}}[\"']?(?P<v>{_FULL})(?![A-Za-z])"),
        re.compile(rf"(?<![A-Za-z])(?:From|To|Cc|Reply-To): (?P<v>{_FULL}) <"),
        re.compile(  # one word is enough where the label says which part of a name it is
            r"(?<![A-Za-z])(?:(?:[Ff]irst|[Ll]ast|[Gg]iven|[Ff]amily|[Mm]iddle)[ _]?[Nn]ame|"
            rf"[Ss]urname|[Ff]orename)[\"']?[ \t]{{0,2}}[:=][ \t]{{0,3}}[\"']?(?P<v>{_CAP})"
            r"(?![A-Za-z])"),
        re.compile(  # a sign-off, the name alone on the next line
            r"(?:[Rr]egards|Sincerely|Cheers|Thanks|Best|Yours truly|Kind regards),?[ \t]{0,2}\n"
            rf"(?P<v>{_FULL})[ \t]{{0,2}}(?:\n|$)"),
        re.compile(rf"(?<![A-Za-z])(?:Dear|Hi|Hello) (?P<v>{_FULL}),"),
        re.compile(rf"(?<![A-Za-z])(?:Mr|Mrs|Ms|Miss|Dr|Prof)\.? (?P<v>{_CAP}(?: {_CAP})?)"
                   r"(?![A-Za-z])"),
        re.compile(r"(?:姓名|联系人|聯絡人|经办人|經辦人|收件人|收货人|收貨人|寄件人|持卡人|客户姓名|客戶姓名|"
                   r"用户姓名|患者|申请人|申請人|乘客|户名|戶名)[ \t]{0,2}[:：]?[ \t]{0,2}"
                   rf"(?P<v>(?:{_DOUBLE_SURNAMES}|[{_SURNAMES}])[\u4e00-\u9fff]{{1,2}})"),
        re.compile(r"(?:客户|客戶|用户|用戶|联系|聯繫|负责人|負責人)[ \t]{0,2}[:：][ \t]{0,2}"
                   rf"(?P<v>(?:{_DOUBLE_SURNAMES}|[{_SURNAMES}])[\u4e00-\u9fff]{{1,2}})"),
        re.compile(rf"(?P<v>(?:{_DOUBLE_SURNAMES}|[{_SURNAMES}])[\u4e00-\u9fff]?)"
                   r"(?:先生|女士|小姐)"),
    ),
    accept=_name_ok)

_STREET = (r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|"
           r"Pl|Way|Terrace|Parkway|Pkwy|Highway|Hwy|Close|Crescent|Square|Sq|Gardens|Mews|Loop|"
           r"Circle|Row|Walk|Trail)")
_UNIT = r"(?:,? (?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|Fl|Room|#)\.? ?[0-9A-Za-z\-]{1,6})?"
_TOWN = r"[A-Z][a-zà-ÿ]+(?: [A-Z][a-zà-ÿ]+){0,2}"
_GERMANIC = (r"(?:straße|strasse|str\.|weg|platz|gasse|allee|ring|damm|laan|straat|gracht|"
             r"plein|gatan|vägen|vej|gade|katu|tie)")
_ROMANCE = (r"(?:Via|Viale|Piazza|Corso|Calle|Avenida|Plaza|Paseo|Rua|Travessa|Ulica|ul\.|"
            r"Rue|Avenue|Boulevard|Chaussée)")
_FRENCH = r"(?:[Rr]ue|[Aa]venue|[Bb]oulevard|[Pp]lace|[Cc]hemin|[Aa]llée)"
_DE = r"(?:de |du |des |la |le |del |della |di |da |do |dos |des |l')?"
_ZH_ROAD = r"(?:路|街|大道|道|巷|弄|胡同)[东南西北中東]?(?:[一二三四五六七八九十]段)?"

ADDRESS = PatternDetector(
    name="pii.address", type="pii.address", action="mask", group="v",
    patterns=(
        re.compile(  # 1600 Pennsylvania Ave NW, Suite 4, Washington, DC 20500
            rf"(?<![0-9A-Za-z#\-.])(?P<v>\d{{1,5}}[A-Z]? (?:[NSEW]\.? )?(?:{_CAP} ){{1,3}}"
            rf"{_STREET}\.?(?: [NS][EW])?{_UNIT}(?:, {_TOWN})?(?:,? [A-Z]{{2}} \d{{5}}"
            r"(?:-\d{4})?)?)(?![A-Za-z])"),
        re.compile(  # Hauptstraße 12, 10115 Berlin; Keizersgracht 123, 1015 CJ Amsterdam
            rf"(?<![A-Za-zÀ-ÿ])(?P<v>[A-ZÀ-Ý][a-zà-ÿ]{{2,30}}{_GERMANIC} \d{{1,4}}[a-z]?"
            rf"(?:, \d{{4,5}}(?: [A-Z]{{2}})? {_TOWN})?)(?![A-Za-z])"),
        re.compile(  # 12 rue de Rivoli, 75001 Paris; Via Roma 10, 00184 Roma
            rf"(?<![0-9A-Za-z])(?P<v>(?:\d{{1,4}},? {_FRENCH} "
            rf"{_DE}[A-ZÀ-Ý][a-zà-ÿ']+(?: {_DE}[A-ZÀ-Ý][a-zà-ÿ']+){{0,3}}|{_ROMANCE} {_DE}"
            rf"[A-ZÀ-Ý][a-zà-ÿ']+(?: {_DE}[A-ZÀ-Ý][a-zà-ÿ']+){{0,3}},? \d{{1,4}}[a-z]?)"
            rf"(?:, (?:[A-Z]-)?\d{{4,5}} {_TOWN})?)(?![A-Za-z])"),
        re.compile(  # PO Box 1234, Sydney NSW 2001
            rf"(?<![A-Za-z])(?P<v>(?:PO|P\.O\.) Box \d{{1,6}}(?:, {_TOWN})?"
            r"(?: [A-Z]{2,3})?(?: \d{4,5})?)(?![A-Za-z])"),
        re.compile(  # London SW1A 2AA, Leeds, LS1 4AP
            r"(?<=[a-z,] )(?P<v>(?:[A-Z]{1,2}\d[A-Z\d]?|GIR) \d[A-Z]{2})(?![0-9A-Za-z])"),
        re.compile(  # 上海市浦东新区世纪大道100号; 台北市信義區市府路45號3樓
            rf"(?P<v>[\u4e00-\u9fff]{{1,16}}{_ZH_ROAD}\d{{1,5}}(?:-\d{{1,4}})?[号號]"
            r"(?:\d{1,4}(?:室|楼|樓|层|層|单元|單元))?)"),
    ))
