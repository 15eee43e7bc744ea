"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

1. ``- __all__`` in the ``members:`` list of a ``::: module`` block of an API page stands for
   that module's ``__all__`` (read from the checkout) without the modules and names it imports
   from outside amqstomp (``re``, ``socket``...: stomp.py's star imports hand them out, so
   amqstomp's do too, but they are not amqstomp's API), so a module's reference lists exactly
   its public names and never drifts from the code. ``expand_members`` is also what
   ``scripts/api_internals.py`` reads the pages with.
2. The docstrings use Sphinx roles (``:class:`Frame```, ``:meth:`~Session.commit```), which
   Markdown renders as the role's name followed by code: each becomes the code alone (with
   ``~``, its last dotted part), as Sphinx shows it.
3. The benchmark charts and results live in ``bench/results/`` (written by ``bench/gate.py`` and
   ``bench/charts.py``), outside ``docs/``: each ``bench/results/*.png`` and ``*.json`` is added to
   the site as ``benchmarks/results/<name>``, so docs/benchmarks.md shows them without a second
   copy in the repository, and a chart that is missing is a broken link (a warning: the strict
   build fails). The pages link them where they are in the repository
   (``../bench/results/<name>`` from docs/benchmarks.md: right in the repository view, checked by
   tests/test_docs_links.py); :func:`site_links` points those links at the site's copy.
"""
import glob
import ast
import os
import re
from typing import Any, List, Set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
SITE_FOLDER = "benchmarks/results"

_ROLE = re.compile(r":(?:class|meth|func|data|attr|mod|exc|obj|const):<code>(~?)([^<]*)</code>")
_DIRECTIVE = re.compile(r"^::: *(?P<path>[\w.]+) *$")
_ALL_ITEM = re.compile(r"^(?P<indent> +)- __all__ *$")


def foreign_imports(tree: ast.Module) -> Set[str]:
    """The names a module's top level binds by importing from outside amqstomp
    (``import re``, ``from time import monotonic``; not ``from .x import y``)."""
    names: Set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names
                         if a.name.split(".")[0] != "amqstomp")
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.split(".")[0] != "amqstomp":
            names.update(a.asname or a.name for a in node.names)
    return names


def module_exports(path: str, api_only: bool = False) -> List[str]:
    """``__all__`` of the module ``path`` as the checkout's source defines it (read with
    ``ast``, not imported: ``amqstomp.testing.pytest_plugin`` needs pytest, the compiled modules
    a build): a literal list or tuple, or ``from .other import __all__``. ``api_only``: without
    the names it imports from outside amqstomp (:func:`foreign_imports`).

    Raises:
        ValueError: no such module, or it has no ``__all__`` of that shape.
    """
    base = os.path.join(ROOT, *path.split("."))
    source = base + ".py" if os.path.isfile(base + ".py") else os.path.join(base, "__init__.py")
    if not os.path.isfile(source):
        raise ValueError("no module %s in %s" % (path, ROOT))
    with open(source, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), source)
    package = path if source.endswith("__init__.py") else path.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                names = [str(name) for name in ast.literal_eval(node.value)]
                foreign = foreign_imports(tree) if api_only else set()
                return [name for name in names if name not in foreign]
        elif isinstance(node, ast.ImportFrom) and any(alias.name == "__all__" for alias in node.names):
            parent = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            return module_exports(".".join(parent + ([node.module] if node.module else [])), api_only)
    raise ValueError("%s has no __all__: list its members on the page" % path)


def expand_members(markdown: str) -> str:
    """The page with each ``- __all__`` item under a ``::: module`` block replaced by that
    module's ``__all__`` names (one ``- name`` item each, at the same indent)."""
    out: List[str] = []
    current = None
    for line in markdown.splitlines():
        directive = _DIRECTIVE.match(line)
        if directive:
            current = directive.group("path")
        elif line and not line.startswith(" "):
            current = None
        item = _ALL_ITEM.match(line)
        if item and current:
            out.extend('%s- "%s"' % (item.group("indent"), name) for name in module_exports(current, api_only=True))
        else:
            out.append(line)
    return "\n".join(out) + ("\n" if markdown.endswith("\n") else "")


_RESULTS_LINK = re.compile(r"(\]\(\s*<?)((?:\.\./)+bench/results/)([^)\s>#]+)")


def site_links(markdown: str, src_uri: str) -> str:
    """The page ``src_uri`` (relative to docs/) with each link into ``bench/results/`` (relative
    to the page's file, as the repository shows it) pointed at the site's copy of that file
    (``benchmarks/results/<name>``, relative to the page)."""
    page_dir = os.path.dirname(src_uri)

    def repl(match: "re.Match[str]") -> str:
        target = os.path.normpath(os.path.join(ROOT, "docs", page_dir, match.group(2), match.group(3)))
        if os.path.dirname(target) != RESULTS:
            return match.group(0)
        site = os.path.relpath(os.path.join(SITE_FOLDER, os.path.basename(target)), page_dir or ".")
        return match.group(1) + site.replace(os.sep, "/")

    return _RESULTS_LINK.sub(repl, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "bench/results/" in markdown:
        markdown = site_links(markdown, page.file.src_uri)
    return expand_members(markdown) if "- __all__" in markdown else markdown


def strip_roles(html: str) -> str:
    """``:meth:<code>~a.b.c</code>`` (a Sphinx role as Markdown renders it) -> ``<code>c</code>``."""
    return _ROLE.sub(lambda m: "<code>%s</code>" % (m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)),
                     html)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return strip_roles(html) if ":<code>" in html else html


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path in sorted(glob.glob(os.path.join(RESULTS, "*.png")) + glob.glob(os.path.join(RESULTS, "*.json"))):
        files.append(File.generated(config, "%s/%s" % (SITE_FOLDER, os.path.basename(path)), abs_src_path=path))
    return files
