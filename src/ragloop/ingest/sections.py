"""The one section-id rule shared by the markdown, HTML, PDF-outline and text readers.

Input: the text before the first heading (preamble) and a list of (level, heading, body).

- A heading that starts with an explicit number ("4.2 Approval thresholds", "4.2. X",
  "Section 4.2 – X", "§ 3 Y") gets that number as its id ("4.2").
- Otherwise the id is positional in the heading tree: the parent's id plus the heading's
  1-based index among its siblings ("1", "1.1", "2", ...); under an explicitly numbered parent
  "4" an unnumbered child becomes "4.<index>". After an explicit "2 X" among its siblings, an
  unnumbered sibling continues the count ("3").
- The title heading (the first heading, when it is the only one at the top level) and any text
  before the first heading are section "0". Headings below it start at "1".
- Duplicate ids get a suffix: "4.2", "4.2-2", "4.2-3".
- title_path runs from the document title down to the heading. A section with no body is
  dropped; its title still appears in its children's title_path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ragloop.core.types import SectionText

# "4.2 X", "4.2. X", "4.2) X", "Section 4.2 – X", "§4 X", "Chapter 3: X", a bare "4.2".
# The first number has at most three digits so "2024 Annual Report" is not section 2024.
_NUMBERED = re.compile(
    r"^\s*(?:(?:section|sect\.|sec\.|chapter|part|clause|§)\s*)?"
    r"(\d{1,3}(?:\.\d{1,3})*)"
    r"(?:\.(?!\d)|\))?"
    r"(?=\s|$|[:–—-])",
    re.IGNORECASE,
)
_BLANKS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


def explicit_number(heading: str) -> str | None:
    """The explicit section number a heading starts with ("4.2"), or None."""
    m = _NUMBERED.match(heading)
    return m.group(1) if m else None


def clean_text(text: str) -> str:
    """Strip trailing spaces on lines, collapse runs of blank lines, strip the ends."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def clean_heading(text: str) -> str:
    return " ".join(text.split())


@dataclass
class _Node:
    level: int
    heading: str
    body: str
    sid: str = ""
    path: tuple[str, ...] = ()
    children: int = 0
    kids: list[_Node] = field(default_factory=list)


def build_sections(
    headings: Sequence[tuple[int, str, str]],
    preamble: str = "",
    title: str = "",
    text_title: str = "",
) -> tuple[str, list[SectionText]]:
    """(document title, sections) from a preamble and (level, heading, body) triples.

    `title` is the document title to use when the headings do not supply one (no single
    top-level title heading); it heads every title_path. Returns the title actually used.
    `text_title` is a title the document itself states (an HTML <title>, a front-matter
    title), as opposed to one made from its file name.

    A document whose only words are headings or a stated title (a one-line note, a page
    of just a <title>) gets them as the text of section "0": a short document is still
    searchable, and a heading is the one place its words are.
    """
    nodes = [_Node(level, clean_heading(h), clean_text(b)) for level, h, b in headings]
    nodes = [n for n in nodes if n.heading or n.body]
    headings_only = [clean_heading(text_title)] + [n.heading for n in nodes]
    preamble = clean_text(preamble)

    title_node: _Node | None = None
    if nodes:
        top = min(n.level for n in nodes)
        if nodes[0].level == top and sum(1 for n in nodes if n.level == top) == 1:
            title_node = nodes[0]
            nodes = nodes[1:]
    doc_title = title_node.heading if title_node and title_node.heading else clean_heading(title)
    root_path: tuple[str, ...] = (doc_title,) if doc_title else ()

    sections: list[SectionText] = []
    used: dict[str, int] = {}

    def add(sid: str, path: tuple[str, ...], text: str) -> None:
        if not text:
            return
        n = used.get(sid, 0) + 1
        used[sid] = n
        sections.append(SectionText(sid if n == 1 else f"{sid}-{n}", path, text))

    zero = "\n\n".join(t for t in (preamble, title_node.body if title_node else "") if t)
    add("0", root_path, zero)

    root = _Node(level=-1, heading="", body="", sid="", path=root_path)
    stack: list[_Node] = [root]
    for node in nodes:
        while len(stack) > 1 and stack[-1].level >= node.level:
            stack.pop()
        parent = stack[-1]
        parent.children += 1
        number = explicit_number(node.heading)
        if number is not None:
            node.sid = number
            head, _, last = number.rpartition(".")
            if head == parent.sid and int(last) >= parent.children:
                parent.children = int(last)  # "2 X" then "Y": Y is 3, not a second 2
        elif parent.sid:
            node.sid = f"{parent.sid}.{parent.children}"
        else:
            node.sid = str(parent.children)
        node.path = (*parent.path, node.heading) if node.heading else parent.path
        stack.append(node)
        add(node.sid, node.path, node.body)
    if not sections:
        add("0", root_path, "\n".join(dict.fromkeys(h for h in headings_only if h)))
    return doc_title, sections
