"""Chunking: token bounds, overlap, section boundaries, sentence cuts, speed."""

from __future__ import annotations

import itertools

import pytest

from ragloop.core.types import ParsedDocument, SectionText
from ragloop.embed.model_files import count_tokens, local_tokenizer
from ragloop.ingest.chunking import chunk_document, section_offsets


def doc_of(*texts: str) -> ParsedDocument:
    sections = [SectionText(str(i), ("Doc", f"S{i}"), t) for i, t in enumerate(texts)]
    return ParsedDocument(doc_id="d", title="Doc", source="d.md", sections=sections)


SENTENCES = [f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(120)]


def test_short_sections_are_one_chunk_each_and_never_merged():
    chunks = chunk_document(doc_of("Alpha text.", "  ", "Beta text."))
    assert [(c.section, c.section_title, c.ord, c.text) for c in chunks] == [
        ("0", "S0", 0, "Alpha text."), ("2", "S2", 1, "Beta text.")]
    assert all(c.doc_id == "d" for c in chunks)


def test_long_section_is_token_bounded_overlapping_and_cut_at_sentences():
    text = " ".join(SENTENCES)
    chunks = chunk_document(doc_of("Intro.", text), max_tokens=100, overlap=20)
    assert chunks[0].text == "Intro."
    body = chunks[1:]
    assert len(body) > 5
    assert [c.ord for c in chunks] == list(range(len(chunks)))
    for c in body:
        assert c.section == "1"
        assert 0 < count_tokens(c.text) <= 100
        assert c.text.startswith("Sentence number")  # starts at a sentence
        assert c.text.endswith("detail.")  # ends at a sentence
    for a, b in itertools.pairwise(body):
        tail = a.text.split(". ")[-1]
        assert tail in b.text  # the last sentence of a chunk is repeated in the next
    # together the chunks cover every sentence
    joined = " ".join(c.text for c in body)
    assert all(s in joined for s in SENTENCES)


def test_paragraph_breaks_are_preferred():
    paras = ["\n".join(SENTENCES[i:i + 3]) for i in range(0, 60, 3)]
    chunks = chunk_document(doc_of("\n\n".join(paras)), max_tokens=120, overlap=0)
    assert len(chunks) > 3
    for c in chunks:
        assert c.text.split("\n\n")[0] in paras  # each chunk starts with a whole paragraph
        assert c.text.split("\n\n")[-1] in paras  # and ends with one


def test_no_boundaries_falls_back_to_words_and_exact_overlap():
    text = " ".join(["word"] * 1000)
    chunks = chunk_document(doc_of(text), max_tokens=200, overlap=40)
    assert [count_tokens(c.text) for c in chunks] == [200] * 6
    # a single unbroken token string still gets cut and loses nothing
    blob = "x" * 5000
    chunks = chunk_document(doc_of(blob), max_tokens=50, overlap=0)
    assert "".join(c.text for c in chunks) == blob
    assert all(count_tokens(c.text) <= 50 for c in chunks)


def test_overlap_is_clamped_and_arguments_checked():
    chunks = chunk_document(doc_of(" ".join(SENTENCES)), max_tokens=30, overlap=500)
    assert all(count_tokens(c.text) <= 30 for c in chunks)
    with pytest.raises(ValueError):
        chunk_document(doc_of("x"), max_tokens=0)
    assert chunk_document(doc_of("", "   \n ")) == []


def test_piecewise_offsets_match_one_encode():
    text = "\n\n".join(f"Paragraph {i}: naïve café prices, “quoted” — fine." for i in range(800))
    assert [tuple(o) for o in section_offsets([text])[0].tolist()] == local_tokenizer().encode(
        text, add_special_tokens=False).offsets


def test_chunking_a_long_section_and_many_sections():
    paragraphs = [f"Paragraph {i} says that the quick brown fox jumps over the lazy dog."
                  f" Then it rests for {i} minutes." for i in range(5000)]
    chunks = chunk_document(doc_of("\n\n".join(paragraphs)))
    assert len(chunk_document(doc_of(*paragraphs))) == 5000
    assert all(c.text.strip() for c in chunks)
