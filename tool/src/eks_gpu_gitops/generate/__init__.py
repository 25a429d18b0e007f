"""Generators: write new environments and training jobs consistent with the existing ones."""
