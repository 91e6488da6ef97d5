"""The daily roll-ups equal the raw rows after a mix of real writes (runs created, started and ended,
findings posted, fixed, dismissed and reopened, retention pruning), on SQLite and PostgreSQL; the
dashboard's figures read through them equal figures computed here from every raw row; and the
upgrade to v12 fills them from the rows already there."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from typing import Any

import pytest
from sqlalchemy import select, text, update

from bot.app.dashboard import repo_queries
from bot.app.dashboard.installation_queries import installation_figures
from bot.app.dashboard.repo_queries import repo_figures
from bot.app.dashboard.spans import Span
from bot.app.jobs import rollups
from bot.app.jobs.retention import prune
from bot.app.jobs.schema import finding_days, pull_totals, review_findings, run_days, runs, schema_version
from bot.app.jobs.store import Store
from bot.app.reviews.ledger import FindingsLedger, Posted
from tests.support.db import FakeClock, opened

pytestmark = pytest.mark.anyio
REPOS = ("octo-org/widgets", "octo-org/gadgets", "solo/tool")
SKILLS = ("review", "author", "summarize")
HOUR = 3600.0


async def _mixed_writes(store: Store, clock: FakeClock, seed: int = 44) -> None:
    """About four months of activity through the store's and the ledger's own writes."""
    rng = random.Random(seed)
    ledger = FindingsLedger(store)
    started: list[str] = []
    comment = 0
    for _ in range(260):
        clock.advance(rng.random() * 13 * HOUR)
        repo, number = rng.choice(REPOS), rng.randrange(1, 9)
        run = await store.create_run(
            repo=repo, number=number, skill=rng.choice(SKILLS), requester="octocat", installation_id=7
        )
        if rng.random() < 0.8:
            await store.update_run(run, status="running", started_at=clock())
            started.append(run)
        if started and rng.random() < 0.7:
            ending = started.pop(rng.randrange(len(started)))
            await store.update_run(
                ending,
                status=rng.choice(("succeeded", "succeeded", "failed", "cancelled")),
                finished_at=clock() + rng.randrange(1, 90_000) / 1000 + 0.0001,
                input_tokens=rng.randrange(0, 50_000),
                output_tokens=rng.randrange(0, 5_000),
            )
        if rng.random() < 0.5:
            posted = []
            for _ in range(rng.randrange(1, 4)):
                comment += 1
                posted.append(Posted(comment, "a.py", 1, "x = 1", "a claim", "warning", "a" * 40))
            await ledger.record(repo, number, posted)
        if rng.random() < 0.4:
            findings = await ledger.of_pull(repo, number)
            if findings:
                finding = rng.choice(findings)
                move = rng.random()
                if move < 0.4:
                    await ledger.fix(finding.id, "b" * 40)
                elif move < 0.7:
                    await ledger.dismiss(finding.id, "reaction", "octocat")
                elif finding.state != "open":  # reopened: its pull request's author asked again
                    async with store.write() as conn:
                        await conn.execute(
                            update(review_findings)
                            .where(review_findings.c.id == finding.id)
                            .values(state="open", reason=None, by=None, updated_at=clock())
                        )
                else:
                    await ledger.set_etag(finding.id, f'W/"{rng.random()}"')  # moves nothing
    await prune(store, 100)  # retention removes the oldest finished runs


async def _raw_rollups(store: Store) -> tuple[dict[Any, list[int]], dict[Any, list[int]]]:
    """What the roll-ups should hold, summed here from every raw row."""
    async with store.read() as conn:
        run_rows = (await conn.execute(select(runs))).mappings().all()
        finding_rows = (await conn.execute(select(review_findings))).mappings().all()
    run_sums: dict[Any, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for r in run_rows:
        key = (r["repo"], rollups.day_of(r["created_at"]), r["skill"], r["status"], r["installation_id"] or 0)
        timed = r["started_at"] is not None and r["finished_at"] is not None
        ms = round((r["finished_at"] - r["started_at"]) * 1000) if timed else 0
        for i, v in enumerate((1, int(timed), ms, r["input_tokens"] or 0, r["output_tokens"] or 0)):
            run_sums[key][i] += v
    finding_sums: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
    for f in finding_rows:
        finding_sums[(f["repo"], rollups.day_of(f["created_at"]), f["state"].lower())][0] += 1
        if f["state"] in ("fixed", "dismissed"):
            finding_sums[(f["repo"], rollups.day_of(f["updated_at"]), f["state"])][1] += 1
    return dict(run_sums), dict(finding_sums)


async def _stored_rollups(store: Store) -> tuple[dict[Any, list[int]], dict[Any, list[int]]]:
    async with store.read() as conn:
        stored_runs = (await conn.execute(select(run_days))).all()
        stored_findings = (await conn.execute(select(finding_days))).all()
    return (
        {tuple(row[:5]): [int(v) for v in row[5:]] for row in stored_runs},
        {tuple(row[:3]): [int(v) for v in row[3:]] for row in stored_findings},
    )


async def test_the_rollups_equal_the_raw_rows_after_mixed_writes(
    clocked_store: Store, fake_clock: FakeClock
) -> None:
    await _mixed_writes(clocked_store, fake_clock)
    raw_runs, raw_findings = await _raw_rollups(clocked_store)
    stored_runs, stored_findings = await _stored_rollups(clocked_store)
    assert len(raw_runs) > 100 and sum(v[1] for v in raw_findings.values()) > 10  # the mix did happen
    assert stored_runs == raw_runs  # and no row fell to zero without being deleted
    assert stored_findings == raw_findings
    await _assert_pull_totals(clocked_store)


async def _assert_pull_totals(store: Store) -> None:
    """Each pull request's sums are exact; its times bound those of its runs left."""
    async with store.read() as conn:
        run_rows = (await conn.execute(select(runs))).mappings().all()
        stored = {(r.repo, r.number): r for r in (await conn.execute(select(pull_totals))).all()}
    want: dict[tuple[str, int], list[Any]] = {}
    for r in run_rows:
        item = want.setdefault((r["repo"], r["number"] or 0), [0, 0, 0, math.inf, -math.inf])
        item[0] += 1
        item[1] += r["input_tokens"] or 0
        item[2] += r["output_tokens"] or 0
        item[3] = min(item[3], r["created_at"])
        item[4] = max(item[4], r["created_at"])
    assert stored.keys() == want.keys()
    for key, (n, i, o, first, last) in want.items():
        row = stored[key]
        assert (row.runs, row.input_tokens, row.output_tokens) == (n, i, o)
        assert row.first_at <= first and row.last_at >= last


