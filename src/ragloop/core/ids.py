"""Run and conversation ids: unguessable, since holding one is how a run is reached.

128 random bits from `secrets` (the OS's CSPRNG), as hex; a uuid4 cut to 12 hex digits
(48 bits) could be guessed by a patient client.
"""

from __future__ import annotations

import secrets


def new_id() -> str:
    return secrets.token_hex(16)
