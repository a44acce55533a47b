"""The one place where retrieved text is put inside a <retrieved_data> block.

Every producer (the agent's tool results, the LLM grader's and answerer's prompts, the MCP
tools) builds its block here, so a document cannot close the block early: anything in the data
that a model could read as the tag (`</retrieved_data>`, `< /Retrieved-Data >`, a full-width
`＜`, zero-width characters inside) has its `<` written as `&lt;`. Escaping, rather than a random
per-call delimiter, keeps prompts deterministic (prompt caching, scripted tests).
"""

from __future__ import annotations

import re

TAG = "retrieved_data"
# `<` or a look-alike, optional `/`, then "retrieved" and "data" with any case, and spaces,
# `_`, `-` or invisible characters between.
_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff"
_TAG_LIKE = re.compile(
    rf"[<\uff1c\ufe64\u2039\u3008](?=[\s{_INVISIBLE}]*/?[\s{_INVISIBLE}]*"
    rf"retrieved[\s_\-{_INVISIBLE}]*data)",
    re.IGNORECASE,
)


def escape_data(text: str) -> str:
    """`text` with every opening or closing look-alike of the data tag made inert."""
    return _TAG_LIKE.sub("&lt;", text)


def data_block(source: str, body: str) -> str:
    """`body` (retrieved text, doc ids, titles) as one <retrieved_data> block that only this
    function's own closing tag can end."""
    label = re.sub(r"[^\w .:/-]", "_", source)
    return f'<{TAG} source="{label}">\n{escape_data(body)}\n</{TAG}>'
