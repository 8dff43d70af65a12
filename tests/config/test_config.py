"""Settings: environment, .env, config/defaults.env, built-in defaults, ConfigError messages, and where
the path settings point from any working directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from brain.config import PATH_FIELDS, Settings, env_name, find_project_root, load_settings
from brain.model.errors import BrainError, ConfigError

ROOT = Path(__file__).resolve().parents[2]
REPO_DEFAULTS = ROOT / "config" / "defaults.env"
#: the docs site's settings reference, whose table is generated from the model
SETTINGS_PAGE = ROOT / "docs" / "reference" / "settings.md"

BUILT_IN = {
    "rag_enabled": True,
    "enable_persona": True,
    "enable_faq": True,
    "enable_memory": True,
    "enable_turn": True,
    "enable_summary": True,
    "turn_top_k": 4,
    "faq_top_k": 2,
    "memory_top_k": 3,
    "summary_top_k": 2,
    "weight_similarity": 0.5,
    "weight_importance": 0.5,
    "weight_recency": 0.1,
    "recency_half_life_days": 30.0,
    "chroma_url": None,
    "embedder": "local/minilm-l6-v2",
    "ollama_host": "http://127.0.0.1:11434",
}

ENV_NAMES = {
    "rag_enabled": "RAG_ENABLED",
    "enable_persona": "RAG_ENABLE_PERSONA",
    "enable_faq": "RAG_ENABLE_FAQ",
    "enable_memory": "RAG_ENABLE_MEMORY",
    "enable_turn": "RAG_ENABLE_TURN",
    "enable_summary": "RAG_ENABLE_SUMMARY",
    "turn_top_k": "RAG_TURN_TOP_K",
    "faq_top_k": "RAG_FAQ_TOP_K",
    "memory_top_k": "RAG_MEMORY_TOP_K",
    "summary_top_k": "RAG_SUMMARY_TOP_K",
    "weight_similarity": "RAG_WEIGHT_SIMILARITY",
    "weight_importance": "RAG_WEIGHT_IMPORTANCE",
    "weight_recency": "RAG_WEIGHT_RECENCY",
    "recency_half_life_days": "RAG_RECENCY_HALF_LIFE_DAYS",
    "data_dir": "BRAIN_DATA_DIR",
    "chroma_url": "BRAIN_CHROMA_URL",
    "embedder": "BRAIN_EMBEDDER",
    "ollama_host": "OLLAMA_HOST",
}


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path, monkeypatch):
    """Every test runs in an empty directory: no .env, no config/defaults.env unless the test writes one
    (conftest points XDG_CONFIG_HOME and XDG_DATA_HOME into it too)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def project(root: Path, defaults: str = "", dot_env: str | None = None) -> Path:
    """Make ``root`` a project: its config/defaults.env (and .env) with these lines."""
    write(root / "config" / "defaults.env", defaults)
    if dot_env is not None:
        write(root / ".env", dot_env)
    return root


