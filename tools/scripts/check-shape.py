#!/usr/bin/env python3
"""The house rules a CI run keeps: no Rust source file over 700 lines, no function over 120
lines in a crate's `src/` (bench harnesses aside), no import circle
between the modules (files) of a crate or of the Python package, and a narrow public API
(issue 35): the index crate's `src/lib.rs` declares at most 5 public modules, every public
`...Options` struct of the library crates is `#[non_exhaustive]` (built from a default with
`with_...` methods), and the Python package restates no rule of the library's: no k or
threshold given, compared with or defaulting to a number (`UNSKETCHED_K = 3`, `0 <= k <= 8`,
`k: int = 3`, `add_argument("-k", default=3)`), no library constant declared again, no literal
0.9; `simdex.DocumentQuery` decides them. The README stays at most 250 lines, and no document
or source names a Markdown file the repository does not hold or links out of it (the project
stands on its own). The results page (`benches/RESULTS.md`) holds the
capability tables only: at most 400 lines, every relative link to a file that exists (the
per-issue diaries live under `benches/history/`).

    python3 tools/scripts/check-shape.py            # exit 1 and name each offender
    python3 tools/scripts/check-shape.py --report   # also the largest files and functions, each crate's edges
    python3 tools/scripts/check-shape.py --doc-items  # also count the crates' public items in
                                                      # target/doc/*/all.html (after cargo doc)

An edge A -> B means file A names an item of file B: a `use` path or an inline path
(`crate::x::y`, `super::z`, `self::w`) that resolves into B's module. A module's facade
(a `lib.rs`/`mod.rs` that holds only `mod` declarations and `pub use` re-exports of its own
descendants, defining nothing itself) is its interface, not a use: those lines make no edge, and a path through a re-export is
followed to the file that defines the item. Inline modules (`mod tests { ... }`) belong to
their file. Paths into other crates cannot close a circle and are ignored.
"""
import ast
import os
import re
import sys

LIMIT = 700
# no function longer than this in the crates' src/ (the library's, the fronts', the binding's;
# bench harnesses under benches/ are not shipped and not held to it)
FUNCTION_LIMIT = 120
RESULTS_LIMIT = 400
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP_DIRS = {"target", ".git", "node_modules", "corpus", "artifacts"}


def rust_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(top, f)


