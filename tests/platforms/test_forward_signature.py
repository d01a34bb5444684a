"""The signature of a request one node forwards to another (``actors.platforms._forward``):
accepted once with the shared secret, refused with another secret, a changed body, path or
method, a stale or future timestamp, or a nonce seen before."""

from __future__ import annotations

from actors.platforms._forward import MAX_SKEW, NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, Replays, check_signed, signed_headers

SECRET = b"0123456789abcdef-cluster"


def test_a_signed_request_is_accepted_once_and_any_change_is_refused() -> None:
    headers = signed_headers(SECRET, "node-a", "POST", "/v1/chat/completions?x=1", b'{"a":1}')
    now = float(headers[TIMESTAMP_HEADER])
    assert check_signed(SECRET, Replays(), "POST", "/v1/chat/completions?x=1", headers, b'{"a":1}', now) is None
    for method, target, body, secret in (
        ("POST", "/v1/chat/completions?x=1", b'{"a":2}', SECRET),
        ("POST", "/v1/chat/completions?x=2", b'{"a":1}', SECRET),
        ("GET", "/v1/chat/completions?x=1", b'{"a":1}', SECRET),
        ("POST", "/v1/chat/completions?x=1", b'{"a":1}', b"another-secret-of-16"),
    ):
        why = check_signed(secret, Replays(), method, target, headers, body, now)
        assert why is not None and "HERMES_CLUSTER_SECRET" in why


def test_a_replayed_or_stale_request_is_refused() -> None:
    replays = Replays()
    headers = signed_headers(SECRET, "node-a", "GET", "/v1/runs/r1", b"")
    now = float(headers[TIMESTAMP_HEADER])
    assert check_signed(SECRET, replays, "GET", "/v1/runs/r1", headers, b"", now) is None
    replayed = check_signed(SECRET, replays, "GET", "/v1/runs/r1", headers, b"", now + 1)
    assert replayed is not None and "replay" in replayed
    stale = check_signed(SECRET, Replays(), "GET", "/v1/runs/r1", headers, b"", now + MAX_SKEW + 1)
    assert stale is not None and "clock" in stale
    early = check_signed(SECRET, Replays(), "GET", "/v1/runs/r1", headers, b"", now - MAX_SKEW - 1)
    assert early is not None and "clock" in early
    unsigned = check_signed(SECRET, Replays(), "GET", "/v1/runs/r1", {**headers, SIGNATURE_HEADER: "", NONCE_HEADER: ""}, b"", now)
    assert unsigned is not None
    assert check_signed(SECRET, Replays(), "GET", "/v1/runs/r1", {}, b"", now) == "the forwarded request has no valid timestamp"
