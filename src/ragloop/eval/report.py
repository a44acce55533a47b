"""The eval report: a Markdown table for the terminal, report.json, and a self-contained
report.html with matplotlib plots embedded as base64 PNG. matplotlib is the optional extra
`ragloop[eval]`: without it report.html holds the tables and a note saying how to get the
plots."""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragloop.core.extras import EVAL_MODULES, missing_modules
from ragloop.eval.metrics import single_ks

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# (key template, label, kind): kind "share" prints as %, "pct" is already a percentage.
ROWS: list[tuple[str, str, str]] = [
    ("recall@{k}", "recall@{k} (any gold doc in first {k} distinct docs)", "share"),
    ("all_gold@{k}", "all_gold@{k}", "share"),
    ("all_gold@{k}_confirmed", "all_gold@{k}, confirmed evidence only", "share"),
    ("lost@{k}", "lost@{k} (single-shot had every gold doc, this path not)", "int"),
    ("gained@{k}", "gained@{k} (this path has every gold doc, single-shot not)", "int"),
    ("all_gold@5", "all_gold@5", "share"),
    ("lost@5", "lost@5", "int"),
    ("gained@5", "gained@5", "int"),
    ("mrr", "MRR@{k}", "num3"),
    ("recall_uncapped", "recall, uncapped evidence", "share"),
    ("section_recall@{k}", "section_recall@{k} (any gold section in those docs' evidence)",
     "share"),
    ("all_sections@{k}", "all_sections@{k}", "share"),
    ("docs_mean", "distinct docs in evidence (mean)", "num1"),
    ("answer_first", "reference in the answer's first sentence", "share"),
    ("answer_em", "reference anywhere in the answer", "share"),
    ("answer_f1", "answer token F1", "num3"),
    ("answer_words_mean", "answer length (mean words)", "num1"),
    ("answer_first_found", "reference in first sentence, gold docs found", "share"),
    ("answer_em_found", "reference anywhere, gold docs found", "share"),
    ("found_missed", "gold docs found but the answer misses the reference", "int"),
    ("answer_judged", "answer correct (LLM judge)", "share"),
    ("abstention", "abstained on unanswerable", "share"),
    ("answered_anyway", "answered an unanswerable question anyway", "share"),
    ("false_abstention", "abstained on answerable", "share"),
    ("latency_mean_s", "latency mean (s)", "num2"),
    ("latency_p95_s", "latency p95 (s)", "num2"),
    ("tokens_mean", "tokens per question (mean)", "num0"),
    ("cost_mean", "cost per question (mean, $)", "cost"),
    ("steps_mean", "steps (mean)", "num2"),
    ("used_all_steps_pct", "used every step", "pct"),
    ("truncated_pct", "forced to answer (truncated)", "pct"),
    ("citation_precision", "citation precision (cited passage supports its claim)", "share"),
    ("all_claims_supported", "answers with every claim cited and supported", "share"),
    ("discarded_pct", "chunks discarded by grader", "pct"),
    ("grader_precision", "grader precision (kept from gold docs)", "share"),
    ("grader_recall", "grader recall (gold chunks kept)", "share"),
    ("router_accuracy", "router accuracy", "share"),
    ("failed_pct", "failed runs", "pct"),
    ("n", "questions", "int"),
]


