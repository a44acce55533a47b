"""What a reader of the file cannot see, and whether it is read (RAGLOOP_HIDDEN_TEXT).

"drop" (the default): text a person viewing the file would not see is not indexed, so it
cannot reach an answer (issue 39: a `display:none` paragraph carried a prompt injection).
"keep": every text is read, as before. The HTML reader drops hidden elements (hidden_html),
the Word reader hidden runs (`w:vanish`), the PDF reader invisible text (render mode 3).

The mode reaches the readers through a context variable that `read_file` (and the ingest of
web pages) sets, so the Reader protocol stays `read(path, doc_id)`; a reader called on its
own drops hidden text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ragloop.core.config import env_setting

_MODE: ContextVar[str] = ContextVar("ragloop_hidden_text", default="drop")


@contextmanager
def hidden_text(mode: str | None) -> Iterator[None]:
    """Readers inside this block drop (or keep) hidden text; None: leave the mode as it is."""
    if mode is None:
        yield
        return
    # checked by the settings model (a caller of read_file may pass any text)
    token = _MODE.set(env_setting("hidden_text", mode))
    try:
        yield
    finally:
        _MODE.reset(token)


def drop_hidden() -> bool:
    return _MODE.get() == "drop"


# --- CSS: the declarations that make an element invisible -----------------------------------

_NAMED = {"white": "ffffff", "black": "000000", "red": "ff0000", "green": "008000",
          "blue": "0000ff", "yellow": "ffff00", "gray": "808080", "grey": "808080",
          "silver": "c0c0c0", "whitesmoke": "f5f5f5", "snow": "fffafa", "ivory": "fffff0",
          "navy": "000080", "maroon": "800000", "purple": "800080", "teal": "008080"}
_ZERO = re.compile(r"^[+-]?(?:0+\.?0*|\.0+)(?:px|pt|em|rem|%|vw|vh|ex|ch|cm|mm|in|pc)?$")
# A style attribute or rule is read up to this many characters (a page's real ones are short).
MAX_STYLE_CHARS = 4000


def declarations(style: str) -> dict[str, str]:
    """`a: b; c: d` as {"a": "b", "c": "d"}, lower-cased, `!important` dropped; the last one of
    a property wins, as in CSS."""
    out: dict[str, str] = {}
    for part in style[:MAX_STYLE_CHARS].split(";"):
        name, colon, value = part.partition(":")
        if colon:
            value = value.lower().replace("!important", "").strip()
            out[name.strip().lower()] = " ".join(value.split())
    return out


def color(value: str | None) -> str | None:
    """A CSS colour as six hex digits, or "transparent"; None when it is not one read here
    (a gradient, a variable, an image)."""
    if not value:
        return None
    value = value.strip().lower()
    if value in ("transparent", "none"):
        return "transparent"
    if value in _NAMED:
        return _NAMED[value]
    m = re.fullmatch(r"#([0-9a-f]{3,8})", value)
    if m:
        digits = m.group(1)
        if len(digits) in (3, 4):
            alpha = digits[3:] if len(digits) == 4 else "f"
            digits = "".join(c * 2 for c in digits[:3]) + alpha * 2
        if len(digits) == 8:
            return "transparent" if digits[6:] == "00" else digits[:6]
        return digits if len(digits) == 6 else None
    m = re.fullmatch(r"rgba?\(\s*([\d.]+%?)[\s,]+([\d.]+%?)[\s,]+([\d.]+%?)"
                     r"(?:\s*[,/]\s*([\d.]+%?))?\s*\)", value)
    if m:
        if m.group(4) is not None and float(m.group(4).rstrip("%")) == 0:
            return "transparent"
        channels = []
        for c in m.groups()[:3]:
            n = float(c.rstrip("%")) * (2.55 if c.endswith("%") else 1)
            channels.append(max(0, min(255, round(n))))
        return "".join(f"{c:02x}" for c in channels)
    return None


def background(decls: dict[str, str]) -> str | None:
    """The background colour an element's declarations give it (None: not said; "?": an
    image or gradient, whose colours are not known here)."""
    if any(f in decls.get("background", "") for f in ("url(", "gradient(", "var(")):
        return "?"
    if "background-color" in decls:
        return color(decls["background-color"])
    if "background" in decls:
        # the shorthand: its colour is one of its words (`#fff url(a.png) no-repeat`)
        found = [color(word) for word in decls["background"].split()]
        return next((c for c in found if c), None)
    return None


def hiding(decls: dict[str, str]) -> set[str]:
    """The properties among these declarations that alone make an element's text invisible:
    display:none, visibility hidden or collapse, opacity 0, a zero font size, a transparent
    text colour. (Text the colour of its background needs the background too: hidden_html.)"""
    found = set()
    if decls.get("display") == "none":
        found.add("display")
    if decls.get("visibility") in ("hidden", "collapse"):
        found.add("visibility")
    for prop in ("opacity", "font-size"):
        if _ZERO.match(decls.get(prop, "1")):
            found.add(prop)
    if color(decls.get("color")) == "transparent":
        found.add("color")
    return found


# --- HTML ------------------------------------------------------------------------------------

# A page's <style> text is read up to this many characters and this many rules: a bounded
# cost per page (tree.css is one pass over the tree per selector).
MAX_SHEET_CHARS = 200_000
MAX_RULES = 300
# How far up the tree an element's background (or inherited colour) is looked for.
MAX_ANCESTORS = 64
_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/")
_DEFAULT_BG, _DEFAULT_COLOR = "ffffff", "000000"  # a browser's canvas and text


def style_rules(css: str) -> Iterator[tuple[str, dict[str, str]]]:
    """(selector, declarations) of a stylesheet's top-level rules, in order; at-rules
    (@media print, @supports, ...) are skipped: they hide only under conditions."""
    css = _COMMENT.sub(" ", css[:MAX_SHEET_CHARS])
    depth, start, prelude, count = 0, 0, "", 0
    for i, ch in enumerate(css):
        if ch == "{":
            if depth == 0:
                prelude, start = css[start:i].strip(), i + 1
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                if prelude and not prelude.startswith("@"):
                    decls = declarations(css[start:i])
                    for selector in prelude.split(","):
                        count += 1
                        if count > MAX_RULES:
                            return
                        yield selector.strip(), decls
                start = i + 1
        elif ch == ";" and depth == 0:
            start = i + 1  # `@import ...;` and other statements


def _select(tree, selector: str) -> list:
    """The elements a stylesheet selector matches; none for a selector with a pseudo-class or
    pseudo-element (:hover, ::before: a state or generated box, not the element as shown) or
    one the CSS engine cannot parse."""
    if not selector or ":" in selector:
        return []
    try:
        return tree.css(selector)
    except Exception:  # selectolax raises its own error on selectors it cannot parse
        return []


def _own_style(node) -> dict[str, str]:
    decls = declarations(node.attributes.get("style") or "")
    if node.tag == "font" and node.attributes.get("color"):
        decls.setdefault("color", node.attributes["color"] or "")
    if node.attributes.get("bgcolor"):
        decls.setdefault("background-color", node.attributes["bgcolor"] or "")
    return decls


def hidden_html(tree) -> int:
    """Remove from a selectolax (lexbor) tree the elements a reader of the page cannot see:
    the `hidden` attribute, aria-hidden="true", inline styles and simple <style> rules that
    hide (see `hiding`), and text whose colour is its background's (the nearest background an
    element or its ancestors declare, else a browser's white; the text colour likewise
    inherited, else black; on a page with an external stylesheet an undeclared colour is
    unknown and nothing is dropped for it). The number of elements removed is returned.

    The cascade is approximated, boundedly: rules in order (a later one wins, specificity is
    not weighed), an inline style over a rule for the same property, no @media, no
    pseudo-classes, no external stylesheets; text moved off-screen or clipped (screen-reader
    text) stays, and so does what a control on the page shows (a role="tabpanel", an element
    named by aria-controls).
    """
    sheet = "\n".join(node.text(deep=True) for node in tree.css("style"))
    sheet_style: dict[int, dict[str, str]] = {}
    nodes: dict[int, object] = {}
    for selector, decls in style_rules(sheet):
        wanted = {k: v for k, v in decls.items()
                  if k in ("display", "visibility", "opacity", "font-size", "color",
                           "background", "background-color")}
        if not wanted:
            continue
        for node in _select(tree, selector):
            sheet_style.setdefault(node.mem_id, {}).update(wanted)
            nodes[node.mem_id] = node
    for node in tree.css("[style], font[color], [bgcolor]"):
        nodes[node.mem_id] = node
    own: dict[int, dict[str, str]] = {}
    for key, node in nodes.items():
        own[key] = {**sheet_style.get(key, {}), **_own_style(node)}
    # the page's own colours decide; an external stylesheet may set any, so without one
    # known an undeclared background or text colour is unknown, not a browser's default
    external = tree.css_first("link[rel*=stylesheet], link[rel*=Stylesheet]") is not None
    defaults = (None, None) if external else (_DEFAULT_COLOR, _DEFAULT_BG)
    for key, node in nodes.items():
        # never the page as a whole: a page hidden until its scripts run (an anti-flicker
        # `.async-hide {opacity: 0}` on <html>, a loading screen) is shown to its readers
        if hiding(own[key]) and node.tag not in ("html", "body"):
            node.attrs["hidden"] = ""
    # a colour is inherited and a child may set its own: judged per text, by its element
    paint = {key: _paint(decls) for key, decls in own.items()}
    invisible = []
    if any(fg or bg for fg, bg in paint.values()):
        memo: dict[int, tuple[str | None, str | None]] = {}
        for text in _texts(tree):
            fg, bg = _colours(text.parent, paint, memo)
            fg, bg = fg or defaults[0], bg or defaults[1]
            if fg is not None and fg != "?" and fg == bg:
                invisible.append(text)
    for text in invisible:
        text.decompose()
    # a tab panel, an accordion's section: hidden until the page's own control (a tab, or a
    # button naming it in aria-controls: the WAI-ARIA patterns) shows it to the reader
    shown = {name for node in tree.css("[aria-controls]")
             for name in (node.attributes.get("aria-controls") or "").split()}
    gone = [node for node in tree.css("[hidden], [aria-hidden=true]")
            if node.attributes.get("role") != "tabpanel"
            and (not shown or node.attributes.get("id") not in shown)]
    # last first: a hidden element inside another goes before its ancestor is destroyed
    for node in reversed(gone):
        node.decompose()
    return len(gone) + len(invisible)


def _texts(tree) -> Iterator:
    """The text nodes of the page's body that hold more than white space."""
    root = tree.body or tree.root
    if root is None:
        return
    for node in root.traverse(include_text=True):
        if node.is_text_node and (node.text_content or "").strip() and node.parent is not None:
            yield node


