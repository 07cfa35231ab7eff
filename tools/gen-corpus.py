#!/usr/bin/env python3
"""Writes fixtures/corpus/pages: a small multilingual corpus of HTML and text pages with
planted exact and near duplicates, and fixtures/corpus/PLANTED.tsv, the list of what was
planted (paths relative to pages/).

Deterministic: its own xorshift generator, no dependency on Python's `random`, so the same
script writes the same bytes everywhere. The text is generated from word lists written for
this script (no third-party text), so the corpus can be shipped.

    python3 tools/gen-corpus.py [OUT_DIR]          # default: fixtures/corpus

Planted groups (PLANTED.tsv: kind<TAB>group<TAB>path, one line per member):
  exact     byte-identical copies of a page under other names
  near      the same article in another page template (navigation, header, footer, scripts
            and comments differ: all dropped by visible-text extraction), as plain text, with
            letter case and spacing changed, or with one word changed in a long page
"""
import os
import sys

MASK = (1 << 64) - 1


class XorShift:
    def __init__(self, seed):
        self.s = (seed * 0x9E3779B97F4A7C15 + 1) & MASK

    def next(self):
        x = self.s
        x ^= (x << 13) & MASK
        x ^= x >> 7
        x ^= (x << 17) & MASK
        self.s = x
        return x

    def below(self, n):
        return self.next() % n

    def choice(self, seq):
        return seq[self.below(len(seq))]


EN = """time person year way day thing man world life hand part child eye woman place work week
case point government company number group problem fact river mountain garden library window
engine letter market village harbour bridge forest island valley station winter summer
morning evening kitchen teacher student doctor farmer painter sailor writer baker soldier
builds carries finds keeps opens reads writes paints sells buys watches follows remembers
crosses repairs measures collects borrows explains describes discovers protects
old new small large early late green quiet bright heavy narrow ancient careful busy
slowly quickly often rarely together alone again already almost always never
the a of and in on with under over near behind beside through across into from""".split()

RU = """время человек год дорога день вещь мир жизнь рука часть ребёнок глаз женщина место работа
неделя случай вопрос река гора сад библиотека окно двигатель письмо рынок деревня гавань мост
лес остров долина станция зима лето утро вечер кухня учитель студент врач фермер художник
моряк писатель пекарь строит несёт находит держит открывает читает пишет рисует продаёт
покупает смотрит помнит пересекает чинит измеряет собирает объясняет описывает защищает
старый новый маленький большой ранний поздний зелёный тихий яркий тяжёлый узкий древний
медленно быстро часто редко вместе снова уже почти всегда никогда и в на с под над около
через из""".split()

AR = """وقت شخص سنة طريق يوم شيء رجل عالم حياة يد جزء طفل عين امرأة مكان عمل أسبوع حالة نهر جبل
حديقة مكتبة نافذة محرك رسالة سوق قرية ميناء جسر غابة جزيرة وادي محطة شتاء صيف صباح مساء
مطبخ معلم طالب طبيب مزارع رسام بحار كاتب خباز يبني يحمل يجد يفتح يقرأ يكتب يرسم يبيع
يشتري يراقب يتذكر يعبر يصلح يقيس يجمع يشرح يصف يكتشف يحمي قديم جديد صغير كبير مبكر
متأخر أخضر هادئ مشرق ثقيل ضيق بطيء سريع غالبا نادرا معا وحده دائما أبدا في على مع تحت
فوق قرب خلف عبر من إلى""".split()

ZH = """时间 人们 今年 道路 今天 事情 世界 生活 双手 部分 孩子 眼睛 女人 地方 工作 星期 问题
事实 河流 高山 花园 图书馆 窗户 发动机 信件 市场 村庄 港口 桥梁 森林 岛屿 山谷 车站
冬天 夏天 早晨 傍晚 厨房 老师 学生 医生 农民 画家 水手 作家 面包师 建造 携带 发现
保持 打开 阅读 写作 绘画 出售 购买 观看 记得 穿过 修理 测量 收集 解释 描述 保护 古老
崭新 小小 巨大 安静 明亮 沉重 狭窄 缓慢 迅速 经常 很少 一起 独自 已经 总是 从来""".split()

LANGS = {"en": EN, "ru": RU, "ar": AR, "zh": ZH}
PAGES = {"en": 90, "ru": 60, "ar": 60, "zh": 60}


def sentence(rng, vocab, lang):
    words = [rng.choice(vocab) for _ in range(6 + rng.below(9))]
    if lang == "zh":
        return "".join(words) + ("，" if rng.below(3) == 0 else "。")
    s = " ".join(words)
    s = s[0].upper() + s[1:]
    return s + rng.choice([".", ".", ".", "!", "?", ";"])


