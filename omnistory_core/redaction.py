"""Keep secrets out of configs, logs, manifests and reports.

API keys come from environment variables only: a config names the variable (``api_key_env``), never
the value.  ``redact`` scrubs mappings before they are written; ``SecretFilter`` scrubs log records.
(Named ``omnistory_core.redaction`` before, which shadowed the standard library's ``secrets``; that
name stays importable.)
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

# "token" only as the last word of a name (hf_token, access_token), not max_tokens / input_tokens.
SECRET_KEY = re.compile(
    r"(api[_-]?key|secret|password|passwd|authorization|credential|(^|[_-])token$)",
    re.IGNORECASE,
)
REDACTED = "***REDACTED***"
_MIN_SECRET_LEN = 6


def is_secret_key(key: str) -> bool:
    """``api_key`` is secret, ``api_key_env`` (the variable's name) is not."""
    return bool(SECRET_KEY.search(key)) and not key.lower().endswith(("_env", "_env_var"))


def secret_values() -> list[str]:
    """Values of environment variables whose names look secret (longest first)."""
    values = {v for k, v in os.environ.items() if is_secret_key(k) and len(v) >= _MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def scrub_text(text: str, values: list[str] | None = None) -> str:
    for value in secret_values() if values is None else values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def redact(obj: Any, values: list[str] | None = None) -> Any:
    """A copy of ``obj`` with secret-named keys and secret values replaced."""
    values = secret_values() if values is None else values
    if isinstance(obj, dict):
        return {
            k: (REDACTED if is_secret_key(str(k)) and v not in (None, "") else redact(v, values))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact(v, values) for v in obj]
    if isinstance(obj, str):
        return scrub_text(obj, values)
    return obj


def check_overrides(overrides: list[str]) -> str | None:
    """Refuse secrets on the command line: Hydra saves overrides verbatim into .hydra/."""
    values = secret_values()
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if value and is_secret_key(key.split(".")[-1]):
            return (
                f"refusing override {key}=...: pass secrets through environment variables "
                "(configs name the variable with *_env keys, "
                "e.g. planner.api_key_env=OPENAI_API_KEY)"
            )
        if any(v in override for v in values):
            return (
                f"refusing override {key}=...: "
                "it contains the value of a secret environment variable"
            )
    return None


class SecretFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        values = secret_values()
        if values:
            message = record.getMessage()
            scrubbed = scrub_text(message, values)
            if scrubbed != message:
                record.msg, record.args = scrubbed, None
        return True


def install_log_filter() -> None:
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, SecretFilter) for f in handler.filters):
            handler.addFilter(SecretFilter())
