"""The coordinator: a small GGUF model that reads the transcript and yields one hidden state."""
