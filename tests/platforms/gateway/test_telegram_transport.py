"""The Telegram adapter's transport (``_telegram_transport.BotTransport``) against the test Bot
API server: JSON calls on the h11 pool with kept-alive connections, a refusal and a bad token
as :class:`CallFailed` with the token hidden, a silent server as a timeout, and a URL the
environment sends through a proxy left to httpx (which then reaches the proxy, not the server)."""

from __future__ import annotations

import os
import socket

import pytest

from actors.platforms.gateway._retry import CallFailed
from actors.platforms.gateway._telegram_transport import BotTransport
from tests.platforms.gateway.telegram_server import BOT, TOKEN, TelegramServer


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)
    return monkeypatch


async def test_json_calls_go_on_one_kept_alive_connection_and_failures_name_the_method_not_the_token(
    no_proxies: pytest.MonkeyPatch, telegram: TelegramServer
) -> None:
    transport = BotTransport(telegram.base_url, TOKEN)
    try:
        assert await transport.call("getMe", {}, 10.0) == BOT
        telegram.push(4242, "hello")
        updates = await transport.call("getUpdates", {"offset": 0, "timeout": 5}, 15.0)
        assert [u["message"]["text"] for u in updates] == ["hello"]
        sent = await transport.call("sendMessage", {"chat_id": 4242, "text": "hi \u00e9 \U0001f600"}, 10.0)
        assert sent["chat"]["id"] == 4242
        assert [s.raw for s in telegram.delivered(4242)] == ["hi \u00e9 \U0001f600"]
        assert transport.http is None  # every JSON call went on the pool
        assert sum(len(idle) for idle in transport.pool._idle.values()) == 1  # one connection, reused

        wrong = BotTransport(telegram.base_url, "123:not-the-token")
        try:
            with pytest.raises(CallFailed) as refused:
                await wrong.call("getMe", {}, 10.0)
        finally:
            await wrong.aclose()
        assert refused.value.status == 401 and "Unauthorized" in str(refused.value)
    finally:
        await transport.aclose()


async def test_a_server_that_never_answers_is_a_timeout_with_status_0(no_proxies: pytest.MonkeyPatch) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        transport = BotTransport(f"http://127.0.0.1:{listener.getsockname()[1]}", TOKEN)
        try:
            with pytest.raises(CallFailed) as silent:
                await transport.call("getMe", {}, 0.5)
        finally:
            await transport.aclose()
    assert silent.value.status == 0 and str(silent.value).startswith("getMe: no answer within 0.5 s") and TOKEN not in str(silent.value)


async def test_a_bot_api_url_behind_a_proxy_goes_through_httpx(no_proxies: pytest.MonkeyPatch, telegram: TelegramServer) -> None:
    with socket.socket() as refusing:  # a proxy address nothing listens on
        refusing.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{refusing.getsockname()[1]}"
    no_proxies.setenv("HTTP_PROXY", proxy)
    transport = BotTransport(telegram.base_url, TOKEN)
    try:
        with pytest.raises(CallFailed) as unreachable:
            await transport.call("getMe", {}, 10.0)
        assert unreachable.value.status == 0 and TOKEN not in str(unreachable.value)
        assert transport.http is not None and not transport.pool._idle  # httpx tried the proxy; the pool was not used
        no_proxies.setenv("NO_PROXY", "127.0.0.1")
        exempted = BotTransport(telegram.base_url, TOKEN)
        try:
            assert await exempted.call("getMe", {}, 10.0) == BOT  # the pool, straight to the server
            assert exempted.http is None
        finally:
            await exempted.aclose()
    finally:
        await transport.aclose()
