"""The audit line (issue 43.5): one structured log line per denied access attempt, for the
admin (logger `ragloop.audit`, level WARNING), never shown to the one who was denied.

`denied user=bob action=fetch doc_id=hr/pay.md reason=hidden`: who, what, which id and why;
never a document's title or text, never a key's token. Values are quoted when they hold a
space or a quote, so each line splits back into its fields.
"""

from __future__ import annotations

import logging

log = logging.getLogger("ragloop.audit")


def _value(raw: object) -> str:
    text = " ".join(str(raw).split())[:200]  # one line, bounded (a doc id is user input)
    if not text or any(c in text for c in ' "='):
        return '"' + text.replace('"', "'") + '"'
    return text


def denied(user: str, action: str, reason: str, **fields: object) -> None:
    """Log one denied attempt: `user` (the principal's name, or `-` for a request with no
    valid key), `action` (fetch, delete, upload, admin, key), `reason` (hidden, not_found,
    not_admin, bad_key) and the ids involved."""
    parts = [f"user={_value(user)}", f"action={_value(action)}"]
    parts += [f"{k}={_value(v)}" for k, v in fields.items() if v is not None]
    parts.append(f"reason={_value(reason)}")
    log.warning("denied %s", " ".join(parts))
