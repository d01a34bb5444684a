"""The stylesheet of the chat (Textual CSS), kept in Python so that it ships with the package."""

CSS = """
Screen { layout: vertical; }
#log { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
#hint { height: auto; padding: 0 1; color: $text-muted; display: none; }
#hint.-shown { display: block; }
#prompt { height: auto; max-height: 10; border-top: solid $primary; padding: 0 1; }
#status { height: 1; padding: 0 1; background: $panel; }
.user { margin-top: 1; color: $accent; text-style: bold; }
.notice { color: $text-muted; }
.notice.warn { color: $warning; }
.notice.error { color: $error; }
.assistant { height: auto; }
.answer { margin: 0; padding: 0; }
.reasoning { color: $text-muted; text-style: italic; border: none; padding: 0; margin: 0; }
.reasoning Contents { padding: 0 0 0 2; }
.tool { height: auto; }
.tool-header { color: $text; }
.tool-header:focus { background: $boost; }
.tool-output { color: $text-muted; padding: 0 0 0 2; max-height: 20; overflow-y: auto; }
ModalScreen.question { align: center middle; }
.dialog { width: 90%; max-width: 100; height: auto; max-height: 90%; border: thick $accent; background: $surface; padding: 1 2; }
.dialog .command { margin: 1 0; padding: 0 1; background: $boost; }
.dialog .dim { color: $text-muted; }
.dialog .buttons { height: auto; margin-top: 1; }
.dialog Button { margin-right: 1; }
.dialog.sessions OptionList { height: auto; max-height: 20; }
"""
