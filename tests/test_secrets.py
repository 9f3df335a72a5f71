"""Secret handling: key names, value scrubbing, command-line refusal."""

from __future__ import annotations

import logging

import pytest

from omnistory_core.redaction import (
    REDACTED,
    SecretFilter,
    check_overrides,
    is_secret_key,
    redact,
)


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "OPENAI_API_KEY",
        "hf_token",
        "HF_TOKEN",
        "password",
        "client_secret",
        "Authorization",
    ],
)
def test_secret_names(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "api_key_env",
        "max_tokens",
        "input_tokens",
        "output_tokens",
        "tokenizer",
        "model",
        "base_url",
    ],
)
def test_not_secret_names(key: str) -> None:
    assert not is_secret_key(key)


def test_redact_keys_and_values(monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "s3cr3t-value-123")
    data = {
        "planner": {
            "api_key": "x-literal",
            "api_key_env": "MY_SERVICE_API_KEY",
            "note": "uses s3cr3t-value-123 inside",
            "max_tokens": 5,
        },
        "list": ["s3cr3t-value-123"],
    }
    out = redact(data)
    assert out["planner"]["api_key"] == REDACTED
    assert out["planner"]["api_key_env"] == "MY_SERVICE_API_KEY"
    assert out["planner"]["note"] == f"uses {REDACTED} inside"
    assert out["planner"]["max_tokens"] == 5 and out["list"] == [REDACTED]


def test_overrides_with_secrets_are_refused(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abcdef123456")
    assert check_overrides(["planner.api_key=foo"]) is not None
    assert check_overrides(["+planner.note=sk-abcdef123456"]) is not None
    assert check_overrides(["planner.api_key_env=OPENAI_API_KEY", "planner.max_tokens=9"]) is None


def test_log_filter_scrubs(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-zzzzzzzz")
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "key is %s", ("sk-ant-zzzzzzzz",), None
    )
    assert SecretFilter().filter(record)
    assert record.getMessage() == f"key is {REDACTED}"
