"""One episode of the method, as steps: `next_decision` → request → agent → `apply`.

`run_episode` loops over the steps for one task (what `solve` does); training advances many
episodes in lock step with the same functions. The rules of the method live here:

- the episode ends when a Verifier accepts, or at `max_turns` (verdict `turn_limit`);
- a Verifier chosen while no Worker answer exists ends it with verdict `no_answer`;
- a Thinker's ``<next_role>`` tag overrides the head's role for the next turn
  (`role_source` = "thinker");
- a malformed verdict is a rejection;
- the final answer is the latest Worker answer;
- an ACCEPT counts only when the answer parses (`ast.parse`, nothing run) and, given an
  execution check (`solve --tests`, or the problem's doctest examples or samples), passes
  it: otherwise the failure is appended to the Verifier's turn, the loop goes on, and an
  episode that ends with a failing answer (or one that does not parse, tests or not) is
  `tests_failed`;
- every attempt of an agent call, retries included, first reserves the call's worst case in
  the budget (`core.budget.CallSpend`); a refusal ends the episode with verdict `budget`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from trinity_cli.core.budget import Budget, CallSpend
from trinity_cli.core.coordinator import Coordinator, TurnStream
from trinity_cli.core.events import (
    CheckFinished,
    EpisodeFinished,
    EventSink,
    TextDelta,
    TurnFinished,
    TurnStarted,
    ignore,
)
from trinity_cli.core.head import Pick, Policy, TurnProbs, decide, role_at
from trinity_cli.core.provider import Prices, Provider, Reply, Request
from trinity_cli.core.records import CheckOutcome, Decision, EpisodeResult, Truncation, TurnRecord
from trinity_cli.core.roles import (
    COMPLETION_LEADS,
    ROLE_ORDER,
    Role,
    extract_code,
    parse_next_role,
    parse_verdict,
    syntax_error,
    system_prompt,
)
from trinity_cli.core.transcript import Problem, Transcript, Turn
from trinity_cli.core.verdicts import (
    ACCEPTED,
    BUDGET,
    INTERRUPTED,
    NO_ANSWER,
    PROVIDER_ERROR,
    TESTS_FAILED,
    TURN_LIMIT,
)
from trinity_cli.errors import BudgetExceeded, ProviderError

DEFAULT_MAX_TURNS = 5

CHECK_NOTE_CHARS = 800  # how much of a test failure the transcript keeps


AnswerCheck = Callable[[str], CheckOutcome]


@dataclass(frozen=True)
class Agent:
    """A pool member as the loop sees it: a provider plus what the budget needs."""

    name: str
    provider: Provider
    max_tokens: int
    prices: Prices = field(default_factory=Prices)
    # The reply is written on another machine: the coordinator can encode it as it streams, and
    # concurrent episodes overlap its waits, without slowing it (local models share our cores).
    remote: bool = False
    roles: frozenset[Role] = frozenset(ROLE_ORDER)  # the roles this agent may play

    def worst_case_usd(self, request: Request) -> float:
        return self.prices.usd(request.prompt_bytes(), self.max_tokens)


@dataclass
class EpisodeState:
    transcript: Transcript
    agent_names: tuple[str, ...]
    max_turns: int = DEFAULT_MAX_TURNS
    records: list[TurnRecord] = field(default_factory=list)
    role_override: Role | None = None
    verdict: str | None = None  # set when the episode ends
    error: str | None = None
    checked: dict[str, CheckOutcome | None] = field(default_factory=dict)  # answer → its check
    mask: np.ndarray | None = None  # (L, 3): which roles each agent may play; None: all

    @property
    def done(self) -> bool:
        return self.verdict is not None

    @property
    def next_turn(self) -> int:
        return len(self.records) + 1


def new_state(
    problem: Problem, agent_names: Sequence[str], max_turns: int = DEFAULT_MAX_TURNS,
    mask: np.ndarray | None = None,
) -> EpisodeState:
    if max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    return EpisodeState(Transcript(problem), tuple(agent_names), max_turns, mask=mask)


def role_mask(roles: Sequence[Collection[str]]) -> np.ndarray | None:
    """(L, 3) booleans: which roles each agent may play (Role values or their names); None
    when every agent plays all."""
    mask = np.array([[role.value in allowed for role in ROLE_ORDER] for allowed in roles])
    return None if mask.all() else mask


def next_decision(
    state: EpisodeState, coordinator: Coordinator | None, policy: Policy,
    draws: tuple[float, float] | None = None,
) -> Decision:
    """Read the transcript, ask the policy, choose (greedy, or with the two uniform draws)."""
    hidden, seconds, tokens, cut = None, 0.0, 0, None
    if policy.needs_hidden:
        if coordinator is None:
            raise ValueError("this policy needs a coordinator")
        encoding = coordinator.encode(state.transcript)
        hidden, seconds, tokens, cut = (
            encoding.hidden, encoding.seconds, encoding.tokens, encoding.input_truncated,
        )
    return decision_from(state, policy.choose(hidden, state.next_turn), draws, seconds, tokens, cut)


def step_from(
    state: EpisodeState, probs: TurnProbs, draws: tuple[float, float] | None = None
) -> Pick:
    """The turn's (agent, role) from the policy's probabilities: the mask, a Thinker's named role
    and greedy or sampled choice applied (`core.head.decide`). The forest (train/tree.py) takes
    only this of a decision."""
    forced = None if state.role_override is None else ROLE_ORDER.index(state.role_override)
    return decide(probs, state.mask, draws, forced)


def decision_from(
    state: EpisodeState, probs: TurnProbs, draws: tuple[float, float] | None = None,
    seconds: float = 0.0, tokens: int = 0, input_truncated: Truncation | None = None,
) -> Decision:
    """The turn's decision from the policy's probabilities (`step_from`)."""
    chosen = step_from(state, probs, draws)
    return Decision(
        turn=state.next_turn, agent_index=chosen.agent, agent=state.agent_names[chosen.agent],
        role=role_at(chosen.role), role_source="thinker" if chosen.forced else "head",
        agent_probs=tuple(float(p) for p in chosen.agent_probs),
        role_probs=tuple(float(p) for p in chosen.role_probs), coordinator_seconds=seconds,
        coordinator_tokens=tokens,
        chosen_probability=None if state.mask is None else chosen.probability,
        input_truncated=input_truncated,
    )


def request_for(state: EpisodeState, decision: Decision) -> Request | None:
    """The agent call a decision asks for; None when a Verifier has nothing to check."""
    if decision.role is Role.VERIFIER and state.transcript.latest_answer is None:
        return None
    problem = state.transcript.problem
    return Request(
        role=decision.role, system=system_prompt(decision.role, problem.stdin_program),
        user=state.transcript.agent_view(), lead=COMPLETION_LEADS[decision.role],
        answer_prefix=problem.code_prompt if decision.role is Role.WORKER else "",
        task_id=problem.task_id, candidate=state.transcript.latest_answer,
        attempt=sum(
            t.agent == decision.agent and t.role is Role.WORKER for t in state.transcript.turns
        ),
    )


def apply(state: EpisodeState, decision: Decision, reply: Reply | None) -> TurnRecord | None:
    """Fold one agent reply into the state and apply the method's stopping rules."""
    if reply is None:
        state.verdict = NO_ANSWER
        return None
    answer = extract_code(reply.text) if decision.role is Role.WORKER else None
    verdict = parse_verdict(reply.text) if decision.role is Role.VERIFIER else None
    record = TurnRecord(
        decision, reply.text, answer, verdict, reply.tokens_in, reply.tokens_out, reply.usd,
        reply.usd_estimated, reply.seconds, reply.truncated, reply.input_truncated,
    )
    state.transcript = state.transcript.with_turn(record.as_turn())
    state.role_override = parse_next_role(reply.text) if decision.role is Role.THINKER else None
    state.records.append(record)
    if verdict == "accept":
        state.verdict = ACCEPTED
    elif len(state.records) >= state.max_turns:
        state.verdict = TURN_LIMIT
    return record


