"""llama.cpp: the process's one C-API binding, and resolving any GGUF (the embedded one first)."""
