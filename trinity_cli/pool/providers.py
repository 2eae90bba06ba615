"""The providers a pool may name, each declared once: what every other module asks about a
provider (loading a pool, `trinity pool`'s checks, prices, --offline, retries, Ray sizing)
instead of comparing its name. Adding a provider is its module and one line in KINDS (or a
`register` call, as tests do); docs/architecture.md says how."""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("thinker", "worker", "verifier")  # the names core.roles.Role takes


@dataclass(frozen=True)
class ProviderKind:
    name: str  # what a pool's `provider =` says
    implementation: str  # "module:Class", imported only when an agent is built: Class(spec)
    # calls a server: --offline refuses it unless the server is loopback; Ray sizes for waits
    network: bool = True
    priced: bool = True  # billed per token at the pool's prices (False: free, its prices ignored)
    # transient errors are retried (1 + `retries` attempts), and its context fitted to n_ctx
    retried: bool = True
    # environment variables its API key is read from (`api_key_env` overrides)
    key_envs: tuple[
        str, ...
    ] = ()
    roles: tuple[str, ...] = ROLES  # the roles an agent of it plays unless the pool says otherwise
    # pool keys only agents of this provider (and others naming them) take
    keys: tuple[
        str, ...
    ] = ()
    from_tasks: bool = (
        False  # built with the task set: Class.for_tasks(spec, tasks, coordinator_model, store)
    )


SIM_KEYS = ("skills", "default_skill", "thinker_boost", "verifier_accuracy", "seed")
REPLAY_ROLES = ("worker", "verifier")  # a replayed model has no recorded plans: it cannot think

KINDS: dict[str, ProviderKind] = {
    kind.name: kind
    for kind in (
        ProviderKind(
            "openai", "trinity_cli.providers.openai_compat:OpenAIProvider",
            key_envs=("OPENAI_API_KEY",), keys=("token_param",),
        ),
        ProviderKind(
            "anthropic", "trinity_cli.providers.anthropic:AnthropicProvider",
            key_envs=("ANTHROPIC_API_KEY",),
        ),
        ProviderKind(
            "gemini", "trinity_cli.providers.gemini:GeminiProvider",
            key_envs=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        ),
        ProviderKind(
            "local", "trinity_cli.providers.local_gguf:LocalProvider", network=False, priced=False,
            retried=False, keys=("mode",),
        ),
        ProviderKind(
            "sim", "trinity_cli.providers.sim:SimProvider", network=False, retried=False,
            keys=SIM_KEYS, from_tasks=True,
        ),
        ProviderKind(
            "replay", "trinity_cli.providers.replay:ReplayProvider", network=False, retried=False,
            roles=REPLAY_ROLES, keys=("record", "seed"), from_tasks=True,
        ),
    )
}


def register(kind: ProviderKind) -> None:
    """Adds a provider (a plugin's, or a test's) for this process."""
    KINDS[kind.name] = kind


def kind_of(provider: str) -> ProviderKind:
    """The declaration of a provider a loaded pool names (load_pool has checked the name)."""
    return KINDS[provider]