def config_error(**kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        Settings(**kwargs)
    assert isinstance(info.value, BrainError)
    return str(info.value)


# --- defaults ---------------------------------------------------------------------------------


def test_built_in_defaults_without_any_file(tmp_path):
    settings = Settings()
    assert {name: getattr(settings, name) for name in BUILT_IN} == BUILT_IN
    # no project: the user-level places
    assert settings.data_dir == tmp_path / "xdg-data" / "brain"
    assert settings.persona_path == tmp_path / "xdg-config" / "brain" / "persona.md"
    assert settings.specialists_path == tmp_path / "xdg-config" / "brain" / "specialists.yaml"
    assert settings.mirror_file == tmp_path / "xdg-data" / "brain" / "mirror.db"
    assert settings.layout.root is None and "user-level" in settings.origin("data_dir")
    assert settings.snapshot_key_dir == Path(os.environ["XDG_STATE_HOME"]) / "brain" / "snapshot-keys"


def test_repo_defaults_env_matches_built_in_defaults(tmp_path):
    (tmp_path / "config").mkdir()
    shutil.copy(REPO_DEFAULTS, tmp_path / "config" / "defaults.env")
    settings = Settings()
    assert {name: getattr(settings, name) for name in BUILT_IN} == BUILT_IN
    for name, field in Settings.model_fields.items():
        if name not in PATH_FIELDS:
            assert getattr(settings, name) == field.get_default(call_default_factory=True), name
    # the shipped file names the project's own places, the same the project gives without it
    shipped = {name: getattr(settings, name) for name in PATH_FIELDS}
    assert shipped == {
        "data_dir": tmp_path / "data",
        "persona_path": tmp_path / "persona.md",
        "specialists_path": tmp_path / "config" / "specialists.yaml",
        "mirror_path": None,
        "index_snapshot_path": None,
        "snapshot_key_dir": Path(os.environ["XDG_STATE_HOME"]) / "brain" / "snapshot-keys",
    }
    (tmp_path / "config" / "defaults.env").write_text("", encoding="utf-8")
    assert {name: getattr(Settings(), name) for name in PATH_FIELDS} == shipped


def test_every_variable_in_repo_defaults_env_is_a_known_setting():
    known = {env_name(name) for name in Settings.model_fields}
    keys = [
        line.split("=", 1)[0].strip()
        for line in REPO_DEFAULTS.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert keys, "defaults.env lists no variables"
    assert set(keys) <= known, set(keys) - known


@pytest.mark.parametrize("field, var", sorted(ENV_NAMES.items()))
def test_env_name_of_each_setting(field, var):
    assert env_name(field) == var


# --- environment variables --------------------------------------------------------------------


@pytest.mark.parametrize(
    "var, value, field, expected",
    [
        ("RAG_TURN_TOP_K", "7", "turn_top_k", 7),
        ("RAG_TURN_TOP_K", "1", "turn_top_k", 1),
        ("RAG_TURN_TOP_K", "20", "turn_top_k", 20),
        ("RAG_FAQ_TOP_K", "10", "faq_top_k", 10),
        ("RAG_MEMORY_TOP_K", "20", "memory_top_k", 20),
        ("RAG_SUMMARY_TOP_K", "1", "summary_top_k", 1),
        ("RAG_WEIGHT_SIMILARITY", "0.7", "weight_similarity", 0.7),
        ("RAG_WEIGHT_IMPORTANCE", "0", "weight_importance", 0.0),
        ("RAG_WEIGHT_RECENCY", "1", "weight_recency", 1.0),
        ("RAG_RECENCY_HALF_LIFE_DAYS", "7.5", "recency_half_life_days", 7.5),
        ("BRAIN_DATA_DIR", "/srv/brain-data", "data_dir", Path("/srv/brain-data")),
        ("BRAIN_CHROMA_URL", "http://127.0.0.1:8000", "chroma_url", "http://127.0.0.1:8000"),
        ("BRAIN_CHROMA_URL", "https://chroma.example.com", "chroma_url", "https://chroma.example.com"),
        ("BRAIN_CHROMA_URL", "", "chroma_url", None),
        ("BRAIN_EMBEDDER", "ollama/nomic-embed-text", "embedder", "ollama/nomic-embed-text"),
        ("OLLAMA_HOST", "http://gpu-box:11434", "ollama_host", "http://gpu-box:11434"),
    ],
)
def test_env_var_sets_setting(monkeypatch, var, value, field, expected):
    monkeypatch.setenv(var, value)
    assert getattr(Settings(), field) == expected


@pytest.mark.parametrize("var", [v for v in ENV_NAMES.values() if v.startswith(("RAG_ENABLE_", "RAG_ENABLED"))])
@pytest.mark.parametrize(
    "value, expected",
    [
        ("false", False),
        ("0", False),
        ("FALSE", False),
        ("no", False),
        ("off", False),
        ("true", True),
        ("1", True),
        ("yes", True),
    ],
)
def test_boolean_env_vars(monkeypatch, var, value, expected):
    monkeypatch.setenv(var, value)
    settings = Settings()
    field = next(f for f, v in ENV_NAMES.items() if v == var)
    assert getattr(settings, field) is expected
    # the other switches are untouched
    for other, other_var in ENV_NAMES.items():
        if other_var != var and isinstance(BUILT_IN.get(other), bool):
            assert getattr(settings, other) is True


def test_bad_boolean_names_variable_and_value(monkeypatch):
    monkeypatch.setenv("RAG_ENABLE_MEMORY", "maybe")
    message = config_error()
    assert "RAG_ENABLE_MEMORY='maybe'" in message
    assert "boolean" in message


# --- out-of-range values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "var, value, allowed",
    [
        ("RAG_TURN_TOP_K", "0", "1..20"),
        ("RAG_TURN_TOP_K", "21", "1..20"),
        ("RAG_FAQ_TOP_K", "0", "1..10"),
        ("RAG_FAQ_TOP_K", "11", "1..10"),
        ("RAG_MEMORY_TOP_K", "0", "1..20"),
        ("RAG_MEMORY_TOP_K", "21", "1..20"),
        ("RAG_SUMMARY_TOP_K", "0", "1..10"),
        ("RAG_SUMMARY_TOP_K", "11", "1..10"),
        ("RAG_WEIGHT_SIMILARITY", "1.5", "0.0..1.0"),
        ("RAG_WEIGHT_IMPORTANCE", "-0.1", "0.0..1.0"),
        ("RAG_WEIGHT_RECENCY", "2", "0.0..1.0"),
        ("RAG_RECENCY_HALF_LIFE_DAYS", "0", "more than 0.0 and 36500.0"),
        ("RAG_RECENCY_HALF_LIFE_DAYS", "-5", "more than 0.0 and 36500.0"),
        ("RAG_TURN_TOP_K", "abc", "1..20"),
        ("RAG_TURN_TOP_K", "4.5", "1..20"),
    ],
)
def test_out_of_range_env_var_raises_config_error(monkeypatch, var, value, allowed):
    monkeypatch.setenv(var, value)
    message = config_error()
    assert f"{var}={value!r} is not allowed" in message
    assert f"must be in {allowed}" in message


def test_out_of_range_field_name_kwarg_is_reported_by_variable_name():
    message = config_error(turn_top_k=70)
    assert "RAG_TURN_TOP_K=70 is not allowed: must be in 1..20" in message


def test_several_bad_values_are_all_reported(monkeypatch):
    monkeypatch.setenv("RAG_FAQ_TOP_K", "99")
    monkeypatch.setenv("RAG_WEIGHT_RECENCY", "7")
    message = config_error()
    assert "RAG_FAQ_TOP_K='99'" in message
    assert "RAG_WEIGHT_RECENCY='7'" in message


def test_load_settings_raises_config_error_too():
    with pytest.raises(ConfigError, match=r"RAG_MEMORY_TOP_K=0 is not allowed: must be in 1\.\.20"):
        load_settings(memory_top_k=0)
    assert load_settings(memory_top_k=5).memory_top_k == 5


# --- URL and embedder ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["ftp://host:21", "localhost:8000", "127.0.0.1:8000", "http://", "http://:8000", "not a url", "file:///tmp/db"],
)
def test_bad_chroma_url(monkeypatch, url):
    monkeypatch.setenv("BRAIN_CHROMA_URL", url)
    message = config_error()
    assert f"BRAIN_CHROMA_URL={url!r} is not allowed" in message
    assert "must be an http(s) URL" in message


