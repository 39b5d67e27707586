"""mkdocs hooks for the documentation site (mkdocs.yml): the README is its index, and every link
into the repository is resolved offline.

The README is also the package's description on PyPI, where a link relative to the repository
leads nowhere, so its links are absolute GitHub addresses; the pages in docs/ link relatively,
which works on GitHub at any commit. On the site, a link of either kind to a page of the site
becomes a link between pages, so that ``mkdocs build --strict`` checks the page and its anchor; a
link to any other file of the repository becomes its GitHub address; and a link to a path that
does not exist is a warning, which fails the strict build. External addresses are left alone:
checking them needs the network, which CI does not have.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

REPOSITORY = "https://github.com/dra-operators/dra-operators"
ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
INDEX = "index.md"

# mkdocs counts the warnings of loggers under "mkdocs" towards --strict.
log = logging.getLogger("mkdocs.hooks.docs_hooks")

# Inline links and images, outside code: the text is the Markdown source, so a fenced block's
# contents are skipped by matching the fences first.
_LINK_OR_FENCE = re.compile(
    r"^[ \t]*(?P<fence>```|~~~).*?^[ \t]*(?P=fence)[ \t]*$|(?P<open>\]\()(?P<target>[^)\s]+)\)", re.M | re.S
)
_ON_GITHUB = re.compile(re.escape(REPOSITORY) + r"/(?:blob|tree)/main/(?P<path>[^#]*)(?P<anchor>#.*)?$")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, INDEX, abs_src_path=str(ROOT / "README.md")))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    source = ROOT / "README.md" if page.file.src_uri == INDEX else DOCS / page.file.src_uri
    return rewrite_links(markdown, source, page.file.src_uri)


def rewrite_links(markdown: str, source: Path, page: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match["fence"]:
            return match[0]
        return f"{match['open']}{_resolve(match['target'], source, page)})"

    return _LINK_OR_FENCE.sub(replace, markdown)


def _resolve(target: str, source: Path, page: str) -> str:
    """The link ``target`` of ``page`` (whose Markdown is the file ``source``) as the site needs it."""
    on_github = _ON_GITHUB.match(target)
    if on_github:
        path, anchor = on_github["path"].rstrip("/"), on_github["anchor"] or ""
    elif "://" in target or target.startswith(("#", "mailto:")):
        return target
    else:
        relative, _, fragment = target.partition("#")
        anchor = f"#{fragment}" if fragment else ""
        resolved = (source.parent / relative).resolve()
        if not resolved.is_relative_to(ROOT):
            log.warning("%s: the link %s leaves the repository", page, target)
            return target
        path = resolved.relative_to(ROOT).as_posix()
        if resolved.is_file() and resolved.is_relative_to(DOCS):
            return target  # a page or a file of the site: mkdocs checks it
    full = ROOT / path
    if not full.exists():
        log.warning("%s: the link %s names %s, which is not in the repository", page, target, path)
        return target
    if path == "README.md":
        return _between_pages(page, INDEX) + anchor
    if path.startswith("docs/") and path.endswith(".md"):
        return _between_pages(page, path.removeprefix("docs/")) + anchor
    kind = "tree" if full.is_dir() else "blob"
    return f"{REPOSITORY}/{kind}/main/{path}{anchor}"


def _between_pages(page: str, target: str) -> str:
    return posixpath.relpath(target, posixpath.dirname(page) or ".")
