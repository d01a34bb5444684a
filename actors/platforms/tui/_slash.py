"""What each slash command does in the chat app (parsing and completion are in ``_commands``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocols import SessionRecord

from ._commands import Parsed, canonical, did_you_mean, help_text
from ._handle import SessionHandle, TuiError
from ._modals import SessionsScreen
from ._prompt import PromptArea
from ._widgets import usd

if TYPE_CHECKING:
    from ._app import ChatApp

NEEDS_SESSIONS = frozenset({"new", "resume", "sessions", "model", "tools", "cron", "stop", "retry", "undo", "compress", "usage", "tree", "reload"})


class SlashCommands:
    """Runs commands against the app; each answer is a notice in the transcript."""

    def __init__(self, app: ChatApp) -> None:
        self.app = app

    async def run(self, command: Parsed) -> None:
        try:
            await self._run(command)
        except TuiError as exc:
            await self.app.say(str(exc), "error")

    async def _run(self, command: Parsed) -> None:
        app, name, argument = self.app, canonical(command.name), command.argument
        if name == "quit":
            app.quit()
            return
        if name == "help":
            await app.say(help_text())
            return
        if name not in NEEDS_SESSIONS:
            await app.say(did_you_mean(name), "error")
            return
        handle = app.handle
        if handle is None:
            await app.say("the session runtime is still starting; try again in a moment", "error")
            return
        match name:
            case "new":
                old = app.session_id
                await app.switch_session(None)
                await handle.reset_session(old, app.session_id)
                await app.say(f"new session {app.session_id}", "dim")
            case "resume" if argument:
                await self.resume(handle, argument)
            case "resume" | "sessions":
                await self.pick(handle, argument)
            case "model" if argument:
                await handle.switch_model(app.session_id, argument)
                app.session_model = argument
                app._refresh_status()
                await app.say(f"this session calls {argument} from its next turn on (saved with the session)", "dim")
            case "model":
                await app.say(f"model: {app.model_name} (sessions run at {handle.label}); /model <name> switches this session")
            case "undo":
                await self.undo(handle)
            case "compress":
                await app.compress(argument)
            case "tools":
                tools = await handle.tools()
                await app.say("tools: " + ", ".join(tools) if tools is not None else "the server does not publish its tool list")
            case "cron":
                jobs = await handle.jobs()
                if jobs is None:
                    await app.say("no scheduler runs here: scheduled jobs live in 'hermes serve' (hermes attach, or hermes cron list)", "dim")
                else:
                    await app.say("\n".join(["scheduled jobs:", *jobs]) if jobs else "no scheduled jobs")
            case "stop":
                if app.busy:
                    await app.cancel_turn()
                else:
                    await app.say("no turn is running", "dim")
            case "retry":
                if app.last_text is None:
                    await app.say("nothing to retry yet: send a message first", "dim")
                else:
                    await app.conversation.user(app.last_text)
                    await app.send(app.last_text)
            case "usage":
                await self.usage(handle)
            case "tree":
                await app.say(await handle.tree())
            case "reload":
                await app.say("\n".join(await handle.reload()))

    async def undo(self, handle: SessionHandle) -> None:
        """Take back the last exchange, show the session as stored, and put the message back to edit."""
        app = self.app
        if app.busy:
            await app.say("a turn is running; /stop it first, then /undo", "error")
            return
        removed, text = await handle.undo(app.session_id)
        await app.switch_session(app.session_id)
        if text:
            app.query_one(PromptArea).put(text)
        await app.say(f"took back the last exchange ({removed} messages); your message is in the prompt to edit or clear", "dim")

    async def usage(self, handle: SessionHandle) -> None:
        app = self.app
        cached = f" ({app.last_cached} from the prompt cache)" if app.last_cached else ""
        last = f"last turn: {app.last_usage[0]} in{cached}, {app.last_usage[1]} out" if app.last_usage else "no turn finished yet"
        if app.last_usage and app.last_cost is not None:
            last += f" ({usd(app.last_cost)})"
        record = await handle.get_session(app.session_id)
        stored = ""
        if record is not None:
            read = f" ({record.cache_read_tokens} from the prompt cache)" if record.cache_read_tokens else ""
            tokens = f", {record.input_tokens} in{read}, {record.output_tokens} out" if record.input_tokens or record.output_tokens else ""
            stored = f"; the session in the store: {record.message_count} messages{tokens}"
        spent = f" ({usd(app.total_cost)})" if app.total_cost is not None else ""
        await app.say(f"{last}; this session here: {app.total_usage[0]} in, {app.total_usage[1]} out{spent}{stored}")

    async def resume(self, handle: SessionHandle, wanted: str) -> None:
        """Resume by id; else by title (exact, any case), id prefix, or words of the title."""
        record = await handle.get_session(wanted)
        if record is None:
            records = await handle.list_sessions()
            lowered = wanted.lower()
            found = [r for r in records if (r.title or "").lower() == lowered]
            found = found or [r for r in records if r.id.startswith(wanted) or lowered in (r.title or "").lower()]
            if not found:
                await self.app.say(f"no session has the id or title {wanted!r}; /sessions lists them", "error")
                return
            if len(found) > 1:
                await self.pick(handle, "", found)
                return
            record = found[0]
        await self.app.switch_session(record.id)
        await self.app.say(f"resumed {record.title or record.id}", "dim")

    async def pick(self, handle: SessionHandle, query: str, records: list[SessionRecord] | None = None) -> None:
        """The searchable list of sessions; the one picked is resumed."""
        found = records if records is not None else await handle.list_sessions()
        if not found:
            await self.app.say("there are no stored sessions yet", "dim")
            return

        def chosen(session_id: str | None) -> None:
            if session_id is not None:
                self.app.run_worker(self.run(Parsed(name="resume", argument=session_id)), group="command", exit_on_error=False)

        await self.app.push_screen(SessionsScreen(found, query), chosen)
