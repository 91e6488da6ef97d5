"""What one run uses, measured as it goes, and the check that stops it at a cap or a cancel.

`Meter` wraps the model client and counts calls and tokens; `RunGuard` is the runner's `should_stop`
hook, asked before every model call and tool call: it stops the run when its tokens reach the run's
cap (or what is left of the installation's monthly budget), when its wall time reaches the time cap,
or when someone cancelled it with `/beam cancel` (read from the run's row, so a cancel posted to any
process reaches the worker running it).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from bot.app.limits.policy import Limits, Policy, Prices, effective
from bot.app.repo_config import RepoLimits
from bot.app.runs import render
from bot.beam.completion import Completion, CompletionClient, completion_call
from bot.beam.tools import ToolSpec
from bot.beam.types import AgentInput, TokenUsage

if (
    TYPE_CHECKING
):  # the database's side (SQLAlchemy) is imported where a store is opened, not by `beam-bot run`
    from bot.app.jobs.store import Store
    from bot.app.limits.ledger import Ledger


class Meter:
    """A `CompletionClient` that passes every call on and counts what the server said it used."""

    def __init__(self, inner: CompletionClient) -> None:
        self.inner = inner
        self._complete_for = completion_call(inner)
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        # The model asked for, until a completion names the one that answered: a review answered as
        # structured output alone would otherwise be signed "model `unknown`".
        named = getattr(inner, "model", None)
        self.model: str | None = named if isinstance(named, str) and named else None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def token_usage(self) -> TokenUsage:
        """Every call of the run in the framework's shape (a run's row, `run review --json`): unlike an
        agent result's usage, it has the votes, the check of each finding and structured answers."""
        return TokenUsage(
            prompt_tokens=self.input_tokens, completion_tokens=self.output_tokens, total_tokens=self.tokens
        )

    def count_cut(self, prompt_tokens: int) -> None:
        """A call stopped before it answered (a `/beam cancel` or a time cap while the model wrote): no
        usage comes back from it, yet the server read its prompt and bills it. It counts as a call with
        `prompt_tokens` as the caller estimated them; its output, never received, is not known."""
        self.calls += 1
        self.input_tokens += max(0, prompt_tokens)

    def _count(self, completion: Completion) -> Completion:
        self.calls += 1
        if completion.usage is not None:
            self.input_tokens += completion.usage.prompt_tokens
            self.output_tokens += completion.usage.completion_tokens
        self.model = completion.model or self.model
        return completion

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Completion:
        return self._count(await self.inner.complete(messages, tools))

    async def complete_for(
        self, input: AgentInput, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> Completion:
        return self._count(await self._complete_for(input, messages, tools))

    def structured_ok(self) -> bool:
        ok = getattr(self.inner, "structured_ok", None)
        return bool(ok()) if ok is not None else False

    async def complete_structured(
        self, messages: list[dict[str, Any]], schema: dict[str, Any], *, name: str = "review"
    ) -> Any | None:
        """The inner client's structured answer (None where it has none), its tokens counted here
        like any other call's, so the run's caps see a structured review, a vote and a verification
        as they see the tool loop."""
        ask = getattr(self.inner, "complete_structured", None)
        if ask is None:
            return None
        answered: list[TokenUsage] = []
        try:
            return await ask(messages, schema, name=name, on_usage=answered.append)
        finally:
            for usage in answered:
                self.calls += 1
                self.input_tokens += usage.prompt_tokens
                self.output_tokens += usage.completion_tokens


@dataclass(frozen=True, slots=True)
class Stop:
    """Why a run stopped early: a limit (its setting name and value), or a cancel (`by`)."""

    limit: str | None = None
    value: float = 0
    by: str | None = None


class RunGuard:
    """The runner's stop hook for one run."""

    def __init__(
        self,
        meter: Meter,
        limits: Limits,
        *,
        month_used: int,
        cancelled_by: Callable[[], Awaitable[str | None]],
        clock: Callable[[], float] = time.monotonic,
        started: float | None = None,
    ) -> None:
        self.meter = meter
        self.limits = limits
        self.month_used = month_used
        self.cancelled_by = cancelled_by
        self.clock = clock
        self.started = clock() if started is None else started
        self.stop: Stop | None = None

    async def __call__(self) -> str | None:
        self.stop = await self._check()
        if self.stop is None:
            return None
        return f"cancelled by {self.stop.by}" if self.stop.by else f"limit {self.stop.limit}"

    async def _check(self) -> Stop | None:
        by = await self.cancelled_by()
        if by is not None:
            return Stop(by=by)
        limits, used = self.limits, self.meter.tokens
        if limits.max_tokens_per_run is not None and used >= limits.max_tokens_per_run:
            return Stop("max_tokens_per_run", limits.max_tokens_per_run)
        budget = limits.tokens_per_installation_per_month
        if budget is not None and self.month_used + used >= budget:
            return Stop("tokens_per_installation_per_month", budget)
        minutes = limits.max_minutes_per_run
        if minutes is not None and self.clock() - self.started >= minutes * 60:
            return Stop("max_minutes_per_run", minutes)
        return None

    def before_call(self, prompt_tokens: int) -> Stop | None:
        """The token cap a call with a prompt of about `prompt_tokens` would reach. The guard is asked
        before each step, so a run of one call (an answer in a review thread) would otherwise never
        meet its cap: its only step starts at zero tokens, however large its prompt."""
        limits, used = self.limits, self.meter.tokens + prompt_tokens
        if limits.max_tokens_per_run is not None and used >= limits.max_tokens_per_run:
            return Stop("max_tokens_per_run", limits.max_tokens_per_run)
        budget = limits.tokens_per_installation_per_month
        if budget is not None and self.month_used + used >= budget:
            return Stop("tokens_per_installation_per_month", budget)
        return None


def stopped_outcome(stop: Stop, text: str) -> dict[str, Any]:
    """The fields of a stopped run's outcome: what the model had said, and the cap's note or the
    canceller."""
    if stop.by is not None:
        return {"answer": text, "cancelled_by": stop.by}
    assert stop.limit is not None
    return {"answer": text or render.NOTHING_YET, "notes": [render.stopped_note(stop.limit, stop.value)]}


class RunDepsLike(Protocol):
    """What `RunUsage` reads of `runs.run.RunDeps`."""

    @property
    def llm(self) -> CompletionClient: ...
    @property
    def store(self) -> Store: ...
    @property
    def policy(self) -> Policy: ...


class RunUsage:
    """A run's meter, guard and bookkeeping, made when its agent starts.

    A local run (`beam-bot run`) has no `ledger`: nothing is recorded, no one can cancel it, and it
    counts against no installation's monthly budget; every other limit holds as on GitHub.
    """

    def __init__(
        self,
        llm: CompletionClient,
        ledger: Ledger | None,
        run_id: str,
        installation_id: int,
        policy: Policy,
        started: float,
    ) -> None:
        self.meter = Meter(llm)
        self.ledger = ledger
        self.run_id = run_id
        self.installation_id = installation_id
        self.policy = policy
        self.prices: Prices = policy.prices
        self.started = started
        self.guard: RunGuard | None = None

    @classmethod
    def for_run(cls, deps: RunDepsLike, run_id: str, installation_id: int, started: float) -> RunUsage:
        from bot.app.limits.ledger import Ledger  # the App's path only: a run with a store

        return cls(deps.llm, Ledger(deps.store), run_id, installation_id, deps.policy, started)

    async def arm(self, repo_limits: RepoLimits) -> RunGuard:
        """The stop hook for this run, under the server's limits as the repository lowered them."""
        limits = effective(self.policy.limits, repo_limits)
        ledger = self.ledger
        month_used = 0
        if ledger is None:
            limits = replace(limits, tokens_per_installation_per_month=None)
        elif limits.tokens_per_installation_per_month is not None:
            month_used = await ledger.month_tokens(self.installation_id)

        async def cancelled_by() -> str | None:
            return None if ledger is None else await ledger.cancelled_by(self.run_id)

        self.guard = RunGuard(
            self.meter, limits, month_used=month_used, cancelled_by=cancelled_by, started=self.started
        )
        return self.guard

    def summary(self, tool_steps: int) -> render.Usage:
        meter = self.meter
        return render.Usage(
            model=meter.model,
            input_tokens=meter.input_tokens,
            output_tokens=meter.output_tokens,
            model_calls=meter.calls,
            tool_steps=tool_steps,
            seconds=time.monotonic() - self.started,
            cost=self.prices.cost(meter.input_tokens, meter.output_tokens),
        )

    async def record(self) -> None:
        if self.ledger is None:
            return
        await self.ledger.record_usage(
            self.run_id, self.installation_id, self.meter.input_tokens, self.meter.output_tokens
        )