def check_answer(answer: str, check: AnswerCheck | None) -> CheckOutcome | None:
    """An answer that does not parse fails without running anything; one that parses faces
    the execution check, when there is one."""
    error = syntax_error(answer)
    if error is not None:
        return CheckOutcome(False, error, source="syntax")
    return None if check is None else check(answer)


def apply_check(state: EpisodeState, check: AnswerCheck | None) -> CheckOutcome | None:
    """After an ACCEPT, or at the end: the answer must parse, and pass the execution check.

    Returns the outcome when the check ran now (each answer is checked once)."""
    answer = state.transcript.latest_answer
    if answer is None or state.verdict not in (ACCEPTED, TURN_LIMIT):
        return None
    fresh = answer not in state.checked
    if fresh:
        state.checked[answer] = check_answer(answer, check)
    outcome = state.checked[answer]
    if outcome is not None and not outcome.passed:
        if state.verdict == ACCEPTED:  # overruled: the next agents see why
            last = state.transcript.turns[-1]
            what = (
                "syntax check: the answer does not parse"
                if outcome.source == "syntax"
                else "execution check: the answer FAILED the tests"
            )
            note = f"{last.text}\n\n[{what}]\n{outcome.summary[-CHECK_NOTE_CHARS:]}"
            state.transcript = Transcript(
                state.transcript.problem,
                state.transcript.turns[:-1]
                + (Turn(last.agent, last.role, note, last.answer, "reject"),),
            )
        state.verdict = TESTS_FAILED if len(state.records) >= state.max_turns else None
    return outcome if fresh else None


