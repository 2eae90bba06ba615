"""Heads on disk: round trip, corrupt or mismatched files, and the shipped head."""

from __future__ import annotations

import itertools
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from trinity_cli.core.head import LinearHead, softmax
from trinity_cli.errors import ConfigError
from trinity_cli.heads.files import (
    Backbone,
    in_head_format,
    load_head,
    metadata_for,
    mismatches,
    newest_fitting,
    read_metadata,
    save_head,
    shipped_dir,
)
from trinity_cli.pool.spec import load_pool, parse_pool

BACKBONE = Backbone("model.gguf", "ab" * 32, -2, "trinity-tf2")


def small_head(n_agents=2, d=8) -> LinearHead:
    rng = np.random.default_rng(0)
    return LinearHead(
        rng.normal(size=(n_agents + 3, d)), rng.normal(size=d), np.abs(rng.normal(size=d)) + 0.1
    )


@pytest.mark.parametrize("turn_features", [0, 5])
def test_round_trip(tmp_path, turn_features):
    pool = load_pool(None)
    plain = small_head()
    head = LinearHead(
        np.hstack([plain.weights, np.arange(5.0 * turn_features).reshape(5, turn_features)]),
        plain.mean, plain.std, None, turn_features,
    )
    path = tmp_path / "h.npz"
    save_head(path, head, metadata_for(BACKBONE, pool, 8, trained=False))
    loaded, meta = load_head(path)
    assert np.array_equal(loaded.weights, head.weights) and loaded.turn_features == turn_features
    hidden = np.ones(8)
    assert all(
        np.array_equal(
            loaded.choose(hidden, turn).agent_probs, head.choose(hidden, turn).agent_probs
        )
        for turn in range(1, 8)
    )
    assert meta["agents"][0] == {"name": "gemma-greedy", "provider": "local", "model": "embedded"}
    assert not mismatches(meta, BACKBONE, pool)


def test_the_searchs_candidates_share_the_states_they_read_and_a_pickle_leaves_them_behind(
    monkeypatch,
):
    """`with_weights` heads read each state once between them, for as long as it lives, and
    choose what their weights say on that state and turn; a pickled head (a Ray unit) carries
    its parameters only."""
    rng = np.random.default_rng(1)
    basis = rng.normal(size=(4, 16))
    head = LinearHead(rng.normal(size=(5, 4 + 3)), np.zeros(16), np.ones(16), basis, 3)
    states = [rng.normal(size=16).astype(np.float32) for _ in range(3)]
    candidates = [head.with_weights(rng.normal(size=head.flat.size)) for _ in range(4)]
    reads = []
    features = LinearHead.features

    def counted(self, hidden):
        reads.append(id(hidden))
        return features(self, hidden)

    monkeypatch.setattr(LinearHead, "features", counted)
    for candidate in candidates:
        for state, turn in itertools.product(states, (1, 2, 5)):
            ours = candidate.choose(state, turn)
            # by hand: z = basis · state (mean 0, std 1), then the indicator of turn 1, 2 or 3+
            logits = candidate.weights @ np.concatenate(
                [basis @ state.astype(np.float64), np.eye(3)[min(turn, 3) - 1]]
            )
            assert np.allclose(ours.agent_probs, softmax(logits[:2]), rtol=1e-12, atol=0)
            assert np.allclose(ours.role_probs, softmax(logits[2:]), rtol=1e-12, atol=0)
    assert len(reads) == 3 * 3  # each (state, turn) once for the 4 candidates
    assert all(c.inputs is head.inputs for c in candidates) and len(head.inputs) == 9
    del ours, state
    states.pop()
    assert len(head.inputs) == 6  # a state's entries go with it
    copy = pickle.loads(pickle.dumps(candidates[0]))
    assert copy.inputs == {} and np.array_equal(copy.weights, candidates[0].weights)
    assert np.array_equal(
        copy.choose(states[0], 2).agent_probs, candidates[0].choose(states[0], 2).agent_probs
    )


@pytest.mark.parametrize(
    "damage",
    [
        "truncate", "garbage", "no_sidecar", "bad_sidecar", "wrong_shape", "turn_features",
        "pickled", "sidecar_given", "flipped_byte",
    ],
)
def test_damaged_weights_are_config_errors(tmp_path, damage):
    pool = load_pool(None)
    path = tmp_path / "h.npz"
    save_head(path, small_head(), metadata_for(BACKBONE, pool, 8))
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "garbage":
        path.write_bytes(b"\x00" * 300)
    elif damage == "no_sidecar":
        path.with_suffix(".json").unlink()
    elif damage == "bad_sidecar":
        path.with_suffix(".json").write_text("{not json")
    elif damage == "pickled":  # an archive numpy would only load by unpickling
        np.savez(path, weights=np.array([{"a": 1}], dtype=object))
    elif damage == "flipped_byte":  # inside the first array's data: its CRC no longer matches
        data = bytearray(path.read_bytes())
        data[120] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "sidecar_given":  # --weights h.json: the metadata named as the head
        path = path.with_suffix(".json")
    elif damage == "turn_features":  # indicators the weights have no columns for
        head = small_head()
        np.savez(
            path, weights=head.weights, mean=head.mean, std=head.std, turn_features=np.array(3)
        )
    else:
        meta = json.loads(path.with_suffix(".json").read_text())
        meta["hidden_size"] = 16
        path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError) as caught:
        load_head(path)
    assert str(path) in caught.value.message and "\n" not in caught.value.message
    if damage == "turn_features":
        assert "3 turn features" in caught.value.message
    if damage == "flipped_byte":
        assert "cannot be read: weights.npy in it is damaged" in caught.value.message
    if damage in ("truncate", "garbage", "sidecar_given", "pickled"):
        assert "is not a head: a head is an .npz archive" in caught.value.message
        assert "allow_pickle" not in caught.value.message