@pytest.mark.parametrize("name", ["minilm", "local/", "/minilm", "a/b/c", "local/ minilm", "local minilm/x", ""])
def test_bad_embedder_name(monkeypatch, name):
    monkeypatch.setenv("BRAIN_EMBEDDER", name)
    message = config_error()
    assert f"BRAIN_EMBEDDER={name!r} is not allowed" in message
    assert "must look like provider/model" in message


@pytest.mark.parametrize("field", ["chat_upstream_key", "openai_api_key"])
def test_a_key_given_as_another_type_than_text_is_a_config_error_naming_it(field):
    with pytest.raises(ConfigError) as refused:
        Settings(**{field: 12345})
    assert env_name(field) in str(refused.value) and "valid string" in str(refused.value)
    assert "12345" not in str(refused.value)  # a key is never printed
    assert Settings(**{field: "  "}).model_dump()[field] is None  # blank means unset
    assert Settings(**{field: " sk-x "}).model_dump()[field].get_secret_value() == "sk-x"


def test_bad_embedder_kwarg():
    assert "BRAIN_EMBEDDER='nomodel' is not allowed" in config_error(embedder="nomodel")


# --- .env and precedence ----------------------------------------------------------------------


def test_dot_env_of_the_project_is_read(tmp_path):
    project(tmp_path)
    write(
        tmp_path / ".env",
        "RAG_TURN_TOP_K=9\nRAG_ENABLE_FAQ=false\nBRAIN_EMBEDDER=ollama/nomic-embed-text\nUNRELATED_VARIABLE=whatever\n",
    )
    settings = Settings()
    assert settings.turn_top_k == 9
    assert settings.enable_faq is False
    assert settings.embedder == "ollama/nomic-embed-text"
    assert settings.faq_top_k == 2


def test_dot_env_variable_names_are_case_insensitive(tmp_path):
    project(tmp_path, dot_env="rag_memory_top_k=6\n")
    assert Settings().memory_top_k == 6


