"""What the CLI says beside a server that wants a token: that none is set and how to set one, or that the
one sent was refused; never that a token was sent when none was."""

from __future__ import annotations

import pytest

from brain.app.core import open_store
from brain.model.errors import ConfigError
from brain.ops import ServedOperations
from brain.ops.served import ServerLink
from brain.shells.api import create_app
from tests.conftest import LiveServer, api_settings

TOKEN = "served-token-test-0123456789"


@pytest.fixture
def protected(tmp_path, local_embedder):
    settings = api_settings(tmp_path, api_token=TOKEN)
    with open_store(settings, embedder=local_embedder) as store:
        with LiveServer(create_app(settings, store=store)) as server:
            yield server.url


def test_without_a_token_the_refusal_says_none_is_set_and_how_to_set_it(protected):
    with ServedOperations(ServerLink(protected, token=None)) as served:
        with pytest.raises(ConfigError) as caught:
            served.memories.list()
    message = str(caught.value)
    assert "BRAIN_API_TOKEN is not set here" in message and "set it" in message
    assert "is sent" not in message and "was sent" not in message


def test_a_wrong_token_is_named_as_the_one_sent(protected):
    with ServedOperations(ServerLink(protected, token="not-the-servers-token-0123")) as served:
        with pytest.raises(ConfigError, match="refused the token.*BRAIN_API_TOKEN set here was sent"):
            served.memories.list()
    with ServedOperations(ServerLink(protected, token=TOKEN)) as served:
        assert served.memories.list() == []
