"""Secrets never reach results: flags, URLs and error texts are redacted."""

import pytest

from loadtest.results.redact import redact, redact_url


@pytest.mark.parametrize("given, kept", [
    ("--api-key abc123 --max-num-seqs 8", "--api-key *** --max-num-seqs 8"),
    ("--api-keys=sk-empty", "--api-keys=***"),
    ("HF_TOKEN=hf_abcdefghijklmnop --speculate 2", "HF_TOKEN=*** --speculate 2"),
    ("token hf_abcdefghijklmnopqrst in text", "token *** in text"),
    ("Bearer sk-proj-abcdefghijkl", "Bearer ***"),
    ("--max-total-tokens 4096 --quantize awq", "--max-total-tokens 4096 --quantize awq"),
])
def test_redact(given: str, kept: str):
    assert redact(given) == kept


def test_url_credentials_are_dropped():
    assert redact_url("https://user:pw@api.example.com:8443/x") == "https://api.example.com:8443/x"
    assert redact_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