def test_out_of_range_value_in_dot_env_names_the_variable(tmp_path):
    project(tmp_path, dot_env="RAG_FAQ_TOP_K=40\n")
    assert "RAG_FAQ_TOP_K='40' is not allowed: must be in 1..10" in config_error()


def test_out_of_range_value_in_defaults_env_names_the_variable(tmp_path):
    write(tmp_path / "config" / "defaults.env", "RAG_SUMMARY_TOP_K=0\n")
    assert "RAG_SUMMARY_TOP_K='0' is not allowed: must be in 1..10" in config_error()


def test_defaults_env_is_read(tmp_path):
    write(tmp_path / "config" / "defaults.env", "RAG_SUMMARY_TOP_K=5\nRAG_ENABLED=0\n")
    settings = Settings()
    assert settings.summary_top_k == 5
    assert settings.rag_enabled is False


def test_precedence_env_over_dot_env_over_defaults_env_over_built_in(tmp_path, monkeypatch):
    write(
        tmp_path / "config" / "defaults.env",
        "RAG_TURN_TOP_K=11\nRAG_FAQ_TOP_K=3\nRAG_MEMORY_TOP_K=5\nRAG_WEIGHT_RECENCY=0.2\n",
    )
    write(tmp_path / ".env", "RAG_FAQ_TOP_K=4\nRAG_MEMORY_TOP_K=6\nRAG_WEIGHT_RECENCY=0.3\n")
    monkeypatch.setenv("RAG_MEMORY_TOP_K", "8")
    monkeypatch.setenv("RAG_WEIGHT_RECENCY", "0.4")
    settings = Settings()
    assert settings.summary_top_k == 2  # built-in only
    assert settings.turn_top_k == 11  # defaults.env only
    assert settings.faq_top_k == 4  # .env beats defaults.env
    assert settings.memory_top_k == 8  # environment beats .env
    assert settings.weight_recency == 0.4  # environment beats both files


def test_env_false_overrides_dot_env_true(tmp_path, monkeypatch):
    write(tmp_path / ".env", "RAG_ENABLE_TURN=true\n")
    monkeypatch.setenv("RAG_ENABLE_TURN", "false")
    assert Settings().enable_turn is False


def test_good_env_overrides_bad_file_value(tmp_path, monkeypatch):
    write(tmp_path / ".env", "RAG_TURN_TOP_K=99\n")
    monkeypatch.setenv("RAG_TURN_TOP_K", "2")
    assert Settings().turn_top_k == 2


# --- keyword arguments --------------------------------------------------------------------------


def test_field_name_kwargs():
    settings = Settings(
        memory_top_k=5,
        rag_enabled=False,
        weight_similarity=0.9,
        data_dir="/x/y",
        chroma_url="http://h:1",
        embedder="ollama/m",
    )
    assert settings.memory_top_k == 5
    assert settings.rag_enabled is False
    assert settings.weight_similarity == 0.9
    assert settings.data_dir == Path("/x/y")
    assert settings.chroma_url == "http://h:1"
    assert settings.embedder == "ollama/m"


def test_variable_name_kwargs():
    settings = Settings(RAG_TURN_TOP_K=9, RAG_ENABLE_SUMMARY="false")
    assert settings.turn_top_k == 9
    assert settings.enable_summary is False


def test_kwargs_beat_environment_and_files(tmp_path, monkeypatch):
    write(tmp_path / ".env", "RAG_TURN_TOP_K=5\n")
    monkeypatch.setenv("RAG_TURN_TOP_K", "6")
    assert Settings(turn_top_k=7).turn_top_k == 7


def test_chunk_overlap_must_be_below_the_window():
    from brain.config import Settings
    from brain.model.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        Settings(chunk_window=50, chunk_overlap=60)
    assert str(err.value) == "invalid settings: BRAIN_CHUNK_OVERLAP=60 must be smaller than BRAIN_CHUNK_WINDOW=50"


# --- where the paths point, from any working directory ---------------------------------------------


def test_a_dot_env_outside_any_project_is_not_read(tmp_path):
    write(tmp_path / ".env", "RAG_TURN_TOP_K=9\nBRAIN_DATA_DIR=here\n")
    settings = Settings()
    assert settings.turn_top_k == 4 and settings.data_dir == tmp_path / "xdg-data" / "brain"


def test_the_user_level_dot_env_is_read_outside_a_project(tmp_path):
    write(tmp_path / "xdg-config" / "brain" / ".env", "RAG_TURN_TOP_K=9\nBRAIN_DATA_DIR=store\n")
    settings = Settings()
    assert settings.turn_top_k == 9
    assert settings.data_dir == tmp_path / "xdg-config" / "brain" / "store"  # relative to that directory


