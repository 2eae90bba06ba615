"""How a run ends: an episode's verdicts (the CLI maps each to an exit code) and, in the run log,
an eval's, train's or profile's summary row. Names only: `logs --help` lists them at start-up."""

ACCEPTED, TURN_LIMIT, NO_ANSWER = "accepted", "turn_limit", "no_answer"
PROVIDER_ERROR, BUDGET, INTERRUPTED = "provider_error", "budget", "interrupted"
TESTS_FAILED = "tests_failed"
EPISODE_VERDICTS = (
    ACCEPTED, TESTS_FAILED, TURN_LIMIT, NO_ANSWER, PROVIDER_ERROR, BUDGET, INTERRUPTED,
)
RUN_VERDICTS = (*EPISODE_VERDICTS, "completed", "error")
