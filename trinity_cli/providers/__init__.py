"""Pool members behind one Protocol: one module per provider, a registry by name."""
