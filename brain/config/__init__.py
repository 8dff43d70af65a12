"""Settings: one typed model read from the environment and the project's env files.

Nothing else in brain reads ``os.environ``. Every setting is named by its environment
variable; Python callers may also pass the field name (``Settings(memory_top_k=5)``), but the
environment and the env files are read by variable name only.

**Names.** ``RAG_*`` names a setting that decides what a chat request's context holds or how
memories are ranked (the sections, their sizes, the budget, the score's weights and recency);
``BRAIN_*`` names every other setting; ``OLLAMA_HOST`` is Ollama's own variable, so one value serves
brain and the Ollama tools (:data:`FOREIGN_VARIABLES`). The fields are declared in sections
(:data:`SETTING_GROUPS`), each with its prefix, which the section's field factory enforces. A setting
renamed to follow the rule keeps its older name working (``also=``; ``RAG_SUMMARY_EVERY_N``).

**Each field** has a ``description`` (what it does, its unit) and its range as constraints;
:mod:`brain.config.docs` renders ``config/defaults.env`` and the docs site's settings table from them. Closed
sets are ``Literal`` types, lists are tuples (comma-separated in the environment), and facts about a
provider (its model's name, default model, naming rule, input limit) stay in the provider's module.
:class:`Settings` is longer than brain's other classes because it is the one declaration of every
setting (about 70, each with its description); the logic is in the functions.

**Where a setting comes from**, highest first: keyword arguments (the CLI's options such as
``--data-dir``), the process environment, the project's ``.env``, the project's
``config/defaults.env``, the built-in defaults.

**The project** is ``BRAIN_PROJECT_DIR`` (or ``--project``) when set, else the nearest directory at
or above the working directory that holds ``config/defaults.env`` (a brain checkout is one). Its
``config/defaults.env`` and ``.env`` are read, and its files are the defaults: ``data/``,
``persona.md``, ``config/specialists.yaml``. Without a project brain uses user-level places:
``$XDG_CONFIG_HOME/brain`` (``~/.config/brain``) for ``.env``, ``persona.md`` and
``specialists.yaml``, and ``$XDG_DATA_HOME/brain`` (``~/.local/share/brain``) for the data. The embedded
store's index snapshot keys are the user's with or without a project: ``$XDG_STATE_HOME/brain/snapshot-keys``
(``~/.local/state/brain/snapshot-keys``), never inside the data directory.

**Relative paths** given as arguments or in the environment are relative to the working directory,
as any command-line path; relative paths written in an env file are relative to the project root
(or the user-level directory), so a file means the same thing from any directory. Once loaded,
every path setting is absolute.

Modules: :mod:`~brain.config.settings` (the model, :func:`load_settings`), :mod:`~brain.config.sections`
(the sections, their prefixes, the field types), :mod:`~brain.config.sources` (paths made absolute,
their origins), :mod:`~brain.config.project` (the project and the user-level places),
:mod:`~brain.config.naming` (environment names, ranges, error messages).
"""

from __future__ import annotations

from brain.config.naming import allowed_range, bounds, describe_settings_error, env_name, env_names
from brain.config.project import LOCAL_ENV_FILE, PROJECT_MARKER, ProjectLayout, find_project_root
from brain.config.sections import (
    FOREIGN_VARIABLES,
    PATH_FIELDS,
    SETTING_GROUPS,
    SPECIALIST_BAND_DEFAULTS,
    SPECIALIST_CONFIDENCE_DEFAULTS,
    SPECIALIST_EMBEDDER_DEFAULTS,
    SPECIALIST_REFERENCE_EMBEDDER,
    DocTypeList,
    SettingGroup,
    SummarizerKind,
    key_dir_problem,
    specialist_bands_in_order,
)
from brain.config.settings import Settings, load_settings

__all__ = [
    "FOREIGN_VARIABLES",
    "LOCAL_ENV_FILE",
    "PATH_FIELDS",
    "PROJECT_MARKER",
    "SETTING_GROUPS",
    "SPECIALIST_BAND_DEFAULTS",
    "SPECIALIST_CONFIDENCE_DEFAULTS",
    "SPECIALIST_EMBEDDER_DEFAULTS",
    "SPECIALIST_REFERENCE_EMBEDDER",
    "DocTypeList",
    "ProjectLayout",
    "SettingGroup",
    "Settings",
    "SummarizerKind",
    "allowed_range",
    "bounds",
    "describe_settings_error",
    "env_name",
    "env_names",
    "find_project_root",
    "key_dir_problem",
    "load_settings",
    "specialist_bands_in_order",
]
