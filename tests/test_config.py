"""Settings: environment, .env, config/defaults.env, built-in defaults, ConfigError messages, and where
the path settings point from any working directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from brain.config import PATH_FIELDS, Settings, env_name, find_project_root, load_settings
from brain.errors import BrainError, ConfigError

ROOT = Path(__file__).resolve().parent.parent
REPO_DEFAULTS = ROOT / "config" / "defaults.env"

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
    assert shipped == {"data_dir": tmp_path / "data", "persona_path": tmp_path / "persona.md",
                       "specialists_path": tmp_path / "config" / "specialists.yaml", "mirror_path": None}
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
@pytest.mark.parametrize("value, expected", [("false", False), ("0", False), ("FALSE", False), ("no", False),
                                             ("off", False), ("true", True), ("1", True), ("yes", True)])
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


@pytest.mark.parametrize("url", ["ftp://host:21", "localhost:8000", "127.0.0.1:8000", "http://", "http://:8000",
                                 "not a url", "file:///tmp/db"])
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


def test_bad_embedder_kwarg():
    assert "BRAIN_EMBEDDER='nomodel' is not allowed" in config_error(embedder="nomodel")


# --- .env and precedence ----------------------------------------------------------------------


def test_dot_env_of_the_project_is_read(tmp_path):
    project(tmp_path)
    write(tmp_path / ".env", "RAG_TURN_TOP_K=9\nRAG_ENABLE_FAQ=false\nBRAIN_EMBEDDER=ollama/nomic-embed-text\n"
                             "UNRELATED_VARIABLE=whatever\n")
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
    settings = Settings(memory_top_k=5, rag_enabled=False, weight_similarity=0.9, data_dir="/x/y",
                        chroma_url="http://h:1", embedder="ollama/m")
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
    from brain.errors import ConfigError

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
    root = project(tmp_path / "proj", "BRAIN_DATA_DIR=data\nBRAIN_PERSONA_PATH=persona.md\n",
                   dot_env="BRAIN_SPECIALISTS_PATH=config/tools.yaml\nRAG_TURN_TOP_K=7\n")
    (root / "config" / "kb" / "deep").mkdir(parents=True)
    seen = []
    for cwd in (root, root / "config", root / "config" / "kb" / "deep"):
        monkeypatch.chdir(cwd)
        settings = Settings()
        seen.append((settings.data_dir, settings.persona_path, settings.specialists_path, settings.turn_top_k,
                     settings.layout.root))
    assert seen == [(root / "data", root / "persona.md", root / "config" / "tools.yaml", 7, root)] * 3
    assert find_project_root(root / "config" / "kb" / "deep") == root
    assert Settings().origin("data_dir") == f"BRAIN_DATA_DIR in {root / 'config' / 'defaults.env'}"
    assert Settings().origin("specialists_path") == f"BRAIN_SPECIALISTS_PATH in {root / '.env'}"


def test_relative_paths_in_env_files_are_relative_to_the_project(tmp_path, monkeypatch):
    root = project(tmp_path / "proj", "BRAIN_DATA_DIR=../shared-data\nBRAIN_MIRROR_PATH=mirrors/m.db\n")
    (root / "sub").mkdir()
    monkeypatch.chdir(root / "sub")
    settings = Settings()
    assert settings.data_dir == root / ".." / "shared-data"
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


def test_the_project_can_be_named(tmp_path, monkeypatch):
    root = project(tmp_path / "proj", "RAG_TURN_TOP_K=8\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert Settings().turn_top_k == 4  # no project above
    assert load_settings(root).turn_top_k == 8 and load_settings(root).data_dir == root / "data"
    monkeypatch.setenv("BRAIN_PROJECT_DIR", str(root))
    settings = Settings()
    assert settings.turn_top_k == 8 and settings.layout.root == root and "BRAIN_PROJECT_DIR" in settings.origin("data_dir")
    monkeypatch.setenv("BRAIN_PROJECT_DIR", str(tmp_path / "nowhere"))
    message = config_error()
    assert "BRAIN_PROJECT_DIR" in message and "nowhere" in message and "not a directory" in message
