"""The values the shells show and take, from the layers beneath the operations: result and report types, and
the rules that name them (a memory's status, the orders of a listing). A shell imports these from here, so it
depends on the operation layer alone."""

from brain.app.browse import ConversationInfo
from brain.app.forget import ForgetReport
from brain.app.reindex import DropReport, ReindexPlan, ReindexReport
from brain.app.restore import RebuildReport, RecoveryReport
from brain.app.startup import StartupReport
from brain.features.chat import Context, ContextItem, Exchange
from brain.features.chat.formation import FormationBatch, FormationReport
from brain.features.chat.layout import PART_CLOSING, PART_OPENING, SHOWN_KEY, Layout, shown_value, user_content
from brain.features.consolidate import ConsolidationReport, Merge
from brain.features.ingest import IngestReport
from brain.features.mirror import KeywordHit
from brain.features.mirror.protocol import BackfillReport, Coverage, MigrationReport
from brain.features.mirror.sync import RestoreReport, SyncReport, VerifyReport
from brain.features.pam.reports import ExportReport, ImportReport
from brain.features.persona import PersonaLoad
from brain.features.specialists import Specialist, SpecialistMatch
from brain.model.results import Document, Hit, MemoryHit, Supersession
from brain.store.memory_listing import Order as MemoryOrder
from brain.store.memory_listing import status_of

__all__ = [
    "PART_CLOSING",
    "PART_OPENING",
    "SHOWN_KEY",
    "BackfillReport",
    "ConsolidationReport",
    "Context",
    "ContextItem",
    "ConversationInfo",
    "Coverage",
    "Document",
    "DropReport",
    "Exchange",
    "ExportReport",
    "ForgetReport",
    "FormationBatch",
    "FormationReport",
    "Hit",
    "ImportReport",
    "IngestReport",
    "Layout",
    "KeywordHit",
    "MemoryHit",
    "MemoryOrder",
    "Merge",
    "MigrationReport",
    "PersonaLoad",
    "RebuildReport",
    "RecoveryReport",
    "ReindexPlan",
    "ReindexReport",
    "RestoreReport",
    "Specialist",
    "SpecialistMatch",
    "StartupReport",
    "Supersession",
    "shown_value",
    "SyncReport",
    "VerifyReport",
    "status_of",
    "user_content",
]
