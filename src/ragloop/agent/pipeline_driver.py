"""The `pipeline` driver: plan → retrieve → grade → rewrite-from-the-gap → answer.

Each decision is a separate component (LLM JSON calls or local rules); with the local ones the
whole run needs no generative model. Steps count tool calls; the last step is the answer.

Order of work: the run template plans (this driver's planner) and makes step 1, single-shot's
own search (the whole question, single-shot's depth; agent/template.py); every other
sub-question that single-shot's results do not answer gets its first search; then the
one-passage documents the question names by title that the searches did not bring; then,
round-robin while steps remain, for parts not answered yet a pointer read (a cut-off chunk's
section, a one-passage document a kept chunk names) or else a rewrite from the gap, until the
gap stops narrowing. A part the grader judged enough is done: a spare step for it
helped on HotpotQA but lost ground on the held-out hard set, so there is none. A re-query's
hits are graded against the re-query too, so a second hop is not discarded for sharing little
with the question. Only relevant chunks are confirmed evidence; a part the run could not answer
also shows the nearest passages of its own first search (one per document it does not hold
yet), unconfirmed, unless the part names a code no passage mentions.
The evidence is finally renumbered best-supported first, sub-questions interleaved, and
single-shot's documents keep their places unless a document the run reached through evidence
of a hop takes the place of one the grader did not keep (`agent/placement.py`: the run notes
why it reached each document, `Hop`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ragloop.agent import placement
from ragloop.agent.evidence import Ledger
from ragloop.agent.failures import CONTINUES
from ragloop.agent.placement import Hop
from ragloop.agent.run import RunContext, Steps
from ragloop.agent.search_grade import (
    GradedSearch,
    document_scores,
    grade_event,
    search_and_grade,
)
from ragloop.agent.template import Gathered
from ragloop.agent.tools import FETCH, Toolbox, search_event
from ragloop.core.decisions import (
    Evidence,
    FollowUps,
    Grade,
    Grader,
    Plan,
    Planner,
    Rewriter,
)
from ragloop.core.events import PlacementEvent, RewriteEvent, ToolCallEvent
from ragloop.core.types import Hit
from ragloop.language.text import Reading

# Follow-up reads per sub-question (fetching named documents or cut-off sections).
MAX_FETCHES_PER_PART = 2
# One-passage documents the question itself names by title that the first search did not
# bring: read at most this many per sub-question.
MAX_NAMED_PER_PART = 2
# Final evidence order: a section read because the question named it ranks with this score;
# one read through a kept chunk's pointer ranks just below that chunk.
NAMED_PRIORITY = 1.0
POINTER_DISCOUNT = 1e-3
# The grade given to a re-query's hit from the document the query names by title.
NAMED_HIT_SCORE = 0.5
# A discarded hit a section read through a pointer points to is kept (`_with_pointed`) ranked
# this far below what searched chunks point to.
CHAIN_DISCOUNT = 1.0
# A section read through a pointer has its own pointers followed: the next link of a 3-4 hop
# chain (issue 45). False: a read is never followed further.
FOLLOW_READ_POINTERS = True
# The newest section read through a pointer has its pointers followed first (depth first: each
# hop's new entity seeds the next read); False: by grade, the searched chunks' first.
CHAIN_FIRST = True
# A part the run could not answer shows this many nearest passages (one per document) from its
# own first search, marked unconfirmed, ranked after all other evidence.
NEAREST_DOCS = 3
NEAREST_PRIORITY = -1.0
# The sub-question index of the whole question's own search when the plan has several parts.
WHOLE_QUESTION = -1
# A part single-shot's search already answers (graded against the part) gets no search of its
# own: the depth follows the parts left open.
DEPTH_FOLLOWS_PARTS = True


def gap_size(missing: str, rd: Reading) -> int:
    """How many things a grader's gap description still names (its content words)."""
    return len(set(rd.content_words(missing)))


def top_doc_ids(hits: list[Hit], k: int) -> list[str]:
    """The first k distinct documents of a search, in rank order."""
    return list(dict.fromkeys(h.doc_id for h in hits))[:k]


