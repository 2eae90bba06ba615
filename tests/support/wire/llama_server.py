"""`python -m llama_cpp.server`, the real OpenAI-compatible server, with plain weights.

llama-cpp-python's `Llama` keeps llama.cpp's extra CPU buffer types on, and a native build on a
CPU with AMX (Xeon since Sapphire Rapids) then runs llama.cpp's AMX kernels, which crash on every
batch of more than one token (ggml-org/llama.cpp#20824). The server has no switch for them, so
this runs it with llama.cpp's model defaults minus those buffer types, as trinity loads models.
"""

import runpy

import llama_cpp.llama_cpp as bindings

_defaults = bindings.llama_model_default_params


def plain_weights():
    params = _defaults()
    params.use_extra_bufts = False
    return params


bindings.llama_model_default_params = plain_weights
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
