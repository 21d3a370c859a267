"""Search: words looked for in this conversation's own record, for the model (wisp-memory-tool.txt, "recall").

The reference document says a request with no verb is a recall; a recall
of words that name no target (``recall port 8437``, ``recall gateway
error``, bare ``port 8437``) finds where they were said. It searches the
store's full-text index (SQLite FTS5, :meth:`wisp.core.store.Store.search`,
the same index and rules as the person's ``/search``): prompts, replies,
tool calls with their arguments, tool outputs, and the earlier versions of
turns a ``/retry`` or ``/edit`` replaced (marked as such). The running
turn is left out (the model has it whole), and so are the memory tool's
own calls and results (a search would find itself).

Ranking is bm25, the best match first. Every word must match (as a word
prefix, any case, accents ignored); when no entry holds every word, the
entries holding some of them are given, best first, and the header says so.
Small words (``the``, ``what``, ``did``) are dropped from the query when
other words remain, so a question's own words make a search.

Each hit names its entry, its turn and what it was, then its matching lines
with one line either side, in the numbering ``recall entry N from line K``
uses (:mod:`.paging`: ``K<TAB>text``, a read_file line keeping its own
number after it), so that a recall from that line lands on it::

    search "port 8437": best match first, hits 1–2
    entry 7, turn 3: the person's prompt
    2	We moved the service last week.
    3	The service listens on port 8437.
    4	Keep that in mind.
    entry 12, turn 5: read_file of service.toml
    …
    [more: memory "recall port 8437 from hit 3"]

A page holds the hits that fit the token budget (always at least one); a
page that is not the last ends with the ``[more: …]`` line of the next.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..text import _SEARCH_WORD as _SEARCH_WORD_RE, fold, folded_words, search_words
from ..tokens import estimate_tokens
from .paging import EOF_MARK, split_stored_lines
from .recall import END, Recalled, _call_arguments, _range, _source_word, load_entry
from .request import Target

__all__ = ["search", "query_words", "describe_hit", "matching_lines", "STOP_WORDS", "MAX_LINES_PER_HIT",
           "LINE_CHARS", "MAX_HITS", "more_request"]

#: Words dropped from a search when other words remain (what a question is made of, not what it asks about).
STOP_WORDS = frozenset("""
a an and are as at be been by can could did do does for from had has have how i in into is it its me my
of on or our please recall search show tell that the their them then there these this those to us was we
were what when where which who why will with would you your about any now currently today also ever still
""".split())
#: Matching lines shown per hit, each with one line either side.
MAX_LINES_PER_HIT = 3
#: A shown line longer than this many characters is shown around its match.
LINE_CHARS = 240
#: Hits one page reads at most (a page shows those of them that fit its budget).
MAX_HITS = 12
#: The argument a tool call is named by, in this order (else its first text argument).
_ARG_KEYS = ("path", "command", "request", "query", "url", "name", "file")


#: A word's own query reads at most this many hits when the words are weighed (a word held by more is common).
WEIGH_LIMIT = 500
#: An identifier in the search (``SVC5807``, ``pool_size``, ``v2.4``) counts this many times a word.
IDENTIFIER_WEIGHT = 2.0


def _is_identifier(word: str) -> bool:
    return any(c.isdigit() or c in "_." for c in word) or any(c.isupper() for c in word[1:])
_SUFFIXES = ("ing", "ies", "ied", "es", "ed", "s")


def stem_term(word: str) -> str:
    """The prefix a search word is looked for by: the word without an
    English inflection (``owns`` → ``own``, ``deploys`` → ``deploy``,
    ``caused`` → ``caus``, ``timeouts`` → ``timeout``), so that a question's
    form of a word finds the record's (a prefix term then finds them all).
    Words of four letters or fewer, and those with a digit, stay as they are."""
    low = word.lower()
    if len(low) <= 4 or any(c.isdigit() for c in low):
        return word
    for suffix in _SUFFIXES:
        if low.endswith(suffix) and len(low) - len(suffix) >= 3 and not low.endswith("ss"):
            return word[: len(word) - len(suffix)]
    return word


#: How many of the best hits are read again with their words in hand (:func:`read_for`).
RERANK = 60
#: Words found within this many words of each other count again, as the line that answers would.
NEAR_WORDS = 12
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def word_parts(word: str) -> list[str]:
    """A word and, when it is compound, its parts, folded: ``RuntimeError`` →
    runtimeerror, runtime, error; ``test_ingest`` → test_ingest, test,
    ingest; ``HTTPServer`` → httpserver, http, server. A question says
    "error" where a log says ``ValueError``."""
    out = [fold(word)]
    for piece in word.split("_"):
        for part in _PART.findall(piece) or [piece]:
            f = fold(part)
            if f and f not in out:
                out.append(f)
    return out


def read_for(text: str, words: list[str],
             weights: dict[str, tuple[float, float]]) -> tuple[dict[str, float], float]:
    """How ``text`` holds the search ``words``: ``found`` (word → its weight:
    ``weights[word][0]`` when a word of the text or a part of one is the
    word, ``weights[word][1]`` when it only begins with the word's
    :func:`stem_term`), and ``near``: the largest sum of the weights of
    distinct words found within :data:`NEAR_WORDS` words of each other (0
    when fewer than two are). Reads at most 200,000 characters."""
    tokens = _SEARCH_WORD_RE.findall(text[:200_000])
    wanted = [(w, fold(w), fold(stem_term(w))) for w in words]
    found: dict[str, float] = {}
    spots: list[tuple[int, str, float]] = []
    for i, token in enumerate(tokens):
        parts = word_parts(token)
        for w, exact, stem in wanted:
            whole, loose = weights.get(w, (1.0, 0.8))
            m = whole if exact in parts else loose if any(p.startswith(stem) for p in parts) else 0.0
            if m:
                found[w] = max(found.get(w, 0.0), m)
                spots.append((i, w, m))
    near = 0.0
    start = 0
    for end in range(len(spots)):
        while spots[end][0] - spots[start][0] >= NEAR_WORDS:
            start += 1
        best: dict[str, float] = {}
        for _, w, m in spots[start:end + 1]:
            best[w] = max(best.get(w, 0.0), m)
        if len(best) > 1:
            near = max(near, sum(best.values()))
    return found, near


async def ranked_hits(store: Any, conversation: int, words: list[str],
                      current_turn: int | None) -> tuple[list[Any], bool]:
    """Every entry holding any of ``words`` (each as written, or its
    :func:`stem_term` prefix), best first, and whether the best holds only
    some of them.

    An entry is ranked by the summed rarity of the distinct words it holds
    (the inverse document frequency over this conversation's entries: a
    word few entries hold says more than a word many hold; a stem's match
    counts 0.8 of it, an identifier's :data:`IDENTIFIER_WEIGHT` times). The
    best :data:`RERANK` are then read again (:func:`read_for`): a part of a
    compound word counts as the word (``error`` in ``RuntimeError``), and the
    words found close together count a second time, so the line that holds
    the question's words together (``FAILED tests/…test_ingest.py … Error``)
    comes before a long text where they lie scattered. Ties go newest first
    (a correction made later comes before what it corrected), then by bm25.
    Two FTS5 queries a word (at most :data:`~wisp.core.text.MAX_SEARCH_WORDS`
    words), each reading at most :data:`WEIGH_LIMIT` hits, and at most
    :data:`RERANK` entries read."""
    import math

    words = list(dict.fromkeys(w for w in words if w))
    common = dict(conversation_id=conversation, order="rank", skip_turn=current_turn)
    if not words:
        return [], False
    counts = await store.conversation_counts(conversation)
    total = max(1, int(counts.get("entries") or 0))
    score: dict[int, float] = {}
    rank: dict[int, float] = {}
    held: dict[int, int] = {}
    first: dict[int, Any] = {}
    weights: dict[str, tuple[float, float]] = {}

    def rarity(n: int) -> float:
        return math.log((total + 1) / (n + 0.5)) + 0.1

    for word in words:
        # the word as written, and its stem as a prefix (worth a little less: it also finds other words);
        # an identifier (a digit, an underscore, a dot, a capital inside) says more than a word
        exact = await store.search(word, limit=WEIGH_LIMIT, prefix=False, **common)
        stem = stem_term(word)
        loose = await store.search(stem, limit=WEIGH_LIMIT, **common)
        boost = IDENTIFIER_WEIGHT if _is_identifier(word) else 1.0
        weights[word] = (rarity(len(exact)) * boost, rarity(len(loose)) * boost * 0.8)
        best: dict[int, float] = {}
        for hits, weight in ((exact, rarity(len(exact)) * boost), (loose, rarity(len(loose)) * boost * 0.8)):
            for h in hits:
                first.setdefault(h.entry, h)
                best[h.entry] = max(best.get(h.entry, 0.0), weight)
                rank[h.entry] = rank.get(h.entry, 0.0) + h.rank
        for entry, weight in best.items():
            score[entry] = score.get(entry, 0.0) + weight
            held[entry] = held.get(entry, 0) + 1
    order = sorted(first, key=lambda e: (-round(score[e], 6), -e, rank[e]))
    for e in order[:RERANK]:
        got = await store.get_entry(conversation, e)
        if got is None:
            continue
        args = json.dumps(got.arguments, ensure_ascii=False) if got.arguments else ""
        found, near = read_for(f"{got.content or ''} {got.tool_name or ''} {args}", words, weights)
        score[e] = max(score[e], sum(found.values())) + near
        held[e] = max(held[e], len(found))
    order = sorted(first, key=lambda e: (-round(score[e], 6), -e, rank[e]))
    any_word = bool(order) and held[order[0]] < len(words)
    return [first[e] for e in order], any_word


def query_words(text: str) -> list[str]:
    """The words a search looks for: those of ``text``
    (:func:`wisp.core.text.search_words`), without :data:`STOP_WORDS`
    unless nothing else is left."""
    words = search_words(text)
    kept = [w for w in words if fold(w) not in STOP_WORDS]
    return kept or words


def _argument(arguments: Any) -> str | None:
    """The argument a call is named by: ``service.toml``, ``"pytest -q"``."""
    if not isinstance(arguments, dict) or not arguments:
        return None
    value = next((arguments[k] for k in _ARG_KEYS if isinstance(arguments.get(k), str)), None)
    if value is None:
        value = next((v for v in arguments.values() if isinstance(v, str)), None)
    if value is None:
        return None
    value = " ".join(value.split())
    if len(value) > 80:
        value = value[:79] + "…"
    return value if value and not re.search(r"\s", value) and '"' not in value else json.dumps(value,
                                                                                            ensure_ascii=False)


def describe_hit(kind: str, tool_name: str | None, arguments: Any) -> str:
    """What an entry was, for a hit: ``the person's prompt``, ``your reply``,
    ``read_file of service.toml`` (an output), ``run_command call of
    "pytest -q"`` (a call)."""
    if kind == "prompt":
        return "the person's prompt"
    if kind == "reply":
        return "your reply"
    tool = tool_name or "a tool"
    arg = _argument(arguments)
    what = f"{tool} call" if kind == "tool_call" else tool
    return f"{what} of {arg}" if arg else (what if kind == "tool_call" else f"{tool} output")


def _matches(line: str, words: list[str]) -> set[str]:
    """The query ``words`` (folded) that begin a word of ``line``."""
    if not line:
        return set()
    have = folded_words(line)
    return {w for w in words if any(h.startswith(w) for h in have)}


def matching_lines(lines: list[str], words: list[str], limit: int = MAX_LINES_PER_HIT) -> list[int]:
    """The 1-based numbers of the (at most ``limit``) lines of ``lines``
    that hold the most of ``words`` (folded), in line order; the first line
    when none holds any (the entry matched on its tool's name or
    arguments)."""
    folded = [fold(w) for w in words]
    scored = []
    for k, line in enumerate(lines, 1):
        found = _matches(line[:20000], folded)
        if found:
            scored.append((-len(found), k))
    if not scored:
        return [1] if lines else []
    best = sorted(scored)[:limit]
    return sorted(k for _, k in best)


def _excerpt(number: int, line: str, words: list[str]) -> str:
    """Line ``number`` as a hit shows it: ``K<TAB>text`` (a line that already
    starts with its number and a tab, read_file's, as it is), a long line
    cut to :data:`LINE_CHARS` characters around its first match."""
    prefix = f"{number}\t"
    if len(line) > LINE_CHARS:
        low = line.lower()
        at = min((p for p in (low.find(w.lower()) for w in words) if p >= 0), default=0)
        start = max(0, at - LINE_CHARS // 3)
        end = min(len(line), start + LINE_CHARS)
        line = ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "") + \
            f" [line {number}: {len(line):,} characters]"
        return prefix + line
    return line if line.startswith(prefix) else prefix + line


def _hit_lines(lines: list[str], words: list[str], max_lines: int, around: int) -> list[str]:
    """The shown lines of one hit: each matching line with ``around`` lines
    either side, runs merged, ``…`` between runs that are apart."""
    keep: set[int] = set()
    for k in matching_lines(lines, words, max_lines):
        keep |= set(range(max(1, k - around), min(len(lines), k + around) + 1))
    out: list[str] = []
    last = 0
    for k in sorted(keep):
        if last and k > last + 1:
            out.append("…")
        shown = lines[k - 1]
        out.append(shown if k == len(lines) and shown == EOF_MARK else _excerpt(k, shown, words))
        last = k
    return out


def more_request(words: str, from_hit: int) -> str:
    """The request of the page from hit ``from_hit``: ``recall WORDS from hit
    K``, or ``search WORDS from hit K`` when the words would read as a
    target after recall (``fact x``)."""
    from .request import RequestError, parse_request

    request = f"recall {words} from hit {from_hit}"
    try:
        target = parse_request(request).target
    except RequestError:
        target = None
    if target is not None and target.kind == "search" and target.from_hit == from_hit:
        return request
    return f"search {words} from hit {from_hit}"


async def search(store: Any, audit: Any, conversation: int, target: Target, *, current_turn: int | None,
                 budget_tokens: int) -> Recalled:
    """The page of hits for ``target`` (kind ``search``: its words in
    ``name``, the first hit of the page in ``from_hit``) within
    ``budget_tokens`` (see the module doc)."""
    asked = " ".join(search_words(target.name or ""))
    words = query_words(asked)
    text = " ".join(words)
    start = target.from_hit or 1
    what: dict[str, Any] = {"kind": "search", "words": asked, "query": text, "from_hit": start}
    ranked, any_word = await ranked_hits(store, conversation, words, current_turn)
    what["any_word"] = any_word
    hits = ranked[start - 1:start - 1 + MAX_HITS + 1]
    if not hits:
        r = Recalled("", what, found=False)
        if start > 1:
            r.text = (f'memory: the search for "{asked}" has fewer than {start} hits; '
                      f'memory "recall {asked}" shows the first of them')
        else:
            before = " before this turn" if current_turn is not None else ""
            r.text = (f'memory: nothing in this conversation{before} holds "{asked}" (prompts, replies, tool '
                      f"calls and outputs were searched); {await _range(store, conversation, current_turn)}; a recall names "
                      "entry N, turn N, task, fact NAME or summary, and other verbs are note, task, summarise, "
                      "condense and memories")
        return r
    how = ("no entry holds every word; entries holding some of them, best match first" if any_word
           else "best match first")
    r = Recalled("", what)
    used = estimate_tokens(f'search "{asked}": {how}, hits {start}–{start + MAX_HITS}') + 20
    terms = [stem_term(w) for w in words]
    # first every hit that fits by its head and its best line, so one long hit never takes the whole
    # page; then, in order, each hit grows to its matching lines with one line either side
    heads: list[tuple[str, list[str], Any, Any]] = []
    for hit in hits[:MAX_HITS]:
        got = await load_entry(store, audit, conversation, hit.entry)
        content = got.content if got is not None else ""
        lines = split_stored_lines(content)
        arguments = hit.arguments
        extra = ""
        if got is not None and hit.kind == "tool_result":
            arguments = await _call_arguments(store, conversation, got.entry)
        elif got is not None and hit.kind == "tool_call" and got.entry.turn_id is not None:
            out = next((e.number for e in await store.entries(conversation, got.entry.turn_id)
                        if e.kind == "tool_result" and e.tool_call_id == hit.tool_call_id), None)
            extra = f" (its output: entry {out})" if out is not None else ""
        where = f", turn {hit.turn}" if hit.turn is not None else ""
        if not hit.current:
            where += f", an earlier version (turn {hit.superseded_by} asked it again)"
        heads.append((f"entry {hit.entry}{where}: {describe_hit(hit.kind, hit.tool_name, arguments)}{extra}",
                      lines, hit, got))
    blocks: list[list[str]] = []
    costs: list[int] = []
    next_hit: int | None = None
    for i, (head, lines, hit, got) in enumerate(heads):
        block = [head, *_hit_lines(lines, terms, 1, 0)]
        cost = sum(estimate_tokens(x) + 1 for x in block)
        if blocks and used + cost > budget_tokens:
            next_hit = start + i
            break
        blocks.append(block)
        costs.append(cost)
        used += cost
        r.entries.append(hit.entry)
        if got is not None:
            r.sources.append(_source_word(got.source))
            if got.source.endswith("audit log") and got.entry.audit_event_id:
                r.audit_events.append(got.entry.audit_event_id)
    else:
        if len(hits) > MAX_HITS:
            next_hit = start + MAX_HITS
    for i, block in enumerate(blocks):
        head, lines, _, _ = heads[i]
        for max_lines, around in ((MAX_LINES_PER_HIT, 1), (1, 1)):
            wider = [head, *_hit_lines(lines, terms, max_lines, around)]
            cost = sum(estimate_tokens(x) + 1 for x in wider)
            if used - costs[i] + cost <= budget_tokens:
                used += cost - costs[i]
                blocks[i], costs[i] = wider, cost
                break
    shown = len(blocks)
    span = f"hit {start}" if shown == 1 else f"hits {start}–{start + shown - 1}"
    out = [f'search "{asked}": {how}, {span}']
    for block in blocks:
        out.extend(block)
    if next_hit is not None:
        out.append(f'[more: memory "{more_request(asked, next_hit)}"]')
        what["next_hit"] = next_hit
    else:
        out.append(END)
    r.text = "\n".join(out)
    return r
