"""The pool: its TOML spec and loading, the providers it may name, the bundled pools and records."""
