"""Sessions REST over the real store."""

from __future__ import annotations

from actors.chaos import TextReply
from tests.platforms.server_kit import ServerKit


def test_sessions_can_be_created_listed_renamed_read_forked_searched_and_deleted(api: ServerKit) -> None:
    with api.http() as http:
        created = http.post("/v1/sessions", json={"title": "Planning"})
        assert created.status_code == 201, created.text
        session_id = created.json()["id"]
        assert created.json()["title"] == "Planning"
        api.model.script([TextReply(content="Paris is the capital of France.")], session=session_id)
        chat = http.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "capital of France?"}]}, headers={"X-Hermes-Session-Id": session_id}
        )
        assert chat.status_code == 200
        listed = http.get("/v1/sessions", params={"limit": 10}).json()
        assert session_id in [s["id"] for s in listed["data"]] and listed["has_more"] is False
        renamed = http.patch(f"/v1/sessions/{session_id}", json={"title": "Geography"})
        assert renamed.json()["title"] == "Geography"
        messages = http.get(f"/v1/sessions/{session_id}/messages").json()["data"]
        assert [(m["role"], m["content"]) for m in messages] == [("user", "capital of France?"), ("assistant", "Paris is the capital of France.")]
        hits = http.get("/v1/sessions/search", params={"q": "capital (France"}).json()["data"]
        assert {h["session_id"] for h in hits} == {session_id}
        fork = http.post(f"/v1/sessions/{session_id}/fork")
        assert fork.status_code == 201 and fork.json()["parent_session_id"] == session_id
        assert len(http.get(f"/v1/sessions/{fork.json()['id']}/messages").json()["data"]) == 2
        deleted = http.delete(f"/v1/sessions/{session_id}")
        assert deleted.json()["deleted"] and deleted.json()["messages_deleted"] == 2
        assert http.get(f"/v1/sessions/{session_id}").status_code == 404
        assert http.get(f"/v1/sessions/{fork.json()['id']}").json()["parent_session_id"] is None


def test_session_routes_refuse_bad_input_clearly(api: ServerKit) -> None:
    with api.http() as http:
        assert http.get("/v1/sessions/nope").status_code == 404
        assert http.get("/v1/sessions", params={"limit": "lots"}).json()["error"]["param"] == "limit"
        assert http.get("/v1/sessions/search").json()["error"]["param"] == "q"
        assert http.patch("/v1/sessions/nope", json={}).json()["error"]["param"] == "title"


def test_a_client_can_undo_the_last_exchange_and_switch_the_model_of_a_session(api: ServerKit) -> None:
    with api.http() as http:
        session_id = http.post("/v1/sessions", json={}).json()["id"]
        assert http.post(f"/v1/sessions/{session_id}/undo").status_code == 409  # nothing yet
        api.model.script([TextReply(content="one"), TextReply(content="two"), TextReply(content="three")], session=session_id)
        for text in ("first", "second"):
            chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": text}]}, headers={"X-Hermes-Session-Id": session_id})
            assert chat.status_code == 200
        undone = http.post(f"/v1/sessions/{session_id}/undo")
        assert undone.status_code == 200, undone.text
        assert (undone.json()["removed"], undone.json()["text"]) == (2, "second")
        messages = http.get(f"/v1/sessions/{session_id}/messages").json()["data"]
        assert [m["content"] for m in messages] == ["first", "one"]
        switched = http.patch(f"/v1/sessions/{session_id}", json={"model": "other-model"})
        assert switched.status_code == 200 and switched.json()["model"] == "other-model"
        chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "third"}]}, headers={"X-Hermes-Session-Id": session_id})
        assert chat.json()["choices"][0]["message"]["content"] == "three"
        request = api.model.requests[-1].body
        assert request["model"] == "other-model"
        assert [m["content"] for m in request["messages"] if m["role"] != "system"] == ["first", "one", "third"]
        bad = http.patch(f"/v1/sessions/{session_id}", json={"model": "bad\nname"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "model"
        assert http.post("/v1/sessions/nope/undo").status_code == 404


def test_a_taken_title_is_numbered_instead_of_stopping_the_session(api: ServerKit) -> None:
    with api.http() as http:
        first = http.post("/v1/sessions", json={"title": "Planning"})
        second = http.post("/v1/sessions", json={"title": "Planning"})
        assert (first.status_code, second.status_code) == (201, 201)
        assert (first.json()["title"], second.json()["title"]) == ("Planning", "Planning (2)")
        session_id = second.json()["id"]
        api.model.script([TextReply(content="ready")], session=session_id)
        chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "go"}]}, headers={"X-Hermes-Session-Id": session_id})
        assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] == "ready"


def test_an_untitled_session_takes_the_title_of_its_next_create_and_a_titled_one_keeps_its_own(api: ServerKit) -> None:
    with api.http() as http:
        session_id = http.post("/v1/sessions", json={}).json()["id"]  # made without one (a model switch does that)
        named = http.post("/v1/sessions", json={"id": session_id, "title": "Named later"})
        assert named.status_code == 200 and named.json()["title"] == "Named later"
        again = http.post("/v1/sessions", json={"id": session_id, "title": "Another name"})
        assert again.json()["title"] == "Named later"  # renaming is PATCH's job