def _expected(run_rows: list[Any], finding_rows: list[Any], repo: str, span: Span) -> dict[str, Any]:
    """The repository page's span figures, from the raw rows alone."""
    week0 = span.week_start(0)
    groups: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0, 0, 0])
    weekly: Counter[int] = Counter()
    for r in run_rows:
        if r["repo"] != repo or r["created_at"] < span.since:
            continue
        g = groups[(r["skill"], r["status"])]
        timed = r["started_at"] is not None and r["finished_at"] is not None
        g[0] += 1
        g[1] += (r["finished_at"] - r["started_at"]) if timed else 0.0
        g[2] += int(timed)
        g[3] += r["input_tokens"] or 0
        g[4] += r["output_tokens"] or 0
        weekly[math.floor((r["created_at"] - week0) / (7 * 86400.0))] += 1
    states: Counter[str] = Counter()
    left: Counter[tuple[int, str]] = Counter()
    for f in finding_rows:
        if f["repo"] != repo:
            continue
        if f["created_at"] >= span.since:
            states[f["state"]] += 1
        if f["state"] in ("fixed", "dismissed") and f["updated_at"] >= span.since:
            left[(math.floor((f["updated_at"] - week0) / (7 * 86400.0)), f["state"])] += 1
    return {
        "groups": {k: v for k, v in sorted(groups.items())},
        "weekly_runs": [weekly[w] for w in range(span.weeks)],
        "findings": {s: states[s] for s in ("open", "fixed", "dismissed")},
        "weekly_findings": [(left[(w, "fixed")], left[(w, "dismissed")]) for w in range(span.weeks)],
        "pulls": sorted(
            ((-(i + o), n, c, i, o) for n, (c, i, o) in _pull_sums(run_rows, repo, span).items())
        ),
    }


