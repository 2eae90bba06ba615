"""Does another layer of the coordinator tell the room apart better than the last? Tried on issue
29 and not adopted: `scripts/room.py --read-states` with each decision state read from several
layers at once, and every decision point's held-out routing (room.py's 5 folds over its grid
of K and ridge) computed on each layer's slice.

The readout copies the decision token's row of `l_out-N` (the residual stream after layer N,
before any norm) for each N in LAYERS, then the last layer's `result_norm` as the product
reads it, all in one pass; the graph runs to the end, so the KV cache stays whole. The states
are memoised under a key of their own (the readout is part of `numerics`), beside the
product's.

    python scripts/layer_probe.py --pool ldb-mbpp --tasks mbpp --read-states > layers.json

Per layer and decision point, stderr prints the mean and the best margin over the grid (SE);
the JSON holds every row (`decision_points[i].layers`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from trinity_cli.coordinator import llama

LAYERS = (2, 4, 6, 8, 10, 12, 14, 16)  # Gemma-3 270M has 18 (0-17)
READOUTS = [f"l_out-{n}".encode() for n in LAYERS] + [llama.READOUT_TENSOR]


class LayersCoordinator(llama.LlamaCoordinator):
    """The product's coordinator with a state that concatenates READOUTS' rows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_size = self._model.hidden_size * len(READOUTS)
        self.numerics = {**self.numerics, "readout": [name.decode() for name in READOUTS]}

    def _make_readout(self, ggml: Any) -> Any:  # called by the product's __init__
        size = self._model.hidden_size
        rows: dict[bytes, np.ndarray] = {}

        def on_tensor(tensor: int, ask: bool, user_data: int) -> bool:
            if not self._capturing:
                return not ask
            name = ggml.ggml_get_name(tensor)
            if ask:
                return name in READOUTS
            count = ggml.ggml_nrows(tensor)
            if count < 1:  # a batch before the outputs
                return True
            row = np.empty(size, dtype=np.float32)
            ggml.ggml_backend_tensor_get(tensor, row.ctypes.data, (count - 1) * size * 4, size * 4)
            rows[name] = row  # the last batch, which holds the decision token, writes last
            if name != llama.READOUT_TENSOR:
                return True
            self._captured = np.concatenate([rows.pop(n) for n in READOUTS])
            return False  # skip the vocabulary projection, as the product does

        return on_tensor


def routing_on(one_point: Any, rest: list[Any], states: list[list[Any]]) -> dict[str, Any]:
    """room.decision_point's held-out routing where each trail's nodes read `states` (one
    per node, in the trail's order): every row of the grid, and its mean and best margin."""
    trails = [[(SimpleNamespace(hidden=hidden),) for hidden in trail] for trail in states]
    return summarised(one_point(*rest, trails)["held_out_routing"])


def summarised(rows: list[dict[str, Any]]) -> dict[str, Any]:
    margins = [row["margin_se"] or 0.0 for row in rows]
    return {
        "mean_margin_se": round(float(np.mean(margins)), 2), "best_margin_se": max(margins),
        "rows": rows,
    }


def say(turn: int, name: str, routing: dict[str, Any]) -> None:
    print(
        f"turn {turn} {name:16} mean {routing['mean_margin_se']:+.2f} SE, "
        f"best {routing['best_margin_se']:+.2f} SE", file=sys.stderr, flush=True,
    )


def load_room() -> Any:
    spec = importlib.util.spec_from_file_location("room", Path(__file__).with_name("room.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    llama.LlamaCoordinator = LayersCoordinator  # type: ignore[misc]  # what runtime builds
    room = load_room()
    one_state = room.decision_point

    def per_layer(*args: Any) -> dict[str, Any]:
        *rest, trails = args
        point = one_state(*rest, None)
        if trails is None:
            return point
        point["layers"] = {}
        width = len(trails[0][0][0].hidden) // len(READOUTS)
        for j, name in enumerate(READOUTS):
            sliced = [
                [node.hidden[j * width:(j + 1) * width] for node, _ in trail] for trail in trails
            ]
            layer = point["layers"][name.decode()] = routing_on(one_state, rest, sliced)
            say(point["turn"], name.decode(), layer)
        return point

    room.decision_point = per_layer
    room.main()


if __name__ == "__main__":
    main()
