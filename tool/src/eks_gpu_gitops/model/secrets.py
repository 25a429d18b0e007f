"""Where an object's secrets are, for the rules (which read the model, not core): core/credentials' one masking
model, so a rule's message leaves out what diff and every output mask (a Secret's values, nested Secret manifests,
credential-named fields at any depth, the secret parts of a string, values substituted from a Secret)."""

from __future__ import annotations

from ..core.credentials import TEXT, WHOLE, mask_text, secret_paths, secret_spans

__all__ = ["TEXT", "WHOLE", "mask_text", "secret_paths", "secret_spans"]
