"""The one secret table: every shape is flagged by the memory threat scan and hidden by the
terminal's output redaction, and ordinary text (hashes, ids, base64 in prose) is neither.

The fake secrets are assembled from pieces so that no token-shaped literal sits in the
repository for a secret scanner to trip over.
"""

from __future__ import annotations

import time

import pytest

from actors.memory import SECRET_PATTERNS, find_secret, redact_secrets, scan_text
from actors.tools._terminal_output import redact, render

NO_ENVIRONMENT: dict[str, str] = {}

ALNUM = "Ab3dEfGh1jKlMn0pQrStUvWx9zAb3dEfGh1jKlMn0pQrStUvWx9z"


def chars(n: int, alphabet: str = ALNUM) -> str:
    return (alphabet * (n // len(alphabet) + 1))[:n]


JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PRIVATE_KEY_BODY = "MIIEowIBAAKCAQEA7zq3" + chars(40)

# (label find_secret gives, text, the secret in it: gone after redaction, never in a scan's reason)
CASES: list[tuple[str, str, str]] = [
    (
        "a private key",
        "-----BEGIN RSA PRIVATE KEY-----\n" + PRIVATE_KEY_BODY + "\n-----END RSA PRIVATE KEY-----\n",
        PRIVATE_KEY_BODY,
    ),
    ("a private key", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + PRIVATE_KEY_BODY, PRIVATE_KEY_BODY),
    ("an Anthropic API key", "key: " + "sk-ant-" + "api03-" + chars(40), "api03-" + chars(40)),
    ("an OpenAI-style API key (sk-...)", "OPENAI says " + "sk-" + chars(48), chars(48)),
    ("an OpenAI-style API key (sk-...)", "use " + "sk-proj-" + chars(40) + " here", chars(40)),
    ("a Stripe secret key", "charge with " + "sk_live_" + chars(24), chars(24)),
    ("a Stripe secret key", "restricted " + "rk_live_" + chars(24), chars(24)),
    ("a GitHub token", "clone with " + "ghp_" + chars(36), chars(36)),
    ("a GitHub token", "oauth " + "gho_" + chars(36), chars(36)),
    ("a GitHub token", "fine-grained " + "github_pat_" + chars(22) + "_" + chars(59), chars(22) + "_" + chars(59)),
    ("a GitLab token", "gitlab " + "glpat-" + chars(20), chars(20)),
    ("a Slack token", "bot " + "xoxb-" + "123456789012-" + chars(24), "123456789012-" + chars(24)),
    ("a Slack token", "user " + "xoxp-" + "123456789012-" + chars(24), "123456789012-" + chars(24)),
    ("an AWS access key", "id " + "AKIA" + "IOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("an AWS access key", "temporary " + "ASIA" + "QWERTYUIOP123456", "QWERTYUIOP123456"),
    ("an AWS secret key", "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("an AWS secret key", '{"SecretAccessKey": "' + chars(40) + '"}', chars(40)),
    ("a Google API key", "maps " + "AIza" + chars(35), chars(35)),
    ("a Hugging Face token", "hub " + "hf_" + chars(34), chars(34)),
    ("an npm token", "registry " + "npm_" + chars(36), chars(36)),
    ("a PyPI token", "upload " + "pypi-" + "AgEIcHlwaS5vcmc" + chars(60), "AgEIcHlwaS5vcmc" + chars(60)),
    ("a Telegram bot token", "bot " + "123456789:" + "AAH" + chars(32), "AAH" + chars(32)),
    ("a JSON Web Token", "session cookie " + JWT, JWT),
    ("an Authorization header", "Authorization: Bearer " + "abc.def-ghi_jkl", "abc.def-ghi_jkl"),
    ("an Authorization header", '{"authorization": "token ' + chars(20) + '"}', chars(20)),
    ("a bearer token", "send it as Bearer " + chars(32), chars(32)),
    ("a credential assignment", "DB_PASSWORD=" + "swordfish123", "swordfish123"),
    ("a credential assignment", "export GITHUB_TOKEN='" + "tok" + "en4321" + "'", "token4321"),
    ("a credential assignment", "  secret=" + "hunter22", "hunter22"),
    ("a credential assignment", "password=" + "correct-horse", "correct-horse"),
    ("a credential assignment", "api_key = '" + "q8w7e6r5t4y3u2i1o0p9" + "'", "q8w7e6r5t4y3u2i1o0p9"),
    ("a credential assignment", '{"client_secret": "' + "a1b2c3d4e5f6g7h8" + '"}', "a1b2c3d4e5f6g7h8"),
    ("a credential assignment", "the staging db password: " + "Tr0ub4dor-horse", "Tr0ub4dor-horse"),
]

ORDINARY = [
    "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b (see the merge 9fceb02).",
    "The request 123e4567-e89b-12d3-a456-426614174000 failed; retry with a new UUID.",
    "Image digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 is pinned.",
    "The header SGVsbG8sIHdvcmxkISBUaGlzIGlzIG5vdCBhIHNlY3JldC4= is base64 for a greeting.",
    "md5 d41d8cd98f00b204e9800998ecf8427e and sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709 are empty.",
    "Uses scikit-learn-compatible-estimators; the task-force-2024-alpha-beta-gamma reviews it.",
    "xoxo-from-the-whole-team-and-good-luck",
    "TOKENIZERS_PARALLELISM=false",
    "MAX_TOKENS=4096",
    "OPENAI_API_KEY=$OPENAI_API_KEY",
    "export HF_TOKEN=${HF_TOKEN}",
    "ANTHROPIC_API_KEY=<your key here>",
    "Authorization: Bearer $TOKEN",
    "The bearer of this letter is a trusted courier.",
    "password: see the team vault",
    "token = request.headers['x-token']",
    "password = get_password_2(user)",
    "Release v1.2.3-rc.4+build.5678 from https://github.com/org/repo/pull/1234 at 2024-01-15T10:30:00Z.",
    "GitHub tokens start with ghp_ and AWS key ids with AKIA; keep them in .env.",
    "Meet at 123456789:00 sharp.",
    "def get_api_key(self) -> str: return self._key",
]


@pytest.mark.parametrize(("label", "text", "secret"), CASES)
def test_the_memory_scan_flags_each_shape_without_echoing_it(label: str, text: str, secret: str) -> None:
    found = find_secret(text)
    assert found is not None and found.label == label, text
    assert secret not in found.context
    threat = scan_text(text)
    assert threat is not None and threat.kind == "secret", text
    assert label in threat.label and secret not in threat.reason


@pytest.mark.parametrize(("label", "text", "secret"), CASES)
def test_the_terminal_hides_each_shape_and_keeps_its_context(label: str, text: str, secret: str) -> None:
    hidden = redact(text, NO_ENVIRONMENT)
    assert secret not in hidden, hidden
    assert "[REDACTED]" in hidden
    assert hidden == redact_secrets(text)
    assert secret not in render(text + "\r\n", NO_ENVIRONMENT)


def test_every_shape_in_the_table_has_a_case() -> None:
    for shape in SECRET_PATTERNS:
        assert any(shape.pattern.search(text) for _, text, _ in CASES), shape.label


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_neither_flagged_nor_redacted(text: str) -> None:
    assert find_secret(text) is None, find_secret(text)
    assert scan_text(text) is None
    assert redact(text, NO_ENVIRONMENT) == text


def test_redaction_names_what_was_there() -> None:
    text = "\n".join(
        [
            "key " + "sk-" + chars(40),
            "Authorization: Bearer " + chars(20),
            "DB_PASSWORD=" + "swordfish123",
            "-----BEGIN EC PRIVATE KEY-----",
            PRIVATE_KEY_BODY,
            "-----END EC PRIVATE KEY-----",
        ]
    )
    assert redact_secrets(text) == "\n".join(
        [
            "key sk-[REDACTED]",
            "Authorization: Bearer [REDACTED]",
            "DB_PASSWORD=[REDACTED]",
            "-----BEGIN EC PRIVATE KEY-----[REDACTED]-----END EC PRIVATE KEY-----",
        ]
    )


def test_environment_values_are_hidden_by_name_before_the_shapes() -> None:
    environ = {"MY_SERVICE_TOKEN": "plain-looking-value", "HOME": "/home/someone"}
    text = "token=plain-looking-value in /home/someone"
    assert redact(text, environ) == "token=[REDACTED:MY_SERVICE_TOKEN] in /home/someone"


HOSTILE = {
    "dashes": "a-" * 25_000,
    "sk runs": "sk-" * 17_000,
    "jwt starts": "eyJ-" * 12_500,
    "name parts": "x-api-key-" * 5_000,
    "secret words": "aws_secret_access_key" * 2_400,
    "env line": "A_" * 25_000 + "B",
    "bearers": "bearer a-" * 5_500,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_long_hostile_output_is_scanned_in_linear_time(text: str) -> None:
    # Quadratic backtracking over 50,000 characters takes tens of seconds; linear, milliseconds.
    started = time.perf_counter()
    redact_secrets(text)
    find_secret(text)
    assert time.perf_counter() - started < 1.0


def test_redaction_is_idempotent() -> None:
    for _, text, _ in CASES:
        once = redact_secrets(text)
        assert redact_secrets(once) == once
