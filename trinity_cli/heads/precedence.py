"""Which head a run routes with: the rule, written once. `runtime.find_head` applies it;
`solve --help`, `pool --help` and the README quote it (tests/test_head_precedence.py checks)."""

STEPS = (
    "--weights (a path or a head's name)", "TRINITY_WEIGHTS",
    "[coordinator] weights in the pool file",
    "the newest head you trained that fits the pool and coordinator",
    "the newest shipped head that fits",
    "the universal head, when every agent has a profile (trinity profile)",
    "the fallback pipeline (thinker -> worker -> verifier)",
)
RULE = "first match wins: " + " > ".join(STEPS)