def result_of(state: EpisodeState) -> EpisodeResult:
    answer = state.transcript.latest_answer
    return EpisodeResult(
        verdict=state.verdict or INTERRUPTED, answer=answer, turns=tuple(state.records),
        usd=sum(r.usd for r in state.records), error=state.error,
        check=state.checked.get(answer) if answer is not None else None,
    )


def run_episode(
    problem: Problem, agents: Sequence[Agent], coordinator: Coordinator | None, policy: Policy, *,
    max_turns: int = DEFAULT_MAX_TURNS, budget: Budget | None = None,
    sample_seed: int | Sequence[int] | None = None, on_event: EventSink = ignore,
    check: AnswerCheck | None = None,
) -> EpisodeResult:
    """Run one episode to its end. Ctrl-C ends it with verdict `interrupted`, turns kept."""
    state = new_state(
        problem, [a.name for a in agents], max_turns, role_mask([a.roles for a in agents])
    )
    budget = budget or Budget()
    rng = None if sample_seed is None else np.random.default_rng(sample_seed)
    try:
        while not state.done:
            draws = None if rng is None else (float(rng.random()), float(rng.random()))
            decision = next_decision(state, coordinator, policy, draws)
            agent = agents[decision.agent_index]
            take_turn(
                state, decision, agent, budget, on_event=on_event,
                begin_stream=partial(_stream_turn, coordinator, policy, agent, state, decision),
            )
            outcome = apply_check(state, check)
            if outcome is not None:
                on_event(CheckFinished(decision.turn, outcome))
    except KeyboardInterrupt:
        state.verdict = INTERRUPTED
    result = result_of(state)
    on_event(EpisodeFinished(result))
    return result


def take_turn(
    state: EpisodeState, decision: Decision, agent: Agent, budget: Budget, *,
    on_event: EventSink = ignore, begin_stream: Callable[[], TurnStream | None] = lambda: None,
) -> TurnRecord | None:
    """The decision's agent call, folded into `state`; None when no turn was added (the episode
    then ended: `no_answer`, `budget` or `provider_error`)."""
    request = request_for(state, decision)
    if request is None:
        apply(state, decision, None)
        return None
    spend = CallSpend(budget, agent.worst_case_usd(request))
    try:
        spend.reserve()
    except BudgetExceeded as exc:
        state.verdict, state.error = BUDGET, exc.message
        return None
    on_event(TurnStarted(decision))
    started = time.perf_counter()
    stream = begin_stream()

    def on_text(text: str) -> None:
        on_event(TextDelta(decision.turn, text))
        if stream is not None:
            stream.feed(text)

    try:  # each retry settles the failed attempt and reserves again (spend.retry)
        reply = agent.provider.complete(request, on_text=on_text, on_retry=spend.retry)
    except ProviderError as exc:
        spend.settle_failed(exc)  # at the worst case if it may have been billed
        state.verdict, state.error = PROVIDER_ERROR, exc.message
        return None
    except BudgetExceeded as exc:  # a retry the budget refused
        state.verdict, state.error = BUDGET, exc.message
        return None
    finally:
        if stream is not None:
            stream.finish()
    if reply.seconds <= 0:
        reply = replace(reply, seconds=time.perf_counter() - started)
    spend.settle(reply.usd)
    record = apply(state, decision, reply)
    if record is not None:
        on_event(TurnFinished(record))
    return record


def _stream_turn(
    coordinator, policy: Policy, agent: Agent, state: EpisodeState, decision: Decision
) -> TurnStream | None:
    """The coordinator's encoder for this turn's streaming text, when it has one and it helps."""
    begin = getattr(coordinator, "stream_turn", None)
    if begin is None or not policy.needs_hidden or not agent.remote:
        return None
    return begin(state.transcript, decision.agent, decision.role)
