"""The default models are current: each is in the installed SDK's own model list, not among
the SDK's deprecated ids, and has a price."""

from __future__ import annotations

import typing
from pathlib import Path

from anthropic.types import model_param
from openai.types.shared import chat_model

from ragloop.core.config import DEFAULT_ANTHROPIC_MODEL, DEFAULT_OPENAI_MODEL
from ragloop.llm.pricing import has_price


def listed(alias: object) -> set[str]:
    names: set[str] = set()
    for arg in typing.get_args(alias):
        names |= set(typing.get_args(arg)) if typing.get_args(arg) else set()
    return names | {a for a in typing.get_args(alias) if isinstance(a, str)}


def test_the_anthropic_default_is_in_the_sdk_model_list_and_priced() -> None:
    name = DEFAULT_ANTHROPIC_MODEL.split(":", 1)[1]
    assert name in listed(model_param.ModelParam)
    assert has_price("anthropic", name)


def test_the_openai_default_is_listed_not_deprecated_and_priced() -> None:
    name = DEFAULT_OPENAI_MODEL.split(":", 1)[1]
    assert name in listed(chat_model.ChatModel)
    source = Path(chat_model.__file__).read_text(encoding="utf-8")
    notes = source.split('"""Deprecated values:', 1)[1]  # the SDK's shutdown notes
    assert f'"{name}"' not in notes
    assert has_price("openai", name)