def article(rng, lang, words):
    vocab = LANGS[lang]
    paras, count = [], 0
    while count < words:
        para = [sentence(rng, vocab, lang) for _ in range(2 + rng.below(4))]
        paras.append(("" if lang == "zh" else " ").join(para))
        count += sum(len(s.split()) if lang != "zh" else len(s) // 2 for s in para)
    return paras


def escape(t):
    return t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def html_page(title, paras, template, lang):
    body = "\n".join(f"<p>{escape(p)}</p>" for p in paras)
    direction = ' dir="rtl"' if lang == "ar" else ""
    if template == 0:
        return (f'<!DOCTYPE html>\n<html lang="{lang}"{direction}><head><meta charset="utf-8">'
                f"<title>{escape(title)}</title><style>p {{ margin: 0 }}</style></head>\n<body>\n"
                f'<header><a href="/">Home</a> | News &amp; Notes</header>\n'
                f'<nav><ul><li><a href="/a">Archive</a><li><a href="/b">About</a></ul></nav>\n'
                f"<main><h1>{escape(title)}</h1>\n{body}\n</main>\n"
                f"<footer>Copyright &copy; Example Press</footer></body></html>\n")
    if template == 1:
        return (f'<html lang="{lang}"{direction}>\n<head><title>{escape(title)}</title>\n'
                f'<script>var tracking = "<p>not text</p>"; if (1 < 2) {{ load(); }}</script></head>\n'
                f'<body><div role="navigation">Menu: Sports, Weather, Markets</div>\n'
                f'<!-- advertisement slot 42 -->\n<article><h1>{escape(title)}</h1>\n{body}\n</article>\n'
                f'<div class="breadcrumb">Start &gt; Stories</div>\n'
                f"<footer><p>Contact the editors</p></footer>\n</body></html>\n")
    return (f"<!doctype html><html><head><title>{escape(title)}</title>"
            f"<noscript>Enable scripts</noscript></head><body>"
            f"<form><button>Subscribe</button></form>"
            f"<h1>{escape(title)}</h1>{body}"
            f"<template><p>hidden template</p></template></body></html>")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "corpus")
    out = os.path.join(root, "pages")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name.endswith((".html", ".txt")):
            os.remove(os.path.join(out, name))
    rng = XorShift(2007)
    planted = []
    pages = []  # (path, lang, title, paras)
    for lang, n in PAGES.items():
        for i in range(n):
            words = 120 + rng.below(260)
            paras = article(rng, lang, words)
            title = sentence(rng, LANGS[lang], lang).rstrip(".!?;，。")
            path = f"{lang}-{i:03d}.html"
            with open(os.path.join(out, path), "w", encoding="utf-8", newline="\n") as f:
                f.write(html_page(title, paras, rng.below(3), lang))
            pages.append((path, lang, title, paras))

    def pick(lang, used):
        cands = [p for p in pages if p[1] == lang and p[0] not in used]
        p = rng.choice(cands)
        used.add(p[0])
        return p

    used = set()
    group = 0
    # exact copies: 2 or 3 byte-identical files
    for lang in LANGS:
        for _ in range(4):
            group += 1
            path, *_ = pick(lang, used)
            name = f"exact-{group:02d}"
            planted.append(("exact", name, path))
            with open(os.path.join(out, path), "rb") as f:
                data = f.read()
            for c in range(1 + rng.below(2)):
                copy = f"{path[:-5]}-copy{c + 1}.html"
                with open(os.path.join(out, copy), "wb") as f:
                    f.write(data)
                planted.append(("exact", name, copy))
    # near duplicates
    for lang in LANGS:
        for kind in ["template", "text", "case", "edit", "template", "edit"]:
            group += 1
            path, _, title, paras = pick(lang, used)
            name = f"near-{group:02d}-{kind}"
            planted.append(("near", name, path))
            base = path[:-5]
            if kind == "template":
                with open(os.path.join(out, path), encoding="utf-8") as f:
                    old = f.read()
                tpl = next(t for t in range(3) if html_page(title, paras, t, lang) != old)
                copy = f"{base}-mirror.html"
                data = html_page(title, paras, tpl, lang)
            elif kind == "text":
                copy = f"{base}-plain.txt"
                data = title + "\n\n" + "\n\n".join(paras) + "\n"
            elif kind == "case":
                copy = f"{base}-recased.html"
                data = html_page(title.upper(), ["  ".join(p.upper().split(" ")) for p in paras], 0, lang)
            else:
                # one word changed in a long page
                paras = list(paras) + article(rng, lang, 200)
                with open(os.path.join(out, path), "w", encoding="utf-8", newline="\n") as f:
                    f.write(html_page(title, paras, 0, lang))
                vocab = LANGS[lang]
                i = rng.below(len(paras))
                p = paras[i]
                if lang == "zh":
                    w = next((v for v in vocab if v in p), None)
                    p = p.replace(w, rng.choice([v for v in vocab if v != w]), 1) if w else p + "。"
                else:
                    ws = p.split(" ")
                    j = rng.below(len(ws))
                    ws[j] = rng.choice([v for v in vocab if v != ws[j]])
                    p = " ".join(ws)
                edited = paras[:i] + [p] + paras[i + 1:]
                copy = f"{base}-edited.html"
                data = html_page(title, edited, 1, lang)
            with open(os.path.join(out, copy), "w", encoding="utf-8", newline="\n") as f:
                f.write(data)
            planted.append(("near", name, copy))
    with open(os.path.join(root, "PLANTED.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write("kind\tgroup\tpath\n")
        for row in planted:
            f.write("\t".join(row) + "\n")
    total = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
    print(f"{len(os.listdir(out))} documents, {total} bytes in {out}")


if __name__ == "__main__":
    main()