def fmt(value: Any, kind: str) -> str:
    if value is None:
        return "–"
    if kind == "share":
        return f"{100 * value:.1f}%"
    if kind == "pct":
        return f"{value:.1f}%"
    if kind == "cost":
        return f"{value:.4f}"
    if kind == "int":
        return str(int(value))
    digits = int(kind[-1]) if kind.startswith("num") else 3
    return f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(header))) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(report: dict[str, Any]) -> str:
    k = report["k"]
    paths = list(report["paths"])
    rows = []
    shown: set[str] = set()  # at k = 5 the @k rows and the @5 ones are the same figures
    for key, label, kind in ROWS:
        key = key.format(k=k)
        values = [report["paths"][p].get(key) for p in paths]
        if key in shown or all(v is None for v in values):
            continue
        shown.add(key)
        rows.append([label.format(k=k), *(fmt(v, kind) for v in values)])
    text = _table(["metric", *paths], rows)
    if report["by_type"]:
        columns = [f"recall@{k}", f"all_gold@{k}"]
        if any(figures.get("sections_n") for per_path in report["by_type"].values()
               for figures in per_path.values()):
            columns.append(f"all_sections@{k}")
        columns.append("answer_em")
        header = ["type", "n", *(f"{p} {c.replace('answer_em', 'EM')}" for c in columns
                                 for p in paths)]
        type_rows = []
        for t, per_path in report["by_type"].items():
            n = max((figures.get("n", 0) for figures in per_path.values()), default=0)
            type_rows.append([t or "(none)", str(n),
                              *(fmt(per_path[p].get(c), "share") for c in columns
                                for p in paths)])
        text += "\n\n" + _table(header, type_rows)
        if "single" in paths:
            text += "\n\n" + _against_single_by_type(report, paths)
        text += "\n\n" + _steps_and_citations_by_type(report, paths)
        if any(figures.get("answer_n") for per_path in report["by_type"].values()
               for figures in per_path.values()):
            text += "\n\n" + _answers_by_type(report, paths)
    warnings = answer_warnings(report)
    if warnings:
        text += "\n\n" + "\n".join(f"warning: {w}" for w in warnings)
    return text


# per type: whether the answer holds the reference, and how long it is
_ANSWERS = [("answer_first", "1st sent", "share"), ("answer_em", "anywhere", "share"),
            ("answer_f1", "F1", "num3"), ("answer_words_mean", "words", "num1"),
            ("answer_first_found", "1st sent, found", "share"),
            ("answer_judged", "judge", "share"), ("answered_anyway", "unansw. answered",
                                                  "share")]


def _answers_by_type(report: dict[str, Any], paths: list[str]) -> str:
    shown = [(key, label, kind) for key, label, kind in _ANSWERS
             if any(per_path[p].get(key) is not None for per_path in report["by_type"].values()
                    for p in paths)]
    header = ["type", *(f"{p} {label}" for _, label, _ in shown for p in paths)]
    rows = [[t or "(none)", *(fmt(per_path[p].get(key), kind)
                              for key, _, kind in shown for p in paths)]
            for t, per_path in report["by_type"].items()]
    return _table(header, rows)


# Warn when this share of the questions whose gold documents were all found is answered
# without the reference: retrieval did its part, the answer did not.
MISSED_WARN = 0.25


def answer_warnings(report: dict[str, Any]) -> list[str]:
    """One line per path and type where the answer misses what retrieval found."""
    out = []
    for t, per_path in report["by_type"].items():
        for p, figures in per_path.items():
            missed, found = figures.get("found_missed"), figures.get("found_n") or 0
            if missed is not None and found and missed / found >= MISSED_WARN:
                out.append(f"{p}, {t or '(none)'}: every gold document was in the evidence for"
                           f" {found} questions, and the answer missed the reference on"
                           f" {missed} ({missed / found:.0%}): the answer, not retrieval, is"
                           " what fails")
    return out


def _against_single_by_type(report: dict[str, Any], paths: list[str]) -> str:
    """Per type, at 5 and at k: single-shot's all-gold, then each other path's all-gold, lost
    and gained against it."""
    k = report["k"]
    ks = single_ks(k)
    columns = [(kk, p, c) for kk in ks for p in paths
               for c in (("all_gold",) if p == "single" else ("all_gold", "lost", "gained"))]
    header = ["type", *(f"{p} {c}@{kk}" for kk, p, c in columns)]
    rows = [[t or "(none)", *(fmt(per_path[p].get(f"{c}@{kk}"),
                                  "share" if c == "all_gold" else "int")
                              for kk, p, c in columns)]
            for t, per_path in report["by_type"].items()]
    return _table(header, rows)


# per type: the step ceiling and the citations, beside the retrieval table above
_BY_TYPE_MORE = [("used_all_steps_pct", "every step", "pct"),
                 ("truncated_pct", "forced", "pct"),
                 ("citation_precision", "cite prec", "share"),
                 ("all_claims_supported", "all supported", "share")]


def _steps_and_citations_by_type(report: dict[str, Any], paths: list[str]) -> str:
    header = ["type", *(f"{p} {label}" for _, label, _ in _BY_TYPE_MORE for p in paths)]
    rows = [[t or "(none)", *(fmt(per_path[p].get(key), kind)
                              for key, _, kind in _BY_TYPE_MORE for p in paths)]
            for t, per_path in report["by_type"].items()]
    return _table(header, rows)