def test_every_subdirectory_of_a_project_resolves_the_same_paths(tmp_path, monkeypatch):
    root = project(
        tmp_path / "proj",
        "BRAIN_DATA_DIR=data\nBRAIN_PERSONA_PATH=persona.md\n",
        dot_env="BRAIN_SPECIALISTS_PATH=config/tools.yaml\nRAG_TURN_TOP_K=7\n",
    )
    (root / "config" / "kb" / "deep").mkdir(parents=True)
    seen = []
    for cwd in (root, root / "config", root / "config" / "kb" / "deep"):
        monkeypatch.chdir(cwd)
        settings = Settings()
        seen.append(
            (
                settings.data_dir,
                settings.persona_path,
                settings.specialists_path,
                settings.turn_top_k,
                settings.layout.root,
            )
        )
    assert seen == [(root / "data", root / "persona.md", root / "config" / "tools.yaml", 7, root)] * 3
    assert find_project_root(root / "config" / "kb" / "deep") == root
    assert Settings().origin("data_dir") == f"BRAIN_DATA_DIR in {root / 'config' / 'defaults.env'}"
    assert Settings().origin("specialists_path") == f"BRAIN_SPECIALISTS_PATH in {root / '.env'}"


def test_relative_paths_in_env_files_are_relative_to_the_project(tmp_path, monkeypatch):
    root = project(tmp_path / "proj", "BRAIN_DATA_DIR=../common-data\nBRAIN_MIRROR_PATH=mirrors/m.db\n")
    (root / "sub").mkdir()
    monkeypatch.chdir(root / "sub")
    settings = Settings()
    assert settings.data_dir == root / ".." / "common-data"
    assert settings.mirror_file == root / "mirrors" / "m.db"


def test_paths_from_arguments_and_the_environment_are_relative_to_the_working_directory(tmp_path, monkeypatch):
    root = project(tmp_path / "proj", "BRAIN_DATA_DIR=data\n")
    (root / "sub").mkdir()
    monkeypatch.chdir(root / "sub")
    monkeypatch.setenv("BRAIN_PERSONA_PATH", "me.md")
    settings = Settings(data_dir="mine")
    assert settings.data_dir == root / "sub" / "mine" and settings.persona_path == root / "sub" / "me.md"
    assert settings.origin("data_dir").startswith("an explicit argument")
    assert settings.origin("persona_path") == "BRAIN_PERSONA_PATH in the environment"
    assert all(getattr(settings, name) is None or getattr(settings, name).is_absolute() for name in PATH_FIELDS)


def test_an_empty_path_value_means_unset(tmp_path, monkeypatch):
    project(tmp_path, "BRAIN_MIRROR_PATH=\nBRAIN_DATA_DIR=\n")
    settings = Settings()
    assert settings.mirror_path is None and settings.data_dir == tmp_path / "data"


def test_an_empty_owner_id_means_unset(tmp_path):
    """config/defaults.env shows `# BRAIN_OWNER_ID=`: uncommented as it is, it leaves the owner unset."""
    project(tmp_path, "BRAIN_OWNER_ID=\n")
    assert Settings().owner_id is None
    assert Settings(owner_id="me").owner_id == "me"


