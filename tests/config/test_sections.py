"""The settings sections (brain.config.fields): Settings is all of them, and each reads only its own fields."""

from __future__ import annotations

from brain.config import Settings
from brain.config.fields import SECTIONS, all_fields
from brain.config.naming import env_name


def test_settings_is_every_section_in_order():
    assert list(all_fields()) == list(Settings.model_fields)
    assert all(issubclass(Settings, section) for section in SECTIONS)


def test_no_field_is_in_two_sections():
    names = [name for section in SECTIONS for name in section.model_fields]
    assert len(names) == len(set(names))


def test_a_section_field_keeps_its_environment_variable():
    assert env_name("memory_top_k") == "RAG_MEMORY_TOP_K" and env_name("api_workers") == "BRAIN_API_WORKERS"
    assert Settings(memory_top_k=7).memory_top_k == 7