def strip(src):
    """Source with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 8]) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', src[i:]).group(1)
            end = src.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * src.count("\n", i, end))
            i = end
        elif c == '"' or (c == "b" and src.startswith('b"', i) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_"))):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Crate:
    def __init__(self, root_file):
        self.root_dir = os.path.dirname(root_file)
        self.files = {}  # module path tuple -> file
        self.children = {}  # module path -> set of child names
        self._load(root_file, ())

    def _load(self, path, module):
        self.files[module] = path
        self.children.setdefault(module, set())
        text = strip(open(path, encoding="utf-8").read())
        base = os.path.dirname(path)
        own_dir = base if os.path.basename(path) in ("lib.rs", "main.rs", "mod.rs") else os.path.join(base, os.path.basename(path)[:-3])
        # `mod name;`, and `internal_mod!(name)`, which declares a file module too (src/lib.rs)
        declared = re.finditer(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;|\binternal_mod!\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)", text)
        for m in declared:
            name = m.group(1) or m.group(2)
            self.children[module].add(name)
            for cand in (os.path.join(own_dir, name + ".rs"), os.path.join(own_dir, name, "mod.rs")):
                if os.path.exists(cand):
                    self._load(cand, module + (name,))
                    break


def parse_use_tree(s, i, prefix, out):
    """Parses a use tree at s[i:]; appends full paths to out; returns the end index."""
    path = list(prefix)
    while True:
        while i < len(s) and s[i].isspace():
            i += 1
        if i < len(s) and s[i] == "{":
            i += 1
            while True:
                while i < len(s) and (s[i].isspace() or s[i] == ","):
                    i += 1
                if i >= len(s) or s[i] == "}":
                    return i + 1
                i = parse_use_tree(s, i, path, out)
        m = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|\*)").match(s, i)
        if not m:
            out.append(path)
            return i
        path.append(m.group(1))
        i = m.end()
        while i < len(s) and s[i].isspace():
            i += 1
        if s.startswith("::", i):
            i += 2
            continue
        if s.startswith("as", i):
            m2 = re.compile(r"as\s+[A-Za-z_][A-Za-z0-9_]*").match(s, i)
            if m2:
                i = m2.end()
        out.append(path)
        return i


def module_uses(text):
    """(inline module path, is_pub_use, path) for each use and inline path of a file."""
    found = []
    stack = []  # (name, depth at which it opened)
    depth = 0
    token = re.compile(r"\{|\}|\bmod\s+([A-Za-z_]\w*)\s*\{|\b(pub(?:\([^)]*\))?\s+)?use\s+|(?<![\w:])([a-z_]\w*)((?:\s*::\s*[A-Za-z_]\w*)+)")
    pos = 0
    while True:
        m = token.search(text, pos)
        if not m:
            break
        g = m.group(0)
        inline = tuple(n for n, _ in stack)
        if g == "{":
            depth += 1
            pos = m.end()
        elif g == "}":
            depth -= 1
            if stack and stack[-1][1] == depth:
                stack.pop()
            pos = m.end()
        elif m.group(1):
            stack.append((m.group(1), depth))
            depth += 1
            pos = m.end()
        elif g.lstrip().startswith(("use", "pub")):
            paths = []
            end = parse_use_tree(text, m.end(), [], paths)
            for p in paths:
                found.append((inline, bool(m.group(2)), p))
            pos = end
        else:
            p = [m.group(3)] + [x.strip() for x in m.group(4).split("::") if x.strip()]
            found.append((inline, False, p))
            pos = m.end()
    return found


def resolve(crate, uses_of, context, path, seen=None):
    """The module a path names (following re-exports), or None outside the crate."""
    seen = seen or set()
    mod = list(context)
    segs = list(path)
    if not segs:
        return None
    if segs[0] == "crate":
        mod, segs = [], segs[1:]
    elif segs[0] in ("super", "self"):
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                if not mod:
                    return None
                mod.pop()
            segs = segs[1:]
    elif segs[0] not in crate.children.get(tuple(mod), set()):
        return None
    while segs and segs[0] in crate.children.get(tuple(mod), set()):
        mod.append(segs.pop(0))
    target = tuple(mod)
    if segs and segs[0] != "*":
        key = (target, segs[0])
        if key not in seen:
            seen.add(key)
            for inline, is_pub, p in uses_of.get(target, []):
                if is_pub and p and p[-1] == segs[0] and not inline:
                    r = resolve(crate, uses_of, target, p, seen)
                    if r is not None:
                        return r
    return target


def facade_edge(crate, src_mod, target):
    return len(target) > len(src_mod) and target[: len(src_mod)] == src_mod


ITEM = re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(?:struct|enum|union|fn|impl|trait|const|static|type)\b", re.M)


def is_facade(text):
    """A file whose only items are `mod` lines and re-exports (no definitions at top level)."""
    return not ITEM.search(text)


def crate_edges(crate):
    uses_of, facades, texts = {}, set(), {}
    for mod, f in crate.files.items():
        text = strip(open(f, encoding="utf-8").read())
        uses_of[mod] = module_uses(text)
        texts[mod] = text
        if is_facade(text):
            facades.add(mod)
    edges = {}
    for mod, uses in uses_of.items():
        for inline, is_pub, p in uses:
            ctx = mod + inline
            target = resolve(crate, uses_of, ctx, p)
            if target is None:
                continue
            # a re-export of a descendant is interface, not use, unless the file also uses
            # the name itself (a type of its own with a field of that type, say)
            if is_pub and not inline and facade_edge(crate, mod, target):
                if mod in facades or len(re.findall(r"\b%s\b" % re.escape(p[-1]), texts[mod])) <= 1:
                    continue
            # a path into an inline module or the file's own items stays in the file
            t = target
            while t not in crate.files and t:
                t = t[:-1]
            if t != mod:
                edges.setdefault(mod, set()).add(t)
    return edges


def cycles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def crate_roots():
    roots = []
    for f in rust_files():
        rel = os.path.relpath(f, ROOT)
        if rel.endswith(("src/lib.rs", "src/main.rs")) and os.path.exists(os.path.join(os.path.dirname(os.path.dirname(f)), "Cargo.toml")):
            roots.append(f)
    return roots


MAX_PUB_MODS = 5
# the library crates' roots: each declares at most MAX_PUB_MODS public modules
LIBRARY_ROOTS = (os.path.join("src", "lib.rs"), os.path.join("tools", "fingerprint", "src", "lib.rs"))
LIBRARY_SRC = ("src", os.path.join("tools", "fingerprint", "src"))
LIBRARY_CONSTANTS = ("DEFAULT_CONFIRMED_K", "DEFAULT_UNCONFIRMED_K", "DEFAULT_MIN_SIMILARITY", "MAX_K")
# the index crate's public items as `cargo doc` lists them (target/doc/simdex/all.html)
MAX_PUBLIC_ITEMS = 110


def api_problems():
    """The narrow-API rules: (file, message) for each breach."""
    out = []
    for rel in LIBRARY_ROOTS:
        lib = os.path.join(ROOT, rel)
        if os.path.exists(lib):
            with open(lib, encoding="utf-8") as fh:
                mods = re.findall(r"^pub mod (\w+);", strip(fh.read()), re.M)
            if len(mods) > MAX_PUB_MODS:
                out.append((rel, f"{len(mods)} public modules ({', '.join(mods)}), at most {MAX_PUB_MODS}: make the rest private and re-export their API at the root"))
    for f in rust_files():
        rel = os.path.relpath(f, ROOT)
        if not rel.startswith(LIBRARY_SRC) or rel.startswith(os.path.join("src", "bin")):
            continue
        with open(f, encoding="utf-8") as fh:
            src = strip(fh.read())
        for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)pub struct (\w*Options)\b", src):
            if "non_exhaustive" not in m.group(1):
                out.append((rel, f"pub struct {m.group(2)} is not #[non_exhaustive] (options grow: give it with_... builders)"))
    pkg = os.path.join(ROOT, "python", "simdex")
    for top, dirs, files in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(top, name)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                for line, msg in python_restated(text):
                    out.append((os.path.relpath(path, ROOT), f"line {line}: {msg}"))
    return out


# the Python package restates no rule of the library's: a k (a name `k` or `..._k`) or a
# threshold (`...threshold`, `...similarity`) given a number, compared with one, or defaulting
# to one, a library constant declared again, the literal 0.9 (the confirmation threshold)
K_NAME = re.compile(r"(?i)^(k|\w+_k)$")
SIMILARITY_NAME = re.compile(r"(?i)(threshold|similarity)$")
K_FLAGS = ("-k", "--k", "--max-k")
SIMILARITY_FLAG = re.compile(r"^--[\w-]*(threshold|similarity)$")
ASK = "ask the library (simdex.DocumentQuery(k=..., min_similarity=...): .check(), .k, .unconfirmed_k, .min_similarity)"


def python_restated(text):
    """(line, message) for each rule of the library that Python source `text` restates."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return [(e.lineno or 0, f"does not parse: {e.msg}")]

    def name_of(node):
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None

    def number(node):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)

    def ruled(n):
        return bool(n) and (n in LIBRARY_CONSTANTS or K_NAME.match(n) or SIMILARITY_NAME.search(n))

    out = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and type(node.value) is float and node.value == 0.9:
            out.append((line, f"the literal 0.9 (the library's confirmation threshold): {ASK}"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(K_NAME.match(name_of(x) or "") and number(y) for a, b in zip(sides, sides[1:]) for x, y in ((a, b), (b, a))):
                out.append((line, f"`{ast.unparse(node)}`: a range of k restated; {ASK}"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and number(node.value):
            for n in map(name_of, node.targets if isinstance(node, ast.Assign) else [node.target]):
                if n in LIBRARY_CONSTANTS:
                    out.append((line, f"{n} is declared again; take it from the library (simdex.{n})"))
                elif ruled(n):
                    out.append((line, f"`{n} = {ast.unparse(node.value)}`: a k or threshold of the library's declared again; {ASK}"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            pos = a.posonlyargs + a.args
            given = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for arg, d in given:
                if number(d) and ruled(arg.arg):
                    out.append((line, f"`{arg.arg}={ast.unparse(d)}`: a default of the library's restated; default to None and {ASK}"))
        elif isinstance(node, ast.Call):
            flags = [x.value for x in node.args if isinstance(x, ast.Constant) and isinstance(x.value, str)]
            if any(f in K_FLAGS or SIMILARITY_FLAG.match(f) for f in flags):
                for kw in node.keywords:
                    if kw.arg == "default" and number(kw.value):
                        out.append((line, f"`{flags[0]}` default={ast.unparse(kw.value)}: a default of the library's restated; default to None and {ASK}"))
    return sorted(set(out))


def function_lengths(text):
    """(lines, first line, name) of every function with a body in stripped source `text`."""
    out = []
    for m in re.finditer(r"\bfn\s+(\w+)", text):
        i, depth = m.end(), 0
        while i < len(text):
            c = text[i]
            if c in "([<":
                depth += 1
            elif c in ")]>" and not (c == ">" and text[i - 1] == "-"):
                depth -= 1
            elif c == ";" and depth <= 0:
                i = -1
                break
            elif c == "{" and depth <= 0:
                break
            i += 1
        if i < 0 or i >= len(text):
            continue
        j, braces = i, 0
        while j < len(text):
            if text[j] == "{":
                braces += 1
            elif text[j] == "}":
                braces -= 1
                if braces == 0:
                    break
            j += 1
        first = text.count("\n", 0, m.start()) + 1
        out.append((text.count("\n", 0, j) + 2 - first, first, m.group(1)))
    return out


def long_functions():
    """(lines, file, first line, name) of each function over FUNCTION_LIMIT in a crate's src/."""
    out = []
    for f in rust_files():
        rel = os.path.relpath(f, ROOT)
        parts = rel.split(os.sep)
        if "src" in parts[:-1] and parts[0] != "benches":
            with open(f, encoding="utf-8") as fh:
                out.extend((n, rel, line, name) for n, line, name in function_lengths(strip(fh.read())) if n > FUNCTION_LIMIT)
    return sorted(out, reverse=True)


def public_items(doc_dir):
    """The names `cargo doc` lists in `doc_dir/all.html` (a crate's every public item)."""
    with open(os.path.join(doc_dir, "all.html"), encoding="utf-8") as fh:
        return re.findall(r'<li><a href="[^"]+">([^<]+)</a></li>', fh.read())


def python_cycles():
    """Import circles between the Python package's modules (relative imports)."""
    pkg = os.path.join(ROOT, "python", "simdex")
    if not os.path.isdir(pkg):
        return []
    edges, nodes = {}, set()
    for top, dirs, files in os.walk(pkg):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(top, name)
            parts = os.path.relpath(path, os.path.dirname(pkg))[:-3].split(os.sep)
            is_pkg = parts[-1] == "__init__"
            mod = ".".join(parts[:-1] if is_pkg else parts)
            nodes.add(mod)
            here = mod.split(".") if is_pkg else mod.split(".")[:-1]
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for dots, name_, what in re.findall(r"^\s*from\s+(\.+)([\w.]*)\s+import\s+([\w, ()]+)", text, re.M):
                base = here[: len(here) - (len(dots) - 1)]
                target = ".".join(base + ([name_] if name_ else []))
                # from . import x: x is a submodule, or a name of the package itself
                names = [w.strip().split(" as ")[0].strip() for w in what.strip("() ").split(",") if w.strip()]
                edges.setdefault(mod, set()).update((target, tuple(names)) for _ in [0])
    resolved = {}
    for m, ts in edges.items():
        for target, names in ts:
            subs = [target + "." + n for n in names if target + "." + n in nodes]
            for t in subs or [target]:
                if t != m and t in nodes:
                    resolved.setdefault(m, set()).add(t)
    edges = resolved
    return cycles(nodes, edges)


def results_page_problems():
    """The results page over its length limit, or linking to a file that is not there."""
    page = os.path.join(ROOT, "benches", "RESULTS.md")
    if not os.path.exists(page):
        return []
    with open(page, encoding="utf-8") as fh:
        text = fh.read()
    out = []
    lines = text.count("\n")
    if lines > RESULTS_LIMIT:
        out.append(f"benches/RESULTS.md has {lines} lines (at most {RESULTS_LIMIT}: the capability tables; move the diary to benches/history/)")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        if not os.path.exists(os.path.join(os.path.dirname(page), target)):
            out.append(f"benches/RESULTS.md links to {target}, which does not exist")
    return out


README_LIMIT = 250
DOC_SUFFIXES = (".md", ".rs", ".py", ".sh", ".toml", ".txt", ".cfg")
# a path that names a Markdown file: `format-spec/DESIGN.md`, ../x/PAPER.md, README.md#anchor
MD_NAME = re.compile(r"(?<![\w./-])((?:\.\.?/)*[\w-]+(?:/[\w.-]+)*\.md)\b")


def doc_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            if f.endswith(DOC_SUFFIXES):
                yield os.path.join(top, f)


def docs_problems():
    """The README over its length limit; a Markdown link that leaves the repository or names a
    file that is not there; a Markdown file named anywhere that the repository does not hold
    (the project stands on its own: nothing it cites lives outside it)."""
    out = []
    readme = os.path.join(ROOT, "README.md")
    if os.path.exists(readme):
        with open(readme, encoding="utf-8") as fh:
            lines = fh.read().count("\n")
        if lines > README_LIMIT:
            out.append(f"README.md has {lines} lines (at most {README_LIMIT}: the guides live in python/README.md and format-spec/)")
    held = set()
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        held.update(f for f in files if f.endswith(".md"))
    for path in doc_files():
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(os.path.join("tools", "scripts")) and "check_shape" in rel.replace("-", "_"):
            continue  # this check and its self-test name files they make up
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if path.endswith(".md"):
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
                if "://" in target or target.startswith("mailto:"):
                    continue
                dest = os.path.normpath(os.path.join(os.path.dirname(path), target))
                if os.path.relpath(dest, ROOT).startswith(".."):
                    out.append(f"{rel} links to {target}, outside the repository")
                elif not os.path.exists(dest):
                    out.append(f"{rel} links to {target}, which does not exist")
        for name in MD_NAME.findall(text):
            if "://" in name:
                continue
            dest = os.path.normpath(os.path.join(os.path.dirname(path), name))
            if name.startswith("..") and os.path.relpath(dest, ROOT).startswith(".."):
                out.append(f"{rel} names {name}, outside the repository")
            elif os.path.basename(name) not in held:
                out.append(f"{rel} names {name}, which the repository does not hold")
    return out


def main():
    report = "--report" in sys.argv
    failed = False
    for msg in docs_problems():
        print(f"check-shape: {msg}")
        failed = True
    for msg in results_page_problems():
        print(f"check-shape: {msg}")
        failed = True
    for f, msg in api_problems():
        print(f"check-shape: {f}: {msg}")
        failed = True
    for comp in python_cycles():
        print("check-shape: import circle in the Python package: " + " <-> ".join(comp))
        failed = True
    sizes = []
    for f in rust_files():
        with open(f, encoding="utf-8") as fh:
            sizes.append((sum(1 for _ in fh), os.path.relpath(f, ROOT)))
    sizes.sort(reverse=True)
    for n, f in sizes:
        if n > LIMIT:
            print(f"check-shape: {f} has {n} lines (the house limit is {LIMIT}): split it by concept")
            failed = True
    for n, f, line, name in long_functions():
        print(f"check-shape: {f}:{line}: fn {name} has {n} lines (at most {FUNCTION_LIMIT} in src/): split it into named steps")
        failed = True
    if report:
        print("largest source files:")
        for n, f in sizes[:10]:
            print(f"  {n:5} {f}")
    if report:
        print("longest functions in the crates' src/:")
        every = []
        for f in rust_files():
            rel = os.path.relpath(f, ROOT)
            if "src" in rel.split(os.sep)[:-1]:
                with open(f, encoding="utf-8") as fh:
                    every.extend((n, rel, line, name) for n, line, name in function_lengths(strip(fh.read())))
        for n, f, line, name in sorted(every, reverse=True)[:10]:
            print(f"  {n:5} {f}:{line} {name}")
        for rel in LIBRARY_ROOTS:
            lib = os.path.join(ROOT, rel)
            if os.path.exists(lib):
                with open(lib, encoding="utf-8") as fh:
                    mods = re.findall(r"^pub mod (\w+);", strip(fh.read()), re.M)
                print(f"{rel}: {len(mods)} public modules ({', '.join(mods)})")
    if "--doc-items" in sys.argv:
        # after `cargo doc --no-deps -p simdex`: the index crate's public items, as rustdoc lists them
        doc = os.path.join(ROOT, "target", "doc")
        for crate, limit in (("simdex", MAX_PUBLIC_ITEMS), ("simdex_fingerprint", None)):
            if not os.path.exists(os.path.join(doc, crate, "all.html")):
                print(f"check-shape: --doc-items: {doc}/{crate}/all.html is missing (run cargo doc --no-deps -p simdex -p simdex-fingerprint first)")
                failed = True
                continue
            items = public_items(os.path.join(doc, crate))
            print(f"{crate}: {len(items)} public items (cargo doc's all.html)")
            if limit is not None and len(items) > limit:
                print(f"check-shape: {crate} has {len(items)} public items (at most {limit}): make the fronts' helpers theirs, fold variants into options")
                failed = True
    for root in crate_roots():
        crate = Crate(root)
        edges = crate_edges(crate)
        name = os.path.relpath(crate.root_dir, ROOT)
        for comp in cycles(crate.files.keys(), edges):
            files = [os.path.relpath(crate.files[m], ROOT) for m in comp]
            print(f"check-shape: import circle in {name}: " + " <-> ".join(files))
            for m in comp:
                inside = sorted(os.path.relpath(crate.files[t], ROOT) for t in edges.get(m, ()) if t in comp)
                print(f"    {os.path.relpath(crate.files[m], ROOT)} uses {', '.join(inside)}")
            failed = True
        if report:
            print(f"{name}: {len(crate.files)} modules, {sum(len(v) for v in edges.values())} edges")
    if not failed:
        print(f"check-shape: ok (no file over {LIMIT} lines, no function over {FUNCTION_LIMIT} in src/, no import circle, a narrow API, no rule restated in Python)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