def _paint(decls: dict[str, str]) -> tuple[str | None, str | None]:
    """(text colour, background) an element's declarations set: None where not set, "?" where
    set to something not read here; a transparent background shows its parent's."""
    fg = (color(decls["color"]) or "?") if "color" in decls else None
    bg = background(decls)
    return fg, None if bg == "transparent" else bg


def _colours(node, paint: dict[int, tuple[str | None, str | None]],
             memo: dict[int, tuple[str | None, str | None]]) -> tuple[str | None, str | None]:
    """The text colour and background `node` ends up with: the nearest ones it or its
    ancestors set (MAX_ANCESTORS up); each element resolved once (`memo`)."""
    chain: list[int] = []
    fg = bg = None
    current = node
    while current is not None and current.tag not in (None, "-document"):
        key = current.mem_id
        if key in memo:
            fg, bg = memo[key]
            break
        if len(chain) >= MAX_ANCESTORS:
            break
        chain.append(key)
        current = current.parent
    for key in reversed(chain):
        own_fg, own_bg = paint.get(key, (None, None))
        fg, bg = own_fg or fg, own_bg or bg
        memo[key] = (fg, bg)
    return fg, bg


def visible_html(html: str) -> str:
    """`html` without what hidden_html removes (the page itself when nothing is hidden, or
    when the mode keeps hidden text): for readers that parse the page with another library
    (trafilatura, for web pages)."""
    if not drop_hidden():
        return html
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    return tree.html or html if hidden_html(tree) else html
