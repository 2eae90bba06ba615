"""Could any reader of the transcript route where the room is? Tried on issue 29 and not adopted:
`scripts/room.py --read-states`, with each decision point's held-out routing (room.py's 5 folds
over its grid of K and ridge) run on features of the transcript's text instead of the
coordinator's state. If text features route no better held out than the 270M coordinator,
the tasks of room are not told apart by what the transcript says, for this coordinator or a
larger one, at this many training tasks; if they route better, the coordinator is the limit.

Features, from the transcript as the coordinator reads it (`coordinator_segments`):

- `ngrams`: word unigrams and bigrams hashed into 2^15 buckets, log(1 + count) × idf, each
  row L2-normalised, then its top 64 singular directions (latent semantic analysis). The idf
  and the directions are computed on every transcript at the decision point, held-out ones
  included: no outcome is read, so no label leaks, but the basis has seen the held-out texts.
- `surface`: 8 numbers anyone would try first: the problem's characters, lines and `assert`
  count, the turn count, the latest answer's characters and lines, whether the last
  Verifier's text names an Error, and its characters (log scales).

    python scripts/text_probe.py --pool ldb-mbpp --tasks mbpp --read-states > text.json

Per feature set and decision point, stderr prints the mean and the best margin over the grid
(SE); the JSON holds every row (`decision_points[i].features`). The states are read (the
shipped column) from the caches room.py fills.
"""

from __future__ import annotations

import itertools
import math
import re
import zlib
from typing import Any

import numpy as np
from layer_probe import load_room, routing_on, say, summarised

from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Transcript

BUCKETS = 1 << 15
LSA_DIMS = 64
WORD = re.compile(r"[A-Za-z_]+|\d+|[^\sA-Za-z_\d]")


def text_of(transcript: Transcript) -> str:
    return "".join(transcript.coordinator_segments())


def ngrams(texts: list[str]) -> np.ndarray:
    counts = np.zeros((len(texts), BUCKETS))
    for row, text in enumerate(texts):
        words = WORD.findall(text.lower())
        for gram in words + [f"{a} {b}" for a, b in itertools.pairwise(words)]:
            counts[row, zlib.crc32(gram.encode()) % BUCKETS] += 1
    tf = np.log1p(counts)
    idf = np.log((1 + len(texts)) / (1 + (counts > 0).sum(axis=0))) + 1
    x = tf * idf
    x /= np.linalg.norm(x, axis=1, keepdims=True) + 1e-12
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    return u[:, :LSA_DIMS] * s[:LSA_DIMS]


def surface(transcripts: list[Transcript]) -> np.ndarray:
    rows = []
    for transcript in transcripts:
        problem = transcript.problem.text
        answer = transcript.latest_answer or ""
        verdicts = [t.text for t in transcript.turns if t.role is Role.VERIFIER]
        last = verdicts[-1] if verdicts else ""
        rows.append(
            [
                math.log1p(len(problem)), math.log1p(problem.count("\n")),
                problem.count("assert"), len(transcript.turns), math.log1p(len(answer)),
                math.log1p(answer.count("\n")), float("Error" in last), math.log1p(len(last)),
            ]
        )
    return np.asarray(rows, dtype=np.float64)


FEATURES = {"ngrams": lambda ts: ngrams([text_of(t) for t in ts]), "surface": surface}


def main() -> None:
    room = load_room()
    one_point = room.decision_point

    def per_feature_set(*args: Any) -> dict[str, Any]:
        *rest, trails = args
        point = one_point(*rest, trails)
        if trails is None:
            return point
        depth = point["turn"] - 1
        say(point["turn"], "state (shipped)", summarised(point["held_out_routing"]))
        reached = [i for i, trail in enumerate(trails) if len(trail) > depth]
        transcripts = [trails[i][depth][0].state.transcript for i in reached]
        point["features"] = {}
        for name, make in FEATURES.items():
            made = make(transcripts)
            made = made[:, made.std(axis=0) > 1e-9]  # a constant column would swamp input_space
            rows_of = dict(zip(reached, made))
            unread = np.zeros(made.shape[1])  # a trail that ends before this point
            states = [[rows_of.get(i, unread)] * len(trail) for i, trail in enumerate(trails)]
            point["features"][name] = routing_on(one_point, rest, states)
            say(point["turn"], name, point["features"][name])
        return point

    room.decision_point = per_feature_set
    room.main()


if __name__ == "__main__":
    main()
