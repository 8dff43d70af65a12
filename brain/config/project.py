"""Where the settings come from on disk: the project (found upward from the working directory, or named)
or the user-level places, its env files, and the path settings' defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from brain.model.errors import ConfigError

#: a directory holding this file is a project root
PROJECT_MARKER = Path("config") / "defaults.env"
LOCAL_ENV_FILE = Path(".env")


def find_project_root(start: str | os.PathLike[str]) -> Path | None:
    """The nearest directory at or above ``start`` that holds ``config/defaults.env``, or None."""
    here = Path(os.path.abspath(start))
    for directory in (here, *here.parents):
        if (directory / PROJECT_MARKER).is_file():
            return directory
    return None


@dataclass(frozen=True)
class ProjectLayout:
    """Where the settings files are and what relative paths in them mean.

    ``root`` is the project root (None without a project); ``base`` is the directory relative paths
    in the env files resolve against (the project root, or the user-level config directory);
    ``env_files`` are read in order, a later file winning (missing ones are skipped); ``defaults``
    are the path settings' defaults; ``searched_from`` is where the upward search started."""

    root: Path | None
    base: Path
    env_files: tuple[Path, ...]
    defaults: Mapping[str, Path]
    searched_from: Path
    how: str = ""  # how the root was found, for messages

    @classmethod
    def discover(
        cls,
        project_dir: str | os.PathLike[str] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> ProjectLayout:
        """The layout for ``project_dir``, else ``BRAIN_PROJECT_DIR``, else the project found upward
        from ``cwd`` (default: the working directory), else the user-level places."""
        environ = os.environ if environ is None else environ
        here = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
        how = "--project"
        if project_dir is None and environ.get("BRAIN_PROJECT_DIR", "").strip():
            project_dir, how = environ["BRAIN_PROJECT_DIR"].strip(), "BRAIN_PROJECT_DIR"
        if project_dir is not None:
            given = (here / Path(project_dir).expanduser()).resolve()
            if not given.is_dir():
                raise ConfigError(
                    f"{how}={str(project_dir)!r} is not a directory; point it at the folder that "
                    f"holds config/defaults.env"
                )
            root: Path | None = given
        else:
            root, how = find_project_root(here), f"found from {here}"
        # the snapshot keys are the user's, out of every data directory, with or without a project
        key_dir = _xdg_home(environ, "XDG_STATE_HOME", ".local/state") / "brain" / "snapshot-keys"
        if root is not None:
            return cls(
                root,
                root,
                (root / PROJECT_MARKER, root / LOCAL_ENV_FILE),
                {
                    "data_dir": root / "data",
                    "persona_path": root / "persona.md",
                    "specialists_path": root / "config" / "specialists.yaml",
                    "snapshot_key_dir": key_dir,
                },
                here,
                how,
            )
        config_home = _xdg_home(environ, "XDG_CONFIG_HOME", ".config") / "brain"
        data_home = _xdg_home(environ, "XDG_DATA_HOME", ".local/share") / "brain"
        return cls(
            None,
            config_home,
            (config_home / LOCAL_ENV_FILE,),
            {
                "data_dir": data_home,
                "persona_path": config_home / "persona.md",
                "specialists_path": config_home / "specialists.yaml",
                "snapshot_key_dir": key_dir,
            },
            here,
            "user-level",
        )

    def describe(self) -> str:
        if self.root is None:
            return f"the user-level places (no project at or above {self.searched_from})"
        return f"the project {self.root} ({self.how})"


def _xdg_home(environ: Mapping[str, str], variable: str, fallback: str) -> Path:
    value = environ.get(variable, "").strip()
    if value and os.path.isabs(value):  # the XDG spec ignores relative values
        return Path(value)
    return Path.home() / fallback