def test_mismatch_names_both_values():
    other_pool = parse_pool('[[agents]]\nname="x"\nprovider="local"\nmodel="embedded"', "p.toml")
    meta = metadata_for(BACKBONE, load_pool(None), 8)
    found = mismatches(meta, Backbone("m", "cd" * 32, -1, "trinity-tf2"), other_pool)
    text = "; ".join(found)
    assert "backbone sha256: head has " + "ab" * 32 + ", this run has " + "cd" * 32 in text
    assert "token position: head has -2, this run has -1" in text
    assert (
        "agents: head has [gemma-greedy=local:embedded, gemma-t08=local:embedded], "
        "this run has [x=local:embedded]" in text
    )


def test_the_installed_package_ships_a_head_for_the_default_pool(gguf_path):
    from trinity_cli.runtime import backbone_of

    assert shipped_dir().is_dir()
    pool = load_pool(None)
    found, _ = newest_fitting(shipped_dir(), backbone_of(pool), pool)
    assert found is not None
    meta = read_metadata(found)
    assert meta["trained"] is False and found.name == "default-offline.npz"  # the imitation head
    head, _ = load_head(found)
    assert head.weights.shape == (len(pool.agents) + 3, 640)
    # the head trained for reward ships too, fits, and is used only when named
    trained = shipped_dir() / "default-offline-es.npz"
    head, meta = load_head(trained)
    assert meta["trained"] is True and meta["auto_select"] is False
    assert meta["transcript_format"] == "trinity-tf1"  # trained on the first format, still read
    assert not mismatches(meta, in_head_format(meta, backbone_of(pool)), pool)
    # the sim pool's head is found automatically in its (older) format as well
    sim = load_pool(str(Path(__file__).resolve().parent.parent / "examples" / "sim-pool.toml"))
    assert newest_fitting(shipped_dir(), backbone_of(sim), sim)[0] == shipped_dir() / "sim-pool.npz"


def test_the_suite_runs_against_the_installed_package_not_the_tree():
    import trinity_cli

    tree = Path(__file__).resolve().parent.parent
    assert tree not in Path(trinity_cli.__file__).resolve().parents


@pytest.mark.parametrize("head_format", ["trinity-tf1", "trinity-tf2"])
def test_a_head_in_any_known_transcript_format_gets_a_coordinator_in_that_format(
    tmp_path, gguf_path, head_format
):
    from trinity_cli.runtime import backbone_of, build_coordinator, choose_policy

    pool = load_pool(None)
    path = tmp_path / "h.npz"
    backbone = backbone_of(pool, head_format)
    save_head(path, small_head(d=640), metadata_for(backbone, pool, 640))
    choice = choose_policy(pool, str(path), warn=print)
    assert choice.transcript_format == head_format
    coordinator = build_coordinator(pool, transcript_format=choice.transcript_format)
    try:
        assert coordinator.transcript_format == head_format
    finally:
        coordinator.close()


def test_a_head_in_an_unknown_transcript_format_is_refused(tmp_path, gguf_path):
    from trinity_cli.runtime import backbone_of, choose_policy

    pool = load_pool(None)
    path = tmp_path / "h.npz"
    save_head(path, small_head(d=640), metadata_for(backbone_of(pool, "trinity-tf9"), pool, 640))
    with pytest.raises(ConfigError) as caught:
        choose_policy(pool, str(path), warn=print)
    assert (
        "transcript format: head has trinity-tf9, this run has trinity-tf2" in caught.value.message
    )


def test_a_head_trained_on_other_numerics_warns_naming_both_values(tmp_path):
    from trinity_cli.runtime import LoadedHead, warn_if_other_numerics

    here = {
        "llama_cpp": "0.3.36", "cpu_features": "AVX,AVX2", "n_batch": 256, "swa_ring": 768,
        "flash_attention": False,
    }
    coordinator = type("C", (), {"numerics": here})()
    warnings: list[str] = []
    same = LoadedHead(None, "same.npz", {"numerics": dict(here)}, "trinity-tf2")
    warn_if_other_numerics(same, coordinator, warnings.append)
    older = LoadedHead(
        None, "old.npz", {"numerics": {**here, "llama_cpp": "0.3.16", "cpu_features": "AVX512F"}},
        "trinity-tf2",
    )
    warn_if_other_numerics(older, coordinator, warnings.append)
    assert len(warnings) == 1 and "old.npz" in warnings[0]
    assert "llama_cpp 0.3.16 (head) vs 0.3.36 (here)" in warnings[0]
    # the features that differ, each side's
    assert (
        "cpu_features: the head's CPU had AVX512F, which this one lacks; this one has AVX, AVX2, "
        "which the head's lacked" in warnings[0]
    )
    assert "n_batch" not in warnings[0]
    shipped = LoadedHead(None, str(shipped_dir() / "x.npz"), older.meta, "trinity-tf2")
    warn_if_other_numerics(shipped, coordinator, warnings.append)
    assert warnings[1].startswith("the head x.npz (shipped) was trained")  # not its package path


def test_a_trained_head_records_the_numerics_of_its_states():
    pool = load_pool(None)
    numerics = {
        "llama_cpp": "0.3.36", "cpu_features": "AVX2", "n_batch": 256, "swa_ring": 768,
        "flash_attention": False,
    }
    assert metadata_for(BACKBONE, pool, 8, numerics=numerics)["numerics"] == numerics