def to_json(report: dict[str, Any]) -> dict[str, Any]:
    """The stored/printed form: `{"k", "paths": {...}, "by_type": {...}}` plus any notes."""
    return json.loads(json.dumps(report, default=str))


# -- plots -----------------------------------------------------------------------------------

def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def plots(report: dict[str, Any], records: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Title → base64 PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = report["k"]
    paths = list(report["paths"])
    key = f"recall@{k}"
    out: dict[str, str] = {}

    types = list(report["by_type"])
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(types) + 2), 3.6))
    width = 0.8 / max(1, len(paths))
    for i, p in enumerate(paths):
        values = [report["by_type"][t][p].get(key) or 0.0 for t in types]
        ax.bar([x + i * width for x in range(len(types))], values, width, label=p)
    ax.set_xticks([x + width * (len(paths) - 1) / 2 for x in range(len(types))])
    ax.set_xticklabels([t or "(none)" for t in types], rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(key)
    ax.legend()
    ax.set_title(f"{key} by question type and path")
    out[f"{key} by type and path"] = _png(fig)

    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    for p in paths:
        figures = report["paths"][p]
        cost = figures.get("cost_mean") or 0.0
        ax.scatter([cost], [figures.get(key) or 0.0], s=60)
        ax.annotate(p, (cost, figures.get(key) or 0.0), textcoords="offset points",
                    xytext=(6, 4))
    ax.set_xlabel("mean cost per question ($)")
    ax.set_ylabel(key)
    ax.set_ylim(0, 1.05)
    ax.set_title("cost vs recall")
    out["cost vs recall"] = _png(fig)

    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    data = [[float(r.get("latency_s") or 0.0) for r in records if r["path"] == p] for p in paths]
    if any(data):
        ax.boxplot([d or [0.0] for d in data], tick_labels=paths)
    ax.set_ylabel("latency (s)")
    ax.set_title("latency distribution")
    out["latency distribution"] = _png(fig)

    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    steps = [[int(r.get("steps") or 0) for r in records if r["path"] == p] for p in paths]
    top = max([max(s) for s in steps if s] or [1])
    bins = [x - 0.5 for x in range(0, top + 2)]
    for p, s in zip(paths, steps, strict=True):
        if s:
            ax.hist(s, bins=bins, alpha=0.55, label=p)
    ax.set_xlabel("steps")
    ax.set_ylabel("questions")
    ax.legend()
    ax.set_title("steps per question")
    out["steps histogram"] = _png(fig)
    return out


NO_PLOTS = ("No plots: matplotlib is not installed (pip install 'ragloop[eval]' adds them);"
            " the tables above hold every figure.")


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(report: dict[str, Any], records: Sequence[dict[str, Any]],
                title: str = "ragloop eval") -> str:
    blocks = []
    for chunk in markdown(report).split("\n\n"):
        lines = [ln.strip().strip("|").split("|") for ln in chunk.splitlines()]
        blocks.append(_html_table([c.strip() for c in lines[0]],
                                  [[c.strip() for c in ln] for ln in lines[2:]]))
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in report.get("notes", []))
    if missing_modules(EVAL_MODULES):
        figures = f'<p class="no-plots">{html.escape(NO_PLOTS)}</p>'
    else:
        figures = "".join(
            f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{png}">'
            f"<figcaption>{html.escape(name)}</figcaption></figure>"
            for name, png in plots(report, records).items())
    style = ("body{font-family:system-ui,sans-serif;margin:2rem;max-width:72rem}"
             "table{border-collapse:collapse;margin:1rem 0}"
             "td,th{border:1px solid #ccc;padding:.25rem .6rem;text-align:right}"
             "td:first-child,th:first-child{text-align:left}"
             "figure{display:inline-block;margin:.5rem}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
            f"{notes}{''.join(blocks)}{figures}</body></html>")


def write_reports(out: Path, report: dict[str, Any], records: Sequence[dict[str, Any]],
                  title: str = "ragloop eval") -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    files["json"].write_text(json.dumps(to_json(report), indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    files["md"].write_text(markdown(report) + "\n", encoding="utf-8")
    files["html"].write_text(html_report(report, records, title), encoding="utf-8")
    return files
