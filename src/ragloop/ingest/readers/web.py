"""Web pages by URL, and every page a sitemap lists: downloaded by ingest/fetch.py (bounded
in time and bytes, public addresses only unless allowed), then trafilatura (Apache-2.0)
keeps the main text (navigation, footers and boilerplate dropped) as
Markdown with its headings, and finds the page's title, author and date. The Markdown goes
through the Markdown reader, so headings become sections as in a file. A page's doc_id is
its URL without the scheme; its source is the URL.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit
from xml.etree import ElementTree

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument
from ragloop.ingest.fetch import PUBLIC, Reach, download
from ragloop.ingest.limits import ReadLimits
from ragloop.ingest.metadata import clean_metadata
from ragloop.ingest.readers.markdown import parse_markdown
from ragloop.ingest.readers.visibility import visible_html

# A sitemap is read up to this many pages: a whole large site is a crawl, not an ingest.
MAX_SITEMAP_PAGES = 500


def is_url(text: str) -> bool:
    return urlsplit(str(text)).scheme in ("http", "https")


def url_doc_id(url: str) -> str:
    parts = urlsplit(url)
    path = parts.path.lstrip("/") or "index"
    return f"{parts.netloc}/{path}" + (f"?{parts.query}" if parts.query else "")


def _download(url: str, reach: Reach, limits: ReadLimits | None) -> str:
    """The page's text, downloaded by ingest/fetch.py (one deadline, a bytes cap, the
    addresses `reach` allows) and decoded by trafilatura (a gzip body, the charset)."""
    from trafilatura.settings import DEFAULT_CONFIG
    from trafilatura.utils import decode_file

    limits = limits or ReadLimits()
    # no more than trafilatura's own cap (MAX_FILE_SIZE, 20 MB), the most it extracts from
    most = min(limits.max_bytes, DEFAULT_CONFIG.getint("DEFAULT", "MAX_FILE_SIZE"))
    limits = replace(limits, max_bytes=most)
    html = decode_file(download(url, reach, limits), most)
    if not html.strip():
        raise ReaderError("could not download the page (an empty answer)")
    return html


def page_document(url: str, html: str) -> ParsedDocument:
    """The main text of one page as a document (ReaderError when it has none)."""
    from trafilatura import extract, extract_metadata

    html = visible_html(html)  # trafilatura keeps display:none text (issue 39)
    text = extract(html, url=url, output_format="markdown", include_formatting=True,
                   include_tables=True, include_comments=False, favor_recall=True) or ""
    if not text.strip():
        raise ReaderError("no main text found in the page")
    found = extract_metadata(html, default_url=url)
    meta = clean_metadata({k: getattr(found, k, None) for k in ("title", "author", "date",
                                                                "sitename")})
    title = meta.get("title") or url_doc_id(url)
    doc = parse_markdown(text, url_doc_id(url), url, fallback_title=title)
    if not doc.sections:
        raise ReaderError("no main text found in the page")
    return ParsedDocument(doc_id=doc.doc_id, title=meta.get("title") or doc.title,
                          source=url, sections=doc.sections, mime="text/html", metadata=meta)


def sitemap_urls(url: str, reach: Reach = PUBLIC, limits: ReadLimits | None = None,
                 depth: int = 0) -> list[str]:
    """The page URLs a sitemap (or a sitemap index, two levels at most) lists, in its order,
    at most MAX_SITEMAP_PAGES. Parsed here rather than by trafilatura's sitemap_search,
    which drops any host without a public domain name (an intranet's `http://wiki/`)."""
    try:
        root = ElementTree.fromstring(_download(url, reach, limits).encode("utf-8"))
    except ElementTree.ParseError as exc:
        raise ReaderError(f"not a sitemap ({exc})") from exc
    pages: list[str] = []
    for loc in root.iter():
        if not loc.tag.endswith("loc") or not (loc.text or "").strip():
            continue
        found = loc.text.strip()
        if root.tag.endswith("sitemapindex"):
            if depth < 1:
                pages += sitemap_urls(found, reach, limits, depth + 1)
        elif is_url(found):
            pages.append(found)
        if len(pages) >= MAX_SITEMAP_PAGES:
            break
    return list(dict.fromkeys(pages))[:MAX_SITEMAP_PAGES]


def is_sitemap(url: str) -> bool:
    path = urlsplit(url).path.lower()
    return path.endswith((".xml", ".xml.gz")) and "sitemap" in path.rsplit("/", 1)[-1]


def read_url(url: str, reach: Reach = PUBLIC, limits: ReadLimits | None = None
             ) -> ParsedDocument:
    """`reach`: the private or link-local addresses allowed (none by default: public ones
    only); `limits`: the download's deadline and bytes cap (ingest/limits.py)."""
    return page_document(url, _download(url, reach, limits))
