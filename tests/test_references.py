"""Every name the documentation gives to code names something that exists.

Docstrings and comments under ``ckqti/``, ``indexer/``, ``retriever/`` and ``scripts/`` name code
Sphinx-style (``:func:`fit_stage```, ``:class:`~ckqti.vocab.Vocabulary```, ``:meth:`Index.close```,
``:mod:`retriever.scan```) or as a backticked dotted path (```retriever.results.TopK```); README.md
and docs/*.md name it as a backticked dotted path, a file path (```retriever/search.py```,
```retriever/kernel_and.py::and_segment```) or a link. When code moves to another module these can be
left naming nothing. A target resolves, as Sphinx would look it up:

- a dotted path from a package, module or attribute (a leading ``~`` or ``.`` stripped);
- a bare name or ``Class.attr`` in the classes around the docstring or comment, then in the
  module's own globals (names imported only under ``TYPE_CHECKING`` included, read from the
  source), then in builtins;
- an attribute of a class counts when the class has it: a method, property or class variable,
  a field (annotations, ``__dataclass_fields__``, ``__slots__``) or an attribute its methods set
  on ``self``.

A link's ``#anchor`` (to a Markdown file, or ``#anchor`` alone for the file's own) must be one of the
file's headings as GitHub slugs them, or an ``<a id=...>``. ``:mod:`` must name a module. Every module is imported once (about 2 s). Run
``python -m tests.test_references`` to print what is checked and what is broken.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ckqti", "indexer", "retriever", "scripts")
DOCS = ("README.md", "docs/*.md")
SKIP_SOURCES: set[str] = set()  # sources left out (none: every module is checked)

# References meant not to resolve, keyed by (file, target as written), each with its reason
ALLOWED: dict[tuple[str, str], str] = {}

ROLE = re.compile(r":(?:py:)?(func|class|meth|mod|data|attr|exc|obj|const|type):`([^`]+)`")
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
DOTTED = re.compile(r"(?<![\w./-])((?:ckqti|indexer|retriever|scripts)(?:\.[A-Za-z_]\w*)+)")
PATH = re.compile(r"(?<![\w./~$-])((?:ckqti|indexer|retriever|scripts|tests|docs)/[\w./*-]*)(?:::(\w+))?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
NOT_A_NAME = object()


@dataclass(frozen=True)
class Reference:
    file: str  # relative to the repository root
    line: int
    kind: str  # a Sphinx role, "name" (a backticked dotted path), "path" or "link"
    target: str  # as written

    def __str__(self) -> str:
        shown = f":{self.kind}:`{self.target}`" if self.kind not in ("name", "path", "link") else f"`{self.target}`"
        return f"{self.file}:{self.line}: {shown}"


# --- Finding references --------------------------------------------------------------------------


def source_files() -> list[Path]:
    files = sorted(f for p in PACKAGES for f in (ROOT / p).rglob("*.py"))
    return [f for f in files if f.relative_to(ROOT).as_posix() not in SKIP_SOURCES]


def doc_files() -> list[Path]:
    return sorted(f for pattern in DOCS for f in ROOT.glob(pattern))


def text_pieces(path: Path) -> list[tuple[int, str]]:
    """The strings and comments of a Python file, each with the line it starts on."""
    pieces = []
    with open(path, "rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in (tokenize.STRING, tokenize.COMMENT) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                pieces.append((tok.start[0], tok.string))
    return pieces


def source_references(path: Path) -> list[Reference]:
    rel = path.relative_to(ROOT).as_posix()
    found = []
    for start, text in text_pieces(path):
        def line(offset: int, start: int = start, text: str = text) -> int:
            return start + text.count("\n", 0, offset)

        roles = [(m.start(), m.end()) for m in ROLE.finditer(text)]
        for m in ROLE.finditer(text):
            found.append(Reference(rel, line(m.start()), m.group(1), m.group(2)))
        for m in SPAN.finditer(text):
            if any(a <= m.start() < b for a, b in roles):
                continue  # a role's own backticks
            found += span_references(rel, line(m.start()), m.group(2))
    return found


def span_references(rel: str, line: int, span: str) -> list[Reference]:
    """The dotted names and file paths in one backticked span."""
    found = [Reference(rel, line, "name", m.group(1)) for m in DOTTED.finditer(span)]
    for m in PATH.finditer(span):
        target = m.group(1).rstrip(".,:;")
        if m.group(2):
            target += "::" + m.group(2)
        found.append(Reference(rel, line, "path", target))
    return found


def doc_references(path: Path) -> list[Reference]:
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text()

    def line(offset: int) -> int:
        return 1 + text.count("\n", 0, offset)

    found = []
    fences = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    for a, b in fences:  # commands in code blocks name scripts and files too
        found += span_references(rel, line(a), text[a:b].split("\n", 1)[1])
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for m in SPAN.finditer(prose):
        if "\n\n" not in m.group(2):
            found += span_references(rel, line(m.start()), m.group(2))
    for m in LINK.finditer(prose):
        target = m.group(1)
        if not re.match(r"[a-z]+:", target):  # a web address is not checked; "#anchor" is this file's heading
            found.append(Reference(rel, line(m.start()), "link", target))
    return found


# --- Resolving them ------------------------------------------------------------------------------


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class Sources:
    """What the AST says that importing does not: names imported under ``TYPE_CHECKING``, the
    attributes methods set on ``self``, and which classes enclose each line."""

    def __init__(self):
        self.trees: dict[str, ast.Module] = {}
        self.paths: dict[str, Path] = {}

    def tree(self, module: str) -> ast.Module | None:
        if module not in self.trees:
            path = ROOT / Path(*module.split("."))
            path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
            self.trees[module] = ast.parse(path.read_text(), str(path)) if path.is_file() else None
        return self.trees[module]

    def type_checking_names(self, module: str) -> dict[str, tuple[str, str | None]]:
        """``name -> (module, attribute or None)`` for imports under ``if TYPE_CHECKING:``."""
        tree, names = self.tree(module), {}
        package = module if (ROOT / Path(*module.split("."))).is_dir() else module.rpartition(".")[0]
        for node in tree.body if tree else []:
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                for imp in node.body:
                    if isinstance(imp, ast.Import):  # `import a.b` binds a; `import a.b as c` binds c to a.b
                        for a in imp.names:
                            bound = a.name if a.asname else a.name.split(".")[0]
                            names[a.asname or bound] = (bound, None)
                    elif isinstance(imp, ast.ImportFrom):
                        base = imp.module or ""
                        if imp.level:  # from . import x, from ..pkg import x
                            up = package.split(".")[:len(package.split(".")) - imp.level + 1]
                            base = ".".join(up + ([base] if base else []))
                        for a in imp.names:
                            names[a.asname or a.name] = (base, a.name)
        return names

    def class_node(self, cls: type) -> ast.ClassDef | None:
        tree = self.tree(cls.__module__) if cls.__module__.split(".")[0] in PACKAGES else None
        node: ast.AST | None = tree
        for part in cls.__qualname__.split("."):
            node = next((n for n in getattr(node, "body", []) if isinstance(n, ast.ClassDef) and n.name == part), None)
        return node

    def self_attributes(self, cls: type) -> set[str]:
        node = self.class_node(cls)
        names = set()
        for fn in (n for n in (node.body if node else []) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for sub in ast.walk(fn):
                targets = sub.targets if isinstance(sub, ast.Assign) else [getattr(sub, "target", None)]
                for t in targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        names.add(t.attr)
        return names

    def enclosing_classes(self, module: str, line: int) -> list[str]:
        """The qualified names of the classes around a line, innermost first."""
        found = []

        def visit(body, prefix):
            for n in body:
                if isinstance(n, ast.ClassDef) and n.lineno <= line <= n.end_lineno:
                    found.insert(0, prefix + n.name)
                    visit(n.body, prefix + n.name + ".")
        tree = self.tree(module)
        visit(tree.body if tree else [], "")
        return found


SOURCES = Sources()


def attribute(obj, name: str):
    """``obj.name``, counting a class's fields and ``self`` attributes; NOT_A_NAME when absent."""
    try:
        return getattr(obj, name)
    except AttributeError:
        pass
    except Exception:  # a property or descriptor that fails on the class itself: it exists
        return NOT_A_NAME if name not in dir(obj) else object()
    if isinstance(obj, type(sys)):
        try:
            return importlib.import_module(f"{obj.__name__}.{name}")
        except ImportError:
            pass
        hidden = SOURCES.type_checking_names(obj.__name__).get(name) if obj.__name__.split(".")[0] in PACKAGES else None
        if hidden:
            found = importlib.import_module(hidden[0])
            return found if hidden[1] is None else attribute(found, hidden[1])
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if (name in vars(klass).get("__annotations__", {}) or name in getattr(klass, "__dataclass_fields__", {})
                    or name in (vars(klass).get("__slots__") or ()) or name in SOURCES.self_attributes(klass)):
                return object()  # a field or instance attribute: exists, nothing to look into
    return NOT_A_NAME


