#!/usr/bin/env python3
"""The ground truth's visible text of small HTML cases and of the bundled corpus, for
simdex's extraction tests (recipe 2): written by `../shared/eval/extract.py`'s own
`extract_text` (selectolax, Lexbor's HTML5 parser), never by simdex.

    python3 benches/html_ground_truth.py --eval ../shared/eval

writes fixtures/html-text/cases.jsonl (one {"name", "html", "text"} a line: the cases below)
and fixtures/html-text/corpus.tsv (page<TAB>words<TAB>CRC-32 of the words joined by single
spaces, UTF-8: every HTML page of fixtures/corpus/pages). Needs selectolax (requirements of
../shared/eval).
"""
import argparse
import json
import os
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> HTML: where a tree builder (scripting off) and a tag-by-tag reading of the head differ
CASES = [
    ("head_noscript_text", "<!doctype html><html><head><title>Head title</title><noscript>Enable scripts</noscript></head><body><p>Body words here</p></body></html>"),
    ("head_noscript_then_title", "<html><head><noscript>Enable scripts</noscript><title>Late title</title></head><body><p>Body words</p></body></html>"),
    ("head_noscript_link_only", "<head><noscript><link rel=stylesheet href=a.css></noscript><title>Head title</title></head><body>Body words</body>"),
    ("head_noscript_whitespace", "<head><noscript>\n  </noscript><title>Head title</title></head><body>Body words</body>"),
    ("head_noscript_style", "<head><noscript><style>p { color: red }</style></noscript><title>Head title</title></head><body>Body words</body>"),
    ("head_noscript_img_breaks", "<head><noscript><img src=x.png>Pixel</noscript><title>Late title</title></head><body>Body words</body>"),
    ("head_noscript_title_stays", "<head><noscript><title>Head title</title></noscript></head><body>Body words</body>"),
    ("head_noscript_then_nav", "<head><noscript>Enable</noscript><nav>Menu items</nav><title>Late</title></head><body>Body words</body>"),
    ("body_noscript_markup", "<body><p>Before</p><noscript><p>Hidden para</p> still hidden</noscript><p>After</p></body>"),
    ("body_title", "<html><head></head><body><p>Before</p><title>Body title</title><p>After</p></body></html>"),
    ("text_in_head", "<html><head><meta charset=utf-8>Stray text<title>Late title</title></head><body>Body words</body></html>"),
    ("div_in_head", "<head><meta charset=utf-8><div>Div in head</div><title>Late title</title></head><body>Body words</body>"),
    ("no_head_title", "<title>Only title</title><p>Body words</p>"),
    ("after_head_title", "<html><head></head><title>After head</title><body>Body words</body></html>"),
    ("text_before_html", "Before<html><head><title>Late title</title></head><body>Body words</body></html>"),
    ("template_in_head", "<head><template><p>Template para</p></template><title>Head title</title></head><body>Body words</body>"),
    ("comment_in_head", "<head><!-- a comment --><title>Head title</title><!-- another --></head><body>Body words</body>"),
    ("head_noframes", "<head><noframes>Frames <b>bold</b></noframes></head><body>Body words</body>"),
    ("body_noframes", "<body>Before <noframes>No frames <b>bold</b></noframes> after</body>"),
    ("head_script_then_text", "<head><script>var a = '<p>x</p>';</script></head>Loose words<body>Body words</body>"),
    ("uppercase_tags", "<HTML><HEAD><TITLE>Head title</TITLE><NOSCRIPT>Enable scripts</NOSCRIPT></HEAD><BODY>Body words</BODY></HTML>"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval", required=True, help="the ground truth's folder (../shared/eval)")
    ap.add_argument("--out", default=os.path.join(ROOT, "fixtures", "html-text"))
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.eval))
    from extract import extract_text  # the ground truth's extraction, unchanged

    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, open(os.path.join(a.out, "cases.jsonl"), "w", encoding="utf-8") as f:
        for name, html in CASES:
            path = os.path.join(tmp, name + ".html")
            with open(path, "w", encoding="utf-8") as h:
                h.write(html)
            f.write(json.dumps({"name": name, "html": html, "text": extract_text(path)}, ensure_ascii=False) + "\n")
    pages = os.path.join(ROOT, "fixtures", "corpus", "pages")
    with open(os.path.join(a.out, "corpus.tsv"), "w", encoding="utf-8") as f:
        for name in sorted(os.listdir(pages)):
            if name.endswith(".html"):
                words = extract_text(os.path.join(pages, name)).split()
                f.write(f"{name}\t{len(words)}\t{zlib.crc32(' '.join(words).encode()):08x}\n")


if __name__ == "__main__":
    main()
