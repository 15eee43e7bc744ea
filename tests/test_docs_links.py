"""Every relative link and image in docs/**/*.md resolves in the repository view
(GitHub, an editor: relative to the page's own file), not only in the built
mkdocs site (scripts/docs_hooks.py maps bench/results into the site; the strict
mkdocs build checks the site's side). docs/benchmarks.md's charts used to point at
``benchmarks/results/...``, which exists only in the site."""
import glob
import os
import re

import pytest

pytestmark = pytest.mark.timeout(30)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
#: [text](target) and ![alt](target), a target without spaces, an optional "title"
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML = re.compile(r"""<(?:img|a|source)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)


def relative_targets(text):
    """The relative link/image targets of a Markdown page (outside code), without #fragments."""
    text = _CODE.sub("", _FENCE.sub("", text))
    for target in _LINK.findall(text) + _HTML.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")):
            continue  # http:, mailto:, an anchor of the page itself, a site-absolute path
        path = target.split("#", 1)[0].split("?", 1)[0]
        if path:
            yield path


def _pages():
    return sorted(glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True))


def test_the_checker_sees_links_images_and_skips_code():
    text = ("[a](x.md) ![b](img/c.png \"t\") [d](https://e) [f](#g) `[h](no.md)`\n"
            "```\n[i](no2.md)\n```\n<img src=\"j.png\"> [k](l.md#m)\n")
    assert list(relative_targets(text)) == ["x.md", "img/c.png", "l.md", "j.png"]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: os.path.relpath(p, DOCS))
def test_every_relative_link_of_a_docs_page_exists_relative_to_it(page):
    with open(page, encoding="utf-8") as fh:
        text = fh.read()
    missing = sorted({target for target in relative_targets(text)
                      if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(page), target)))})
    assert missing == [], "%s links to what is not there in the repository: %s" % (
        os.path.relpath(page, ROOT), missing)
