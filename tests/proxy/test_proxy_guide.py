"""docs/guides/chat-proxy.md as written: its tokens file, then its `openai` and `ollama` examples, run against
`brain serve` in front of the stand-in upstream. The only change is the server's port (the guide's 5000 is
the test server's free one)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import SecretStr

from brain.shells.api import create_app
from tests.conftest import LiveServer
from tests.proxy.conftest import watched
from tests.proxy.openai_stub import OpenAIStub

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "chat-proxy.md"
PEANUTS = "Alice is allergic to peanuts"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


def test_the_guides_examples_run_as_written_and_inject_alices_memory(proxy_store, tmp_path, capsys):
    shell = blocks("bash")[0]
    line = re.search(r"printf '(.*?)\\n' > (\S+)", shell)
    assert line is not None, "the guide shows no tokens file"
    assert re.search(rf"BRAIN_API_TOKENS_FILE={re.escape(line.group(2))}\b", shell)
    tokens_file = tmp_path / line.group(2)
    tokens_file.parent.mkdir(parents=True, exist_ok=True)
    tokens_file.write_text(line.group(1) + "\n", encoding="utf-8")
    proxy_store.upsert_memory(PEANUTS, importance=5, scope="entity:alice")
    examples = [b for b in blocks("python") if "127.0.0.1:5000" in b]
    assert len(examples) == 2, "the guide's openai and ollama examples"
    with OpenAIStub() as stub:
        settings = proxy_store.settings.model_copy(update={
            "chat_upstream": stub.url, "chat_upstream_key": SecretStr("sk-guide"), "api_tokens_file": tokens_file})
        with LiveServer(watched(create_app(settings, store=proxy_store))) as server:
            for i, example in enumerate(examples):
                before = len(stub.chats())
                code = example.replace("http://127.0.0.1:5000", server.url)
                exec(compile(code, f"<chat-proxy.md example {i}>", "exec"), {"__name__": "guide"})  # noqa: S102
                sent = stub.chats()[before:]
                assert len(sent) == 2, "each example sends two messages"
                assert all(PEANUTS in chat.brain_text for chat in sent), "alice's memory did not reach the model"
    assert "You said: Can I eat peanut butter?" in capsys.readouterr().out