def walk(obj, parts: list[str]):
    for part in parts:
        obj = attribute(obj, part)
        if obj is NOT_A_NAME:
            break
    return obj


def absolute(dotted: str):
    """The object a fully dotted path names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        if n < len(parts) and not hasattr(module, "__path__"):
            # a module names what it defines, not what it imports: `retriever.search.TopK` names
            # nothing once TopK lives in retriever.results (a package may re-export, as its API)
            first = attribute(module, parts[n])
            home = getattr(first, "__module__", None) if callable(first) else None
            if home and home.split(".")[0] in PACKAGES and home != module.__name__:
                return NOT_A_NAME
        return walk(module, parts[n:])
    return NOT_A_NAME


def resolve(ref: Reference):
    target = ref.target.strip()
    if ref.kind in ROLE_KINDS and "<" in target and target.endswith(">"):
        target = target[target.rindex("<") + 1:-1]  # :func:`title <target>`
    target = target.lstrip("~!.").removesuffix("()")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", target):
        return NOT_A_NAME
    found = absolute(target) if "." in target or ref.kind == "mod" else NOT_A_NAME
    if found is NOT_A_NAME and ref.kind in ROLE_KINDS:
        module = importlib.import_module(module_name(ROOT / ref.file))
        scopes = [walk(module, qualname.split(".")) for qualname in SOURCES.enclosing_classes(module.__name__, ref.line)]
        scopes += [module, builtins]
        for scope in scopes:
            found = walk(scope, target.split("."))
            if found is not NOT_A_NAME:
                break
    if ref.kind == "mod" and not isinstance(found, type(sys)):
        return NOT_A_NAME
    return found


ROLE_KINDS = {"func", "class", "meth", "mod", "data", "attr", "exc", "obj", "const", "type"}


HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file: each heading's slug (its text lower-cased, markup and punctuation
    but ``-`` and ``_`` dropped, spaces made ``-``; a repeated slug gets ``-1``, ``-2``, ...) and ``<a id=...>``."""
    text = path.read_text()
    found: set[str] = set(HTML_ANCHOR.findall(text))
    counts: dict[str, int] = {}
    for m in HEADING.finditer(FENCE.sub("", text)):
        shown = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link's text
        slug = re.sub(r"[^\w\- ]", "", shown.replace("`", "").lower()).replace(" ", "-")
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def path_exists(ref: Reference) -> bool:
    if ref.kind == "link":
        target, _, anchor = ref.target.partition("#")
        file = (ROOT / ref.file).parent / target if target else ROOT / ref.file
        if not file.exists():
            return False
        return not anchor or file.suffix != ".md" or anchor in anchors(file)
    path, _, name = ref.target.partition("::")
    matches = list(ROOT.glob(path)) if "*" in path else [ROOT / path] if (ROOT / path).exists() else []
    if not matches:
        return False
    if name:  # file.py::name: a function, class or variable the file defines
        tree = ast.parse(matches[0].read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        defined |= {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
        return name in defined
    return True


def check() -> tuple[list[Reference], list[Reference]]:
    """All references found, and those that name nothing (allowed ones left out)."""
    refs = [r for f in source_files() for r in source_references(f)]
    refs += [r for f in doc_files() for r in doc_references(f)]
    broken = []
    for ref in refs:
        ok = path_exists(ref) if ref.kind in ("path", "link") else resolve(ref) is not NOT_A_NAME
        if not ok and (ref.file, ref.target) not in ALLOWED:
            broken.append(ref)
    return refs, broken


def homes(target: str) -> list[str]:
    """Where the packages define a function, class or method of this name (for the message)."""
    parts = target.lstrip("~!.").removesuffix("()").split(".")
    name = parts[-1]
    wanted = ".".join(parts[-2:]) if len(parts) > 1 and parts[-2][:1].isupper() else name  # Class.attr
    found = []
    for path in source_files():
        module = module_name(path)

        def visit(body, prefix, module=module):
            for n in body:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if n.name == name and f"{prefix}{n.name}".endswith(wanted):
                        found.append(f"{module}.{prefix}{n.name}")
                    if isinstance(n, ast.ClassDef):
                        visit(n.body, f"{prefix}{n.name}.")
        visit(SOURCES.tree(module).body, "")
    return found


# --- Tests ---------------------------------------------------------------------------------------


def test_every_reference_names_something():
    refs, broken = check()
    assert len(refs) > 1000  # the scan saw the packages and the docs (not an empty glob)
    assert {r.kind for r in refs} >= {"func", "class", "meth", "mod", "data", "attr", "name", "path", "link"}
    assert broken == [], f"{len(broken)} references name nothing:\n" + "\n".join(
        f"{r}" + (f" (defined in: {', '.join(homes(r.target))})" if r.kind not in ("path", "link") and homes(r.target) else "")
        for r in broken)
    seen = {(r.file, r.target): r for r in refs}
    stale = [key for key in ALLOWED if key not in seen or resolves(seen[key])]
    assert stale == [], "allowed references gone or resolved now: drop them from ALLOWED"


def resolves(ref: Reference) -> bool:
    return path_exists(ref) if ref.kind in ("path", "link") else resolve(ref) is not NOT_A_NAME


def test_the_checker_tells_broken_from_resolved():
    def ref(kind, target, file="retriever/search.py", line=1):
        return Reference(file, line, kind, target)

    searcher_line = ast.parse((ROOT / "retriever/search.py").read_text()).body
    searcher_line = next(n.lineno for n in searcher_line if isinstance(n, ast.ClassDef) and n.name == "Searcher") + 1
    ok = [ref("class", "~retriever.results.TopK"), ref("mod", "retriever.scan"), ref("func", "len"),
          ref("class", "TopK"),  # imported into the module's namespace
          ref("meth", "Searcher.search"), ref("attr", "Searcher.index"),  # set on self in __init__
          ref("meth", "search", line=searcher_line),  # a method of the class around the docstring
          ref("class", "Explanation", file="ckqti/api.py"),  # imported under TYPE_CHECKING only
          ref("attr", "ckqti.train.ndrm_config.TrainConfig.teacher"),  # a dataclass field
          ref("func", "title <retriever.scan.scan_topk>"), ref("name", "ckqti.api.run"),
          ref("path", "retriever/kernel_saat.py"), ref("path", "retriever/kernel_and.py::and_segment"),
          ref("link", "INDEX.md", file="docs/CLI.md"), ref("link", "INDEX.md#build-threads", file="docs/CLI.md"),
          ref("link", "#search-speed", file="README.md"), ref("link", "docs/INDEX.md#quantization", file="README.md")]
    bad = [ref("class", "retriever.results.NoSuchThing"), ref("mod", "ckqti.api.run"), ref("func", "no_such_function"),
           ref("meth", "search"),  # outside the class: not in the module's namespace
           ref("class", "retriever.search.TopK"),  # imported there, defined in retriever.results
           ref("attr", "Searcher.no_such_attribute"), ref("name", "retriever.search.NoSuch"),
           ref("path", "retriever/no_such.py"), ref("path", "retriever/kernel_and.py::no_such_kernel"),
           ref("link", "docs/INDEX.md", file="docs/CLI.md"), ref("link", "INDEX.md#no-such-heading", file="docs/CLI.md"),
           ref("link", "#search-speeds", file="README.md")]
    assert [r for r in ok if not resolves(r)] == []
    assert [r for r in bad if resolves(r)] == []


if __name__ == "__main__":
    refs, broken = check()
    print(f"{len(refs)} references checked ({len(set((r.kind, r.target) for r in refs))} distinct), {len(broken)} broken")
    for ref in broken:
        print(ref, homes(ref.target) if ref.kind not in ("path", "link") else "")
