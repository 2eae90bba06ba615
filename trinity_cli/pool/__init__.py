"""The pool: its TOML spec and loading, the bundled pools and records, its checks."""
