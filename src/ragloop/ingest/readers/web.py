"""Web pages by URL, and every page a sitemap lists, through trafilatura (Apache-2.0): it
downloads the page, keeps the main text (navigation, footers and boilerplate dropped) as
Markdown with its headings, and finds the page's title, author and date. The Markdown goes
through the Markdown reader, so headings become sections as in a file. A page's doc_id is
its URL without the scheme; its source is the URL.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument
from ragloop.ingest.metadata import clean_metadata
from ragloop.ingest.readers.markdown import parse_markdown

# A sitemap is read up to this many pages: a whole large site is a crawl, not an ingest.
MAX_SITEMAP_PAGES = 500


def is_url(text: str) -> bool:
    return urlsplit(str(text)).scheme in ("http", "https")


def url_doc_id(url: str) -> str:
    parts = urlsplit(url)
    path = parts.path.lstrip("/") or "index"
    return f"{parts.netloc}/{path}" + (f"?{parts.query}" if parts.query else "")


def _download(url: str) -> str:
    from trafilatura import fetch_url

    html = fetch_url(url)
    if not html:
        raise ReaderError("could not download the page (no answer, an error status, or not"
                          " text)")
    return html


def page_document(url: str, html: str) -> ParsedDocument:
    """The main text of one page as a document (ReaderError when it has none)."""
    from trafilatura import extract

    found = extract(html, url=url, output_format="json", include_formatting=True,
                    include_tables=True, include_comments=False, with_metadata=True,
                    favor_recall=True)
    data = json.loads(found) if found else {}
    # the JSON's `text` is the Markdown of the main content (include_formatting keeps the
    # headings as # lines); the metadata fields come beside it
    text = data.get("text") or ""
    if not text.strip():
        raise ReaderError("no main text found in the page")
    meta = clean_metadata({k: data.get(k) for k in ("title", "author", "date", "sitename",
                                                       "description")})
    meta.pop("description", None)
    title = meta.get("title") or url_doc_id(url)
    doc = parse_markdown(text, url_doc_id(url), url, fallback_title=title)
    if not doc.sections:
        raise ReaderError("no main text found in the page")
    return ParsedDocument(doc_id=doc.doc_id, title=meta.get("title") or doc.title,
                          source=url, sections=doc.sections, mime="text/html", metadata=meta)


def sitemap_urls(url: str) -> list[str]:
    """The page URLs a sitemap (or sitemap index) lists, in its order, at most
    MAX_SITEMAP_PAGES."""
    from trafilatura.sitemaps import sitemap_search

    return list(dict.fromkeys(sitemap_search(url)))[:MAX_SITEMAP_PAGES]


def is_sitemap(url: str) -> bool:
    path = urlsplit(url).path.lower()
    return path.endswith((".xml", ".xml.gz")) and "sitemap" in path.rsplit("/", 1)[-1]


def read_url(url: str) -> ParsedDocument:
    return page_document(url, _download(url))
