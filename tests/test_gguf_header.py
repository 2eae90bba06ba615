"""`trinity pool` and `doctor` call a local GGUF usable only when its header says its tensors fit
in the file: a truncated download (the commonest broken model) is caught before solve's
llama.cpp refuses it. GGUF files here are written by the `gguf` package (llama.cpp's own
writer) and read back by its reader, which says where each tensor's data ends."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest
from support.cli import trinity

from trinity_cli.llama.gguf import BLOCKS, embedded_model_path, gguf_problem


def test_the_block_table_is_ggmls():
    for kind, shape in BLOCKS.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(kind)] == shape, kind


def written(path: Path, alignment: int | None, note: int = 37) -> int:
    """A small GGUF with strings, arrays and two tensors; where its last tensor's data ends.
    `note`'s length moves where the header ends against the alignment."""
    writer = gguf.GGUFWriter(path, "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    writer.add_string("note", "x" * note)
    writer.add_array("words", ["a", "bb", "ccc"])
    writer.add_array("numbers", [1, 2, 3])
    writer.add_tensor("a", np.ones((3, 5), dtype=np.float32))
    writer.add_tensor("b", np.ones(7, dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return max(t.data_offset + t.n_bytes for t in gguf.GGUFReader(path).tensors)


@pytest.mark.parametrize("alignment", [None, 64])
def test_a_file_is_whole_exactly_when_it_holds_its_last_tensors_data(tmp_path, alignment):
    path = tmp_path / "m.gguf"
    for note in range(40):  # every place the header can end within the alignment
        end = written(path, alignment, note)
        assert gguf_problem(path) is None
        data = path.read_bytes()
        path.write_bytes(data[:end])  # the padding after the last tensor is not needed
        assert gguf_problem(path) is None, note
        path.write_bytes(data[: end - 1])
        assert gguf_problem(path) == (
            f"truncated: its tensors need {end:,} bytes, the file has {end - 1:,}"
        ), note
    for cut in (60, 10):  # in the metadata, in the counts
        path.write_bytes(data[:cut])
        assert gguf_problem(path) == "the GGUF header is cut short or damaged", cut
    path.write_bytes(b"GGML" + data[4:])
    assert gguf_problem(path) == "not a GGUF file"


def test_the_embedded_model_is_whole_and_a_byte_less_is_not(tmp_path):
    model = embedded_model_path()
    assert gguf_problem(model) is None
    copy = tmp_path / "cut.gguf"
    shutil.copyfile(model, copy)
    os.truncate(copy, model.stat().st_size - 1)
    assert (gguf_problem(copy) or "").startswith("truncated: its tensors need")


def test_pool_and_doctor_call_a_truncated_model_unusable(workdir):
    end = written(workdir / "whole.gguf", None)
    (workdir / "cut.gguf").write_bytes((workdir / "whole.gguf").read_bytes()[: end - 1])
    (workdir / "p.toml").write_text(
        "".join(
            f'[[agents]]\nname="{name}"\nprovider="local"\nmodel="{name}.gguf"\n'
            for name in ("whole", "cut")
        )
        + '[coordinator]\nmodel="cut.gguf"\n'
    )
    listed = trinity("pool", "--pool", "p.toml", "--json")
    agents = {a["name"]: a for a in json.loads(listed.stdout)["agents"]}
    assert listed.returncode == 3
    assert agents["whole"]["usable"] and not agents["cut"]["usable"]
    assert agents["cut"]["detail"].startswith("truncated: its tensors need")
    doctor = trinity("doctor", "--pool", "p.toml", "--json")
    coordinator = json.loads(doctor.stdout)["coordinator"]
    assert doctor.returncode == 3 and not coordinator["model_present"]
    assert coordinator["model_problem"].startswith("truncated: its tensors need")
    shown = " ".join(trinity("doctor", "--pool", "p.toml").stderr.split())
    assert "coordinator: cut.gguf (truncated: its tensors need" in shown