def _pull_sums(run_rows: list[Any], repo: str, span: Span) -> dict[int, tuple[int, int, int]]:
    sums: dict[int, tuple[int, int, int]] = {}
    for r in run_rows:
        if r["repo"] == repo and r["created_at"] >= span.since:
            c, i, o = sums.get(r["number"] or 0, (0, 0, 0))
            sums[r["number"] or 0] = (c + 1, i + (r["input_tokens"] or 0), o + (r["output_tokens"] or 0))
    return sums


@pytest.mark.parametrize("few_pulls", [200, 0], ids=["straddling-by-number", "straddling-whole-span"])
async def test_the_page_through_the_rollups_equals_the_raw_figures(
    clocked_store: Store, fake_clock: FakeClock, few_pulls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repo_queries, "FEW_PULLS", few_pulls)
    await _mixed_writes(clocked_store, fake_clock)
    async with clocked_store.read() as conn:
        run_rows = list((await conn.execute(select(runs))).mappings().all())
        finding_rows = list((await conn.execute(select(review_findings))).mappings().all())
    end = fake_clock()
    # Requests at several times of day, so the span's and the weeks' edges cut days at different hours.
    for now in (end, end - 5.25 * HOUR, end - 19.5 * HOUR, end - 30 * 86400.0 + 77.0):
        for days in (7, 30, 90):
            span = Span(days, now)
            for repo in REPOS:
                figures = await repo_figures(clocked_store, repo, span)
                want = _expected(run_rows, finding_rows, repo, span)
                got_groups = {
                    (g.skill, g.status): [g.runs, g.seconds, g.timed, g.input_tokens, g.output_tokens]
                    for g in figures.runs
                }
                assert got_groups.keys() == want["groups"].keys()
                for key, values in want["groups"].items():
                    assert got_groups[key] == pytest.approx(values, abs=0.01), (now, days, repo, key)
                assert [w.runs for w in figures.weekly_tokens] == want["weekly_runs"]
                assert figures.findings == want["findings"]
                assert [(w.fixed, w.dismissed) for w in figures.weekly_findings] == want["weekly_findings"]
                assert figures.pull_count == len(want["pulls"])
                assert [
                    (
                        -(p.input_tokens + p.output_tokens),
                        p.number or 0,
                        p.runs,
                        p.input_tokens,
                        p.output_tokens,
                    )
                    for p in figures.pulls
                ] == want["pulls"][:20]
            installation = await installation_figures(clocked_store, span)
            by_repo = {r.repo: r for r in installation.repos}
            for repo in REPOS:
                want = _expected(run_rows, finding_rows, repo, span)
                summary = by_repo.get(repo)
                runs_n = sum(int(v[0]) for v in want["groups"].values())
                failed = sum(int(v[0]) for (_, status), v in want["groups"].items() if status == "failed")
                found = (summary.runs, summary.failed, summary.findings) if summary else (0, 0, 0)
                assert found == (runs_n, failed, sum(want["findings"].values())), (now, days, repo)


async def test_the_upgrade_to_v12_fills_the_rollups_from_existing_rows(db_url: str) -> None:
    clock = FakeClock()
    async with opened(db_url, clock) as store:
        await _mixed_writes(store, clock, seed=7)
        want = await _raw_rollups(store)
        async with store.write() as conn:  # a v11 database: no roll-ups, no triggers
            await conn.run_sync(rollups.drop_triggers)
            await conn.execute(text("DROP TABLE run_days"))
            await conn.execute(text("DROP TABLE pull_totals"))
            await conn.execute(text("DROP TABLE finding_days"))
            await conn.execute(schema_version.update().values(version=11))
    async with opened(db_url, clock) as store:
        assert await _stored_rollups(store) == want
        await _assert_pull_totals(store)
        # and the triggers are back: a new run lands in its day at once
        run = await store.create_run(repo="new/repo", number=1, skill="review", requester="x")
        await store.update_run(run, status="succeeded", input_tokens=5)
        stored_runs, _ = await _stored_rollups(store)
        assert stored_runs[("new/repo", rollups.day_of(clock()), "review", "succeeded", 0)] == [1, 0, 0, 5, 0]
