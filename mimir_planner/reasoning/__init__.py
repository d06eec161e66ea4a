"""Reasoning core: VLM backends, the interaction analyzer and the propose-verify harness.

Free of ROS; nodes convert messages to the records in :mod:`.evidence` and call
:class:`InteractionAnalyzer`.
"""

from mimir_planner.reasoning.analyzer import (
    AnalysisResult,
    InteractionAnalyzer,
    KeyframeRequest,
    PreparedInteraction,
    claims_from_answer,
)
from mimir_planner.reasoning.answer_schema import (
    AnalyzerAnswer,
    extract_json,
    parse_analyzer_answer,
)
from mimir_planner.reasoning.backends import make_backend
from mimir_planner.reasoning.claims import (
    Claim,
    ClaimKind,
    ContentClaim,
    ContentItem,
    ContentsUpdate,
    Decision,
    EmptyClaim,
    GroundingClaim,
    OutcomeClaim,
    OutcomeUpdate,
    PropertyClaim,
    PropertyUpdate,
    Verdict,
)
from mimir_planner.reasoning.config import ReasoningConfig, load_reasoning_config, with_model
from mimir_planner.reasoning.evidence import (
    ActionWindow,
    CameraFrame,
    ClaimContext,
    Detection3D,
    DisplacementMeasurement,
    Evidence,
    PrimitiveRecord,
    RobotStateSample,
)
from mimir_planner.reasoning.harness import Harness, HarnessResult, PendingQueue
from mimir_planner.reasoning.offline import OFFLINE_NAME, OfflineReasoner
from mimir_planner.reasoning.openai_backend import OpenAICompatibleBackend
from mimir_planner.reasoning.prompts import PromptLibrary, PromptTemplate
from mimir_planner.reasoning.transformers_backend import TransformersVlmBackend
from mimir_planner.reasoning.vlm import (
    ChatMessage,
    ImagePart,
    TextPart,
    VlmBackend,
    VlmRequest,
    VlmResponse,
)
from mimir_planner.reasoning.world_view import (
    Box3D,
    InMemoryWorld,
    NodeSnapshot,
    NodeView,
    WorldView,
)

__all__ = [
    "OFFLINE_NAME",
    "ActionWindow",
    "AnalysisResult",
    "AnalyzerAnswer",
    "Box3D",
    "CameraFrame",
    "ChatMessage",
    "Claim",
    "ClaimContext",
    "ClaimKind",
    "ContentClaim",
    "ContentItem",
    "ContentsUpdate",
    "Decision",
    "Detection3D",
    "DisplacementMeasurement",
    "EmptyClaim",
    "Evidence",
    "GroundingClaim",
    "Harness",
    "HarnessResult",
    "ImagePart",
    "InMemoryWorld",
    "InteractionAnalyzer",
    "KeyframeRequest",
    "NodeSnapshot",
    "NodeView",
    "OfflineReasoner",
    "OpenAICompatibleBackend",
    "OutcomeClaim",
    "OutcomeUpdate",
    "PendingQueue",
    "PreparedInteraction",
    "PrimitiveRecord",
    "PromptLibrary",
    "PromptTemplate",
    "PropertyClaim",
    "PropertyUpdate",
    "ReasoningConfig",
    "RobotStateSample",
    "TextPart",
    "TransformersVlmBackend",
    "Verdict",
    "VlmBackend",
    "VlmRequest",
    "VlmResponse",
    "WorldView",
    "claims_from_answer",
    "extract_json",
    "load_reasoning_config",
    "make_backend",
    "parse_analyzer_answer",
    "with_model",
]