def test_the_project_can_be_named(tmp_path, monkeypatch):
    root = project(tmp_path / "proj", "RAG_TURN_TOP_K=8\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert Settings().turn_top_k == 4  # no project above
    assert load_settings(root).turn_top_k == 8 and load_settings(root).data_dir == root / "data"
    monkeypatch.setenv("BRAIN_PROJECT_DIR", str(root))
    settings = Settings()
    assert (
        settings.turn_top_k == 8 and settings.layout.root == root and "BRAIN_PROJECT_DIR" in settings.origin("data_dir")
    )
    monkeypatch.setenv("BRAIN_PROJECT_DIR", str(tmp_path / "nowhere"))
    message = config_error()
    assert "BRAIN_PROJECT_DIR" in message and "nowhere" in message and "not a directory" in message


# --- the model documents itself: sections, descriptions, names, generated files ---------------------

#: every variable name documented before the settings were put in sections; each must keep working
DOCUMENTED_NAMES = """
RAG_ENABLED RAG_ENABLE_PERSONA RAG_ENABLE_FAQ RAG_ENABLE_MEMORY RAG_ENABLE_TURN RAG_ENABLE_SUMMARY RAG_TURN_TOP_K
RAG_ENABLE_RELATED_TURNS RAG_RELATED_TURN_TOP_K RAG_FAQ_TOP_K RAG_MEMORY_TOP_K RAG_SUMMARY_TOP_K
RAG_WEIGHT_SIMILARITY RAG_WEIGHT_IMPORTANCE RAG_WEIGHT_RECENCY RAG_RECENCY_HALF_LIFE_DAYS BRAIN_DATA_DIR
BRAIN_CHROMA_URL BRAIN_COLLECTION BRAIN_INDEX_TYPES BRAIN_INDEX_REFRESH_SECONDS BRAIN_CHUNK_WINDOW
BRAIN_CHUNK_OVERLAP BRAIN_PERSONA_PATH BRAIN_EMBEDDER BRAIN_EMBED_BATCH_SIZE BRAIN_QUERY_CACHE_SIZE OLLAMA_HOST
BRAIN_OLLAMA_TIMEOUT BRAIN_MIRROR_ENABLED BRAIN_MIRROR_PATH BRAIN_MIRROR_TYPES BRAIN_MIRROR_BATCH_SIZE
BRAIN_OWNER_ID RAG_CONTEXT_MAX_CHARS RAG_CONTEXT_MAX_TOKENS RAG_SUMMARY_EVERY_N BRAIN_SUMMARIZER
BRAIN_SUMMARY_MODEL BRAIN_SUMMARY_RETRIES BRAIN_SUMMARY_BACKOFF_SECONDS BRAIN_SUMMARY_TIMEOUT
BRAIN_SUMMARY_DEADLINE_SECONDS BRAIN_SUMMARY_COOLDOWN_SECONDS BRAIN_CONSOLIDATE_THRESHOLD RAG_TRACK_ACCESS
RAG_RECENCY_FROM BRAIN_API_HOST BRAIN_API_PORT BRAIN_API_TOKEN BRAIN_API_TOKENS_FILE BRAIN_API_MAX_BODY_BYTES
BRAIN_SPECIALISTS_PATH BRAIN_SPECIALISTS_COLLECTION BRAIN_SPECIALIST_WEIGHT_CANONICAL
BRAIN_SPECIALIST_WEIGHT_PREDICATES BRAIN_SPECIALIST_WEIGHT_OBJECTS BRAIN_SPECIALIST_WEIGHT_LEXICAL
BRAIN_SPECIALIST_NOT_PENALTY BRAIN_SPECIALIST_NOT_MARGIN BRAIN_SPECIALIST_BAND_STRONG BRAIN_SPECIALIST_BAND_GOOD
BRAIN_SPECIALIST_BAND_POSSIBLE BRAIN_SPECIALIST_CACHE_TTL_SECONDS BRAIN_SPECIALIST_CACHE_SIZE
""".split()


def test_every_setting_has_a_section_and_a_description():
    from brain.config import SETTING_GROUPS, bounds

    for name, field in Settings.model_fields.items():
        assert field.json_schema_extra["group"] in SETTING_GROUPS, name
        assert field.description and len(field.description) >= 15, name
        if field.annotation in (int, float):
            assert bounds(name) is not None, f"{name} has no range"


def test_every_variable_follows_the_prefix_rule():
    from brain.config import FOREIGN_VARIABLES, SETTING_GROUPS

    for name, field in Settings.model_fields.items():
        group = field.json_schema_extra["group"]
        expected = "RAG_" if group in ("context", "ranking") else "BRAIN_"
        assert SETTING_GROUPS[group].prefix == expected
        assert env_name(name).startswith(expected) or env_name(name) in FOREIGN_VARIABLES, env_name(name)


def test_a_section_refuses_a_variable_against_its_prefix():
    from brain.config.sections import context_setting as context

    with pytest.raises(TypeError, match="RAG_"):
        context("BRAIN_SOMETHING", 1, "a setting in the wrong section")


@pytest.mark.parametrize("var", DOCUMENTED_NAMES)
def test_every_documented_name_still_sets_its_setting(monkeypatch, var):
    from brain.config import env_names
    from brain.config.docs import env_value

    field = next((name for name in Settings.model_fields if var in env_names(name)), None)
    assert field is not None, f"{var} no longer sets any setting"
    default = Settings.model_fields[field].get_default(call_default_factory=True)
    monkeypatch.setenv(var, "" if default is None else env_value(default))
    if field not in PATH_FIELDS:
        assert getattr(Settings(), field) == default


def test_summary_every_n_is_read_from_the_rule_name_and_the_older_one(monkeypatch):
    assert env_name("summary_every_n") == "BRAIN_SUMMARY_EVERY_N"
    monkeypatch.setenv("RAG_SUMMARY_EVERY_N", "7")
    assert Settings().summary_every_n == 7
    monkeypatch.setenv("BRAIN_SUMMARY_EVERY_N", "9")
    assert Settings().summary_every_n == 9  # the rule's name wins over the older one
    monkeypatch.delenv("BRAIN_SUMMARY_EVERY_N")
    monkeypatch.setenv("RAG_SUMMARY_EVERY_N", "0")
    message = config_error()
    assert "BRAIN_SUMMARY_EVERY_N or RAG_SUMMARY_EVERY_N='0' is not allowed: must be in 1..1000" in message


@pytest.mark.parametrize(
    "var, field",
    [
        ("COLLECTION", "collection"),
        ("API_TOKEN", "api_token"),
        ("DATA_DIR", "data_dir"),
        ("MEMORY_TOP_K", "memory_top_k"),
    ],
)
def test_a_variable_named_like_a_field_is_not_a_setting(tmp_path, monkeypatch, var, field):
    """Field names are for Python callers: a stray DATA_DIR or API_TOKEN in the environment must not
    move the data or become the admin token."""
    project(tmp_path, dot_env="")
    before = getattr(Settings(), field)
    monkeypatch.setenv(var, "somethingelse-0123456789")
    write(tmp_path / ".env", f"{var.lower()}=somethingelse-0123456789\n")
    assert getattr(Settings(), field) == before
    assert Settings(**{field: before}).model_fields_set >= {field}  # a Python caller may use the field name


def test_closed_sets_are_literal_types():
    from typing import get_args

    from brain.config.docs import choices
    from brain.providers.summarizers import SUMMARIZER_KINDS

    assert set(choices("summarizer")) == set(SUMMARIZER_KINDS)
    assert choices("recency_from") == ("created", "last_used")
    assert set(get_args(Settings.model_fields["recency_from"].annotation)) == {"created", "last_used"}


@pytest.mark.parametrize("var, value", [("BRAIN_SUMMARIZER", "gpt"), ("RAG_RECENCY_FROM", "accessed")])
def test_a_value_outside_a_closed_set_names_the_choices(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    message = config_error()
    assert f"{var}={value!r} is not allowed" in message
    assert all(
        f"'{choice}'" in message
        for choice in {"BRAIN_SUMMARIZER": ("ollama", "extractive"), "RAG_RECENCY_FROM": ("created", "last_used")}[var]
    )


def test_document_type_lists_are_tuples_read_comma_separated(monkeypatch):
    settings = Settings()
    assert settings.index_types == ("memory", "persona", "faq", "summary") == settings.indexed_types
    assert settings.mirror_types == ("memory", "turn", "summary") == settings.mirrored_types
    monkeypatch.setenv("BRAIN_INDEX_TYPES", " memory , faq,faq")
    monkeypatch.setenv("BRAIN_MIRROR_TYPES", "turn,memory")
    settings = Settings()
    assert settings.index_types == ("memory", "faq") and settings.mirror_types == ("turn", "memory")
    assert Settings(index_types=["memory", "turn"]).indexed_types == ("memory", "turn")
    # model_copy does not validate; the properties still give the list a caller meant
    assert settings.model_copy(update={"mirror_types": "memory,faq"}).mirrored_types == ("memory", "faq")


@pytest.mark.parametrize(
    "var, value, expected",
    [
        ("BRAIN_INDEX_TYPES", "faq", "must include memory"),
        ("BRAIN_MIRROR_TYPES", "turn", "must include memory"),
        ("BRAIN_INDEX_TYPES", "memory,notes", "unknown document types ['notes']"),
        ("BRAIN_MIRROR_TYPES", '["memory"]', "unknown document types"),
    ],
)
def test_bad_document_type_lists(monkeypatch, var, value, expected):
    monkeypatch.setenv(var, value)
    message = config_error()
    assert f"{var}={value!r} is not allowed" in message and expected in message


def test_provider_facts_come_from_the_providers():
    from brain.providers.embeddings import local as local_embedder
    from brain.providers.embeddings import max_input_tokens
    from brain.providers.embeddings import ollama as ollama_embedder
    from brain.providers.summarizers import ExtractiveSummarizer, OllamaSummarizer
    from brain.providers.summarizers import ollama as ollama_summarizer
    from brain.wiring import get_summarizer

    settings = Settings()
    assert settings.embedder == local_embedder.LocalMiniLMEmbedder.name
    assert settings.summary_model == ollama_summarizer.DEFAULT_MODEL
    assert max_input_tokens("local/minilm-l6-v2") == local_embedder.MAX_TOKENS == 256
    assert max_input_tokens("ollama/nomic-embed-text") == ollama_embedder.MAX_TOKENS == 512
    assert isinstance(get_summarizer(Settings(summarizer=ExtractiveSummarizer.kind)), ExtractiveSummarizer)
    assert isinstance(get_summarizer(Settings(summarizer=OllamaSummarizer.kind)), OllamaSummarizer)


@pytest.mark.parametrize("model", ["", "  ", "llama 3"])
def test_summary_model_is_checked_by_the_providers_rule(model):
    from brain.config.values import model_name_problem

    assert model_name_problem(model)
    message = config_error(summary_model=model)
    assert f"BRAIN_SUMMARY_MODEL={model!r} is not allowed: {model_name_problem(model)}" in message


def test_committed_defaults_env_and_settings_page_are_generated_from_the_model():
    from brain.config.docs import readme_table, render_defaults_env, render_readme_table

    stale = "is stale: run python scripts/gen_config_docs.py"
    assert REPO_DEFAULTS.read_text(encoding="utf-8") == render_defaults_env(), f"config/defaults.env {stale}"
    page = SETTINGS_PAGE.read_text(encoding="utf-8")
    assert readme_table(page) == render_readme_table(), f"the settings table of {SETTINGS_PAGE.name} {stale}"


def test_every_setting_appears_in_defaults_env_and_the_settings_page_with_its_default():
    """Independent of the renderer: read the committed files as a user would."""
    from dotenv import dotenv_values

    from brain.config.docs import env_value

    text = REPO_DEFAULTS.read_text(encoding="utf-8")
    values = dotenv_values(REPO_DEFAULTS)
    from brain.config.docs import readme_table

    table = readme_table(SETTINGS_PAGE.read_text(encoding="utf-8"))
    for name, field in Settings.model_fields.items():
        var, default = env_name(name), field.get_default(call_default_factory=True)
        if default is None:
            assert var not in values and f"\n# {var}=" in text, var  # documented, left unset
        else:
            assert values.get(var) == env_value(default), var
        row = next((line for line in table.splitlines() if line.startswith(f"| `{var}` |")), None)
        assert row is not None, f"{var} is missing from the settings table of {SETTINGS_PAGE.name}"
        assert ("unset" if default is None else env_value(default).replace("\\", "/")) in row, var


# --- the index snapshot keys --------------------------------------------------------------------


def test_snapshot_keys_live_in_the_user_state_directory_or_where_BRAIN_SNAPSHOT_KEY_DIR_says(tmp_path, monkeypatch):
    project(tmp_path / "proj")
    monkeypatch.chdir(tmp_path / "proj")
    # with a project too: the keys are the user's, outside the project's data directory
    assert Settings().snapshot_key_dir == Path(os.environ["XDG_STATE_HOME"]) / "brain" / "snapshot-keys"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Settings().snapshot_key_dir == tmp_path / "home" / ".local" / "state" / "brain" / "snapshot-keys"
    monkeypatch.setenv("BRAIN_SNAPSHOT_KEY_DIR", "keys")
    assert Settings().snapshot_key_dir == tmp_path / "proj" / "keys"


@pytest.mark.parametrize("inside", ["data", "data/keys", "data/../data/sub/keys"])
def test_a_snapshot_key_dir_inside_the_data_directory_is_refused(tmp_path, inside):
    message = config_error(data_dir=tmp_path / "data", snapshot_key_dir=tmp_path / inside)
    assert "BRAIN_SNAPSHOT_KEY_DIR" in message and "inside BRAIN_DATA_DIR" in message
    assert "re-sign" in message and "outside it" in message  # why, and what to set
    # a Chroma server keeps its key on the server: the directory is not used
    Settings(data_dir=tmp_path / "data", snapshot_key_dir=tmp_path / inside, chroma_url="http://127.0.0.1:8000")


def test_a_symlink_into_the_data_directory_is_inside_it(tmp_path):
    (tmp_path / "data" / "keys").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "data" / "keys")
    assert "inside BRAIN_DATA_DIR" in config_error(data_dir=tmp_path / "data", snapshot_key_dir=tmp_path / "link")
    Settings(data_dir=tmp_path / "data", snapshot_key_dir=tmp_path / "datakeys")  # a sibling with a shared prefix