@dataclass
class Part:
    """One sub-question and what the run knows about it."""

    index: int
    question: str
    tried: list[str] = field(default_factory=list)
    kept: list[Hit] = field(default_factory=list)
    last_grade: Grade | None = None
    fetches: int = 0
    exhausted: bool = False
    unreadable: set[tuple[str, str]] = field(default_factory=set)  # pointers that led nowhere
    gap: str = ""  # the last gap described by a grade that kept something
    first_hits: list[Hit] | None = None  # the first search's page, in order
    chain: list[Hit] = field(default_factory=list)  # sections read through pointers, in order

    @property
    def enough(self) -> bool:
        return self.last_grade is not None and self.last_grade.enough


class NoFollowUps:
    """Follows nothing (the offline `FollowUps` come from offline/follow_ups.py)."""

    def __call__(self, hit: Hit, question: str | None = None) -> list[tuple[str, str]]:
        """(doc_id, section) pairs; `question` may order them by what it asks."""
        return []

    def named(self, text: str) -> list[tuple[str, str]]:
        """The passage of each one-passage document a question names by title."""
        return []


class PipelineDriver:
    name = "pipeline"
    grades_whole_page = True

    def __init__(self, toolbox: Toolbox, planner: Planner, grader: Grader, rewriter: Rewriter,
                 follow_ups: FollowUps | None = None, baseline_docs: int = 5, *,
                 reading: Reading) -> None:
        """The first `baseline_docs` documents of step 1's search are single-shot's evidence,
        which the run's evidence keeps in place unless the grader found them irrelevant (see
        `_final_evidence`). `reading`: the knowledge base's language."""
        self.toolbox = toolbox
        self.reading = reading
        self.baseline_docs = baseline_docs
        self.planner = planner
        self.grader = grader
        self.rewriter = rewriter
        self.follow_ups: FollowUps = follow_ups or NoFollowUps()

    def plan(self, question: str) -> Plan | None:
        return self.planner.plan(question)

    def _search(self, ctx: RunContext, part: Part, query: str, page: int = 1,
                reason: str | None = None) -> Steps[None]:
        ctx.step += 1
        part.tried.append(query)
        try:
            found = search_and_grade(self.toolbox, self.grader, query, part.question, page)
        except CONTINUES as exc:
            yield search_event(query, error=str(exc))
            part.exhausted = True
            return
        grade = self._take(ctx, part, found)
        yield search_event(query, found.hits, kept=grade.kept, page=page, reason=reason,
                           sub_question=part.index)
        yield grade_event(query, part.index, found.hits, grade)

    def place_first(self, ctx: RunContext) -> Grade:
        """Step 1 (the template's search of the whole question) as the whole question's first
        search (its one part's, when the plan has one); its first documents are
        single-shot's."""
        plan = ctx.plan
        assert plan is not None
        self._parts = [Part(i, q) for i, q in enumerate(plan.sub_questions or [ctx.question])]
        self._priority: dict[int, float] = {}
        self._pointer_cache: dict[tuple[int, str], list[tuple[str, str]]] = {}
        self._single_docs: list[str] = []
        self._single_hits: list[Hit] = []
        self._doc_score: dict[str, float] = {}
        # why the run reached each document, the parts single-shot leaves open (agent/placement.py)
        self._reached: dict[str, set[Hop]] = {}
        self._open: set[int] = set()
        self._placement: placement.Placement | None = None
        parts = self._parts
        self._multi_part = len(parts) > 1
        whole = parts[0] if len(parts) == 1 else Part(WHOLE_QUESTION, ctx.question)
        self._whole = whole
        first = ctx.first
        assert first is not None
        whole.tried.append(first.query)
        if first.error is not None:
            whole.exhausted = True
            return first.grade
        self._single_docs = top_doc_ids(first.hits, self.baseline_docs)
        self._single_hits = first.hits
        return self._take(ctx, whole, GradedSearch(first.query, 1, first.hits, first.grade))

    def _take(self, ctx: RunContext, part: Part, found: GradedSearch) -> Grade:
        """A graded search's kept hits into the part and the evidence, ranked; the grade as
        kept (with the query's own grade and the pointed-to hits)."""
        query, hits, grade = found.query, found.hits, found.grade
        document_scores(grade, into=self._doc_score)
        part.last_grade = grade
        if part.first_hits is None:
            part.first_hits = hits
        if grade.kept:
            part.gap = grade.missing
        # the evidence ranks by what a hit says about the question: a hit kept for matching a
        # re-query well (the bridge, the gap's terms) must not outrank the question's own
        asked = {h.chunk_id: h.grade_score or 0.0 for h in [*grade.kept, *grade.discarded]}
        if query.strip().lower() != part.question.strip().lower():
            grade = self._with_query_grade(grade, query, hits)
        grade = self._with_pointed(ctx, part, grade, asked)
        known = {h.chunk_id for h in part.kept}
        held = {e.doc_id for e in ctx.ledger.items}
        for h in grade.kept:
            self._note_search_hop(ctx, part, query, h, new=h.doc_id not in held)
            n = ctx.ledger.add_hit(h, ctx.step, part.index)
            self._rank(n, asked.get(h.chunk_id, h.grade_score or 0.0))
            if h.chunk_id not in known:
                part.kept.append(h)
                known.add(h.chunk_id)
        return grade

    def _with_query_grade(self, grade: Grade, query: str, hits: list[Hit]) -> Grade:
        """A re-query looks for something the question does not name (the bridge entity, the
        gap's terms): a hit that answers the query is kept too, so the second hop of a
        two-hop question is not discarded for sharing little with the question."""
        rd = self.reading
        by_query = self.grader.grade(query, hits)
        kept = {h.chunk_id: h for h in grade.kept}
        # a hit from the very document the query names (the bridge's own page) is kept even
        # when its text shares little with the query
        named = [replace(h, verdict="relevant", grade_score=max(h.grade_score or 0.0,
                                                                NAMED_HIT_SCORE))
                 for h in by_query.discarded
                 if rd.query_names_title(query, h.doc_title or h.section_title)]
        for h in [*by_query.kept, *named]:
            mine = kept.get(h.chunk_id)
            if mine is None or (h.grade_score or 0.0) > (mine.grade_score or 0.0):
                kept[h.chunk_id] = h
        ordered = sorted(kept.values(), key=lambda h: -(h.grade_score or 0.0))
        discarded = [h for h in grade.discarded if h.chunk_id not in kept]
        return Grade(ordered, discarded, grade.enough, grade.missing, grade.next_query)

    def _note(self, doc_id: str, hop: Hop) -> None:
        self._reached.setdefault(doc_id, set()).add(hop)

    def _note_search_hop(self, ctx: RunContext, part: Part, query: str, hit: Hit,
                         new: bool) -> None:
        """Why a searched hit was kept: its own sub-question's first search, a re-query that
        names the title of a document the run did not hold yet (a bridge: the name came
        from a kept chunk of another document), the rewriter's re-query; and a part
        single-shot left open."""
        if part.index in self._open:
            self._note(hit.doc_id, Hop.COVERS_PART)
        if query.strip().lower() == part.question.strip().lower():
            if part.index >= 0 and self._multi_part:
                self._note(hit.doc_id, Hop.SECOND_HOP)
        elif query.strip().lower() != ctx.question.strip().lower():
            title = hit.doc_title or hit.section_title
            bridge = new and self.reading.query_names_title(query, title) \
                and not self.reading.query_names_title(ctx.question, title)
            self._note(hit.doc_id, Hop.BRIDGE if bridge else Hop.REQUERY)

    def _note_pointer(self, ctx: RunContext, doc_id: str, title: str, source: str,
                      chained: bool = False) -> None:
        """A document reached through what a kept chunk of another document names: a pointer
        when the question does not name it too; a chain link when the naming chunk was
        itself read through a pointer."""
        if doc_id != source:
            named = self.reading.query_names_title(ctx.question, title)
            self._note(doc_id, Hop.NAMED if named else Hop.CHAIN if chained else Hop.POINTER)

    def _with_pointed(self, ctx: RunContext, part: Part, grade: Grade,
                      asked: dict[int, float]) -> Grade:
        """A discarded hit that a kept chunk points to (the one-passage document it names, its
        own cut-off section) is the next hop already in hand: kept, ranked just below the
        chunk that points to it, with no fetch step spent on it."""
        if not grade.discarded:
            return grade
        pointers: dict[tuple[str, str], float] = {}
        sources: dict[tuple[str, str], Hit] = {}
        for h in sorted([*grade.kept, *part.kept], key=lambda h: -(h.grade_score or 0.0)):
            source = asked.get(h.chunk_id, h.grade_score or 0.0)
            for target in self._targets(h, part.question):
                pointers.setdefault(target, source - POINTER_DISCOUNT)
                sources.setdefault(target, h)
        promoted = [h for h in grade.discarded if (h.doc_id, h.section) in pointers]
        if not promoted:
            return grade
        for h in promoted:
            asked[h.chunk_id] = pointers[(h.doc_id, h.section)]
            source_hit = sources[(h.doc_id, h.section)]
            self._note_pointer(ctx, h.doc_id, h.doc_title or h.section_title,
                               source_hit.doc_id, chained=source_hit in part.chain)
        kept = [*grade.kept, *(replace(h, verdict="relevant") for h in promoted)]
        discarded = [h for h in grade.discarded if h not in promoted]
        return Grade(kept, discarded, grade.enough, grade.missing, grade.next_query)

    def _targets(self, hit: Hit, question: str) -> list[tuple[str, str]]:
        """What a kept hit points to; asked after every search and every read, computed once."""
        key = (hit.chunk_id, question)
        if key not in self._pointer_cache:
            self._pointer_cache[key] = self.follow_ups(hit, question)
        return self._pointer_cache[key]

    def _rank(self, n: int, score: float) -> None:
        self._priority[n] = max(score, self._priority.get(n, float("-inf")))

    def _read(self, ctx: RunContext, part: Part, doc_id: str, section: str,
              priority: float, follow: float | None = None,
              reason: str | None = None, source: str | None = None,
              chained: bool = False) -> Steps[None]:
        """Fetch a section into the evidence at `priority`; it joins the part's kept hits
        with grade `follow` (default: priority), which ranks the hits its pointers promote."""
        ctx.step += 1
        part.fetches += 1
        try:
            found = self.toolbox.fetch(doc_id, section)
        except CONTINUES as exc:
            yield ToolCallEvent(tool=FETCH, doc_id=doc_id, section=section,
                                error=str(exc))
            part.unreadable.add((doc_id, section))
            return
        n = ctx.ledger.add_section(found, ctx.step, part.index)
        self._rank(n, priority)
        title = found.title_path[0] if found.title_path else found.title
        if source is None:
            self._note(found.doc_id, Hop.NAMED)
        else:
            self._note_pointer(ctx, found.doc_id, title, source, chained)
        if part.index in self._open:
            self._note(found.doc_id, Hop.COVERS_PART)
        # what was read is kept evidence too: its names feed re-queries, and discarded hits
        # it points to are kept
        read = Hit(chunk_id=-n, doc_id=found.doc_id, section=found.section,
                   section_title=found.title, text=found.text,
                   doc_title=found.title_path[0] if found.title_path else "",
                   verdict="relevant", kb=found.kb,
                   grade_score=priority if follow is None else follow)
        part.kept.append(read)
        if source is not None:
            part.chain.append(read)
        yield ToolCallEvent(tool=FETCH, doc_id=doc_id, section=section,
                            chars=len(found.text), sub_question=part.index, reason=reason)

    def _known_doc(self, ctx: RunContext, doc_id: str) -> bool:
        return any(e.doc_id == doc_id for e in ctx.ledger.items)

    def _fetch_named(self, ctx: RunContext, part: Part) -> Steps[None]:
        """Read the one-passage documents the sub-question names by title that no evidence
        holds yet. (Sections it names by number are not read: that rule changed no figure on
        the held-out hard set or HotpotQA; offline/README.md.)"""
        read = 0
        for doc_id, section in self.follow_ups.named(part.question):
            if read >= MAX_NAMED_PER_PART or not ctx.tool_steps_left:
                return
            if ctx.ledger.has_section(doc_id, section) or self._known_doc(ctx, doc_id):
                continue
            yield from self._read(ctx, part, doc_id, section, NAMED_PRIORITY,
                                  reason="the question names this document")
            read += 1

    def _fetch_one(self, ctx: RunContext, part: Part) -> Steps[bool]:
        """Read one section a kept chunk points to; False when there is none left to read."""
        if part.fetches >= MAX_FETCHES_PER_PART:
            return False
        # by grade (a section read through a pointer grades CHAIN_DISCOUNT below its source),
        # the newest such section first (CHAIN_FIRST): a chain P → A → B reads B after A
        # (issue 45). MAX_FETCHES_PER_PART bounds it: no grade stops a chain of reads wandering
        ranked = sorted((h for h in part.kept if h.chunk_id >= 0 or FOLLOW_READ_POINTERS),
                        key=lambda h: -(h.grade_score or 0.0))
        if CHAIN_FIRST and FOLLOW_READ_POINTERS and part.chain:
            newest = part.chain[-1]
            ranked = [newest, *(h for h in ranked if h.chunk_id != newest.chunk_id)]
        for hit in ranked:
            for doc_id, section in self._targets(hit, part.question):
                if ctx.ledger.has_section(doc_id, section) or (doc_id, section) in part.unreadable:
                    continue
                if doc_id != hit.doc_id and self._known_doc(ctx, doc_id):
                    continue  # a document the evidence already holds
                # a section reached through a pointer ranks right after its source in the
                # evidence
                score = (hit.grade_score or 0.0) - POINTER_DISCOUNT
                yield from self._read(
                    ctx, part, doc_id, section, score, follow=score - CHAIN_DISCOUNT,
                    reason=f"a kept chunk of {hit.doc_id} §{hit.section} points here",
                    source=hit.doc_id, chained=hit in part.chain)
                return True
        return False

    def _add_nearest(self, ctx: RunContext, part: Part) -> None:
        """A part the run could not answer gets the top passage of each of the first
        NEAREST_DOCS documents of its own search that the evidence does not hold yet, as
        unconfirmed evidence: the local grader misses paraphrases the search ranked near the
        top (a passage in everyday words for a question in the documents' own terms), and the
        closest passages serve the user better than a bare "not found". Not when the part
        asks about a product or period code none of them mentions: the knowledge base does
        not have it, and the nearest passages are about something else."""
        rd = self.reading
        if part.enough or not part.first_hits:
            return
        hits = part.first_hits
        said = " ".join(f"{h.doc_title} {h.section_title} {h.text}" for h in hits)
        if rd.absent_codes(part.question, rd.term_set(said)):
            return
        docs: set[str] = set()
        for h in hits:
            if self._known_doc(ctx, h.doc_id):
                continue
            docs.add(h.doc_id)
            n = ctx.ledger.add_hit(h, ctx.step, part.index, confirmed=False)
            self._rank(n, NEAREST_PRIORITY - len(docs) * POINTER_DISCOUNT)
            if len(docs) >= NEAREST_DOCS:
                break

    def _final_evidence(self, ctx: RunContext) -> PlacementEvent:
        """Renumber the evidence best-supported first: per sub-question by grade (a section
        read through a pointer right after the chunk that pointed to it), sub-questions
        interleaved, so the first k documents hold the best of every part; unconfirmed
        nearest passages come after all of them. Then single-shot's documents are put back in
        their places, save those a document reached through a hop takes
        (`_keep_single_shot`)."""
        ordered = []
        for confirmed in (True, False):
            queues: dict[int, list] = {}
            for e in ctx.ledger.items:
                if e.confirmed == confirmed:
                    queues.setdefault(e.sub_question, []).append(e)
            for q in queues.values():
                q.sort(key=lambda e: (-self._priority.get(e.n, 0.0), e.n))
            while any(queues.values()):
                for key in sorted(queues):
                    if queues[key]:
                        ordered.append(queues[key].pop(0))
        ordered = self._keep_single_shot(ctx, ordered)
        ledger = Ledger()
        for i, e in enumerate(ordered):
            ledger.add_hit(Hit(chunk_id=i, doc_id=e.doc_id, section=e.section,
                               section_title=e.section_title, text=e.text, kb=e.kb), e.step,
                           e.sub_question, e.confirmed)
        ctx.ledger = ledger
        made = self._placement
        return PlacementEvent(places=[p.to_dict() for p in made.places] if made else [],
                              given_up=made.given_up if made else [])

    def _keep_single_shot(self, ctx: RunContext, ordered: list[Evidence]) -> list[Evidence]:
        """Single-shot's first documents keep their places, save those the placement policy
        gives up (agent/placement.py) to documents the run reached through a hop; a
        single-shot document the run did not keep stays as unconfirmed evidence (its best
        passage of that search): it counts for retrieval, never as support."""
        single = self._single_docs
        if not single:
            return ordered
        by_doc: dict[str, list[Evidence]] = {}
        for e in ordered:
            by_doc.setdefault(e.doc_id, []).append(e)
        self._placement = placement.place(
            single, list(by_doc), self._reached, self._doc_score,
            {e.doc_id for e in ordered if e.confirmed}, policy=placement.DEFAULT_POLICY)
        out: list[Evidence] = []
        step = ctx.ledger.items[0].step if ctx.ledger.items else 1
        for d in self._placement.order:
            if d in by_doc:
                out.extend(by_doc[d])
            else:
                hit = next(h for h in self._single_hits if h.doc_id == d)
                out.append(Evidence(n=0, doc_id=d, section=hit.section,
                                    section_title=hit.section_title, text=hit.text,
                                    step=step, sub_question=WHOLE_QUESTION, confirmed=False,
                                    kb=hit.kb))
        return out

    def _open_parts(self, ctx: RunContext, parts: list[Part], whole: Part) -> Steps[None]:
        """Which parts single-shot's documents leave open: its search graded against the
        part keeps nothing. A part they answer (the grader says enough) needs no search of
        its own (DEPTH_FOLLOWS_PARTS): what single-shot found for it joins the evidence, and
        the run spends no step on it."""
        for part in parts:
            if part is whole:
                covered = bool(whole.last_grade and whole.last_grade.kept)
                if not covered:
                    self._open.add(part.index)
                continue
            grade = self.grader.grade(part.question, self._single_hits)
            if not grade.kept:
                self._open.add(part.index)
            elif DEPTH_FOLLOWS_PARTS and grade.enough:
                part.last_grade = grade
                part.tried.append(part.question)
                part.first_hits = self._single_hits
                document_scores(grade, into=self._doc_score)
                for h in grade.kept:
                    self._rank(ctx.ledger.add_hit(h, 1, part.index), h.grade_score or 0.0)
                    part.kept.append(h)
                yield grade_event(part.question, part.index, self._single_hits, grade)

    def _follow_up(self, ctx: RunContext, part: Part) -> Steps[bool]:
        """One more step for a part that is not answered yet: fetch a pointer, else re-query."""
        if (yield from self._fetch_one(ctx, part)):
            return True
        grade = part.last_grade
        if grade is None:
            return False
        if not grade.kept and part.kept:
            # a re-query that found nothing leaves the gap as it was: rewrite from what the
            # part has kept so far (its bridge names), not from an empty result
            grade = Grade(list(part.kept), [], False, part.gap or grade.missing,
                          grade.next_query)
        query = self.rewriter.rewrite(part.question, grade, part.tried)
        yield RewriteEvent(sub_question=part.index, missing=grade.missing,
                           query=query)
        if not query or query.lower() in (t.lower() for t in part.tried):
            part.exhausted = True
            return False
        gap = gap_size(grade.missing, self.reading)
        yield from self._search(ctx, part, query, reason="re-query from the grader's gap")
        after = part.last_grade
        if not part.enough and (after is None or gap_size(after.missing, self.reading) >= gap):
            # the gap's own query did not narrow the gap: no reason is left to search again
            part.exhausted = True
        return True

    def gather(self, ctx: RunContext) -> Steps[Gathered]:
        # step 1 was single-shot's own search (the whole question, single-shot's depth,
        # `place_first`): the run starts from the evidence single-shot would answer from
        parts = self._parts
        yield from self._open_parts(ctx, parts, self._whole)
        # every other part gets its first search before any part gets a second
        for part in parts:
            if ctx.tool_steps_left and not part.tried:
                yield from self._search(ctx, part, part.question)
        # then what the question names outright and the searches did not bring
        for part in parts:
            if ctx.tool_steps_left:
                yield from self._fetch_named(ctx, part)
        # then follow-ups round-robin for the parts not answered yet, while steps remain
        progressed = True
        while ctx.tool_steps_left and progressed:
            progressed = False
            for part in parts:
                if ctx.tool_steps_left and not part.enough and not part.exhausted:
                    progressed = (yield from self._follow_up(ctx, part)) or progressed
        for part in parts:
            self._add_nearest(ctx, part)
        yield self._final_evidence(ctx)
        unanswered = [p for p in parts if not p.enough]
        # the ceiling stopped work that could have gone on
        work_left = bool(unanswered) and not any(p.exhausted for p in unanswered)
        return Gathered([p.question for p in parts], work_left=work_left)
