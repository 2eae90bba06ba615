"""The pool file: strict keys, clear one-line errors, the lookup order."""

from __future__ import annotations

from pathlib import Path

import pytest

from trinity_cli.errors import ConfigError
from trinity_cli.pool.spec import BUILTIN_POOL, load_pool, parse_pool

GOOD = """
[defaults]
max_tokens = 256
price_in = 1.0
price_out = 2.0

[[agents]]
name = "gpt"
provider = "openai"
model = "gpt-4o-mini"
api_key_env = "MY_KEY"

[[agents]]
name = "ollama"
provider = "openai"
model = "qwen2.5-coder"
base_url = "http://127.0.0.1:11434/v1"
price_in = 0
price_out = 0
stop = "###"

[coordinator]
model = "embedded"
n_ctx = 4096
"""


def test_a_good_pool_with_defaults_merged():
    pool = parse_pool(GOOD, "pool.toml")
    gpt, ollama = pool.agents
    assert pool.names == ("gpt", "ollama")
    assert (gpt.max_tokens, gpt.price_in, gpt.price_out, gpt.api_key_env) == (
        256, 1.0, 2.0, "MY_KEY",
    )
    assert (ollama.price_in, ollama.stop, ollama.base_url) == (
        0.0, ("###",), "http://127.0.0.1:11434/v1",
    )
    assert pool.coordinator.n_ctx == 4096


def test_token_param_defaults_by_endpoint_and_can_be_forced():
    gpt, ollama = parse_pool(GOOD, "pool.toml").agents
    assert (gpt.token_param, ollama.token_param) == ("max_completion_tokens", "max_tokens")
    forced = parse_pool(
        GOOD.replace('stop = "###"', 'token_param = "max_completion_tokens"'), "pool.toml"
    ).agents[1]
    assert forced.token_param == "max_completion_tokens"
    local = parse_pool(
        '[[agents]]\nname="a"\nprovider="local"\nmodel="embedded"', "pool.toml"
    ).agents[0]
    assert local.token_param is None


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("[[agents]\nname=", "invalid TOML"),
        ('[[agents]]\nname="a"\nprovider="cohere"\nmodel="m"', "known providers"),
        (
            '[[agents]]\nname="a"\nprovider="openai"\nmodel="m"\ncolour="red"',
            "unknown key agents[1].colour",
        ),
        ('[[agents]]\nname="a"\nprovider="openai"', "agents[1].model is required"),
        (
            
            '[[agents]]\nname="a"\nprovider="openai"\nmodel="m"\n[[agents]]\nname="a"\nprovider="openai"\nmodel="n"',
            "duplicate agent name 'a'",
        ),
        (
            '[[agents]]\nname="a"\nprovider="openai"\nmodel="m"\nprice_in=-1',
            "price_in must be zero or more",
        ),
        (
            '[[agents]]\nname="a"\nprovider="openai"\nmodel="m"\nmax_tokens=0',
            "max_tokens must be a positive integer",
        ),
        (
            '[[agents]]\nname="a"\nprovider="openai"\nmodel="m"\nmode="chat"',
            'applies to provider "local" only',
        ),
        (
            '[[agents]]\nname="a"\nprovider="openai"\nmodel="o3"\ntoken_param="max_output_tokens"',
            (
                "agents[a].token_param is 'max_output_tokens'; "
                'use "max_completion_tokens" or "max_tokens"'
            ),
        ),
        (
            '[[agents]]\nname="a"\nprovider="anthropic"\nmodel="m"\ntoken_param="max_tokens"',
            'agents[a].token_param applies to provider "openai" only',
        ),
        (
            '[defaults]\nbogus=1\n[[agents]]\nname="a"\nprovider="openai"\nmodel="m"',
            "unknown key defaults.bogus",
        ),
        (
            '[[agents]]\nname="a"\nprovider="openai"\nmodel="m"\nmax_token=5',
            "max_token (did you mean agents[1].max_tokens?",
        ),
        (
            
            '[coordinator]\ntoken_position=2\n[[agents]]\nname="a"\nprovider="local"\nmodel="embedded"',
            "token_position",
        ),
        ("title = 'x'", "unknown key title"), ("", "no agents"),
    ],
)
def test_bad_pools_fail_with_one_line_naming_file_and_key(text, fragment):
    with pytest.raises(ConfigError) as caught:
        parse_pool(text, "my-pool.toml")
    assert fragment in caught.value.message
    assert caught.value.message.startswith("my-pool.toml")
    assert "\n" not in caught.value.message


def test_lookup_order_flag_env_project_user_builtin(workdir, monkeypatch):
    from trinity_cli import paths

    def write(path, name):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'[[agents]]\nname="{name}"\nprovider="local"\nmodel="embedded"\n')

    assert load_pool(None).source == BUILTIN_POOL
    assert load_pool(None).names == ("gemma-greedy", "gemma-t08")
    write(paths.config_dir() / "pool.toml", "user")
    assert load_pool(None).names == ("user",)
    write(workdir / "trinity.toml", "project")
    assert load_pool(None).names == ("project",)
    write(workdir / "env.toml", "env")
    monkeypatch.setenv("TRINITY_POOL", str(workdir / "env.toml"))
    assert load_pool(None).names == ("env",)
    write(workdir / "flag.toml", "flag")
    assert load_pool(str(workdir / "flag.toml")).names == ("flag",)
    (paths.config_dir() / "pool.toml").unlink()


def test_a_missing_pool_file_is_a_config_error(workdir):
    with pytest.raises(ConfigError, match="pool file not found"):
        load_pool(str(workdir / "nope.toml"))


def test_every_accepted_pool_key_is_documented_in_the_readme():
    from dataclasses import fields

    from trinity_cli.pool.spec import AgentSpec, CoordinatorSpec

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    keys = {f.name for f in fields(AgentSpec)} | {f.name for f in fields(CoordinatorSpec)}
    assert keys and not [key for key in sorted(keys) if f"`{key}`" not in readme]


def test_a_misspelt_bundled_pool_name_gets_did_you_mean():
    from trinity_cli.pool.spec import load_pool

    with pytest.raises(ConfigError, match=r"did you mean ldb-humaneval\? no such file"):
        load_pool("ldb-humanevl")
