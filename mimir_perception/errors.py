"""Exception classes of the perception core.

Every error a caller can act on has its own class; all derive from :class:`PerceptionError`
so a node can catch the family in one place and report the specific reason.
"""

from __future__ import annotations


class PerceptionError(Exception):
    """Base class of every error raised by ``mimir_perception``."""


class VocabularyError(PerceptionError):
    """A prompt vocabulary file is missing, unreadable or malformed."""


class SegmentationError(PerceptionError):
    """A segmentation input or result is invalid (shape, dtype, table mismatch)."""


class ModelNotFoundError(SegmentationError):
    """The configured segmentation model path does not exist or cannot be loaded."""


class ModelInferenceError(SegmentationError):
    """The segmentation model failed while running on an image."""


class IntrinsicsError(PerceptionError):
    """Camera intrinsics are missing, non-finite or inconsistent with an image."""


class DepthError(PerceptionError):
    """A depth image has an unsupported dtype, unit or shape."""


class ImageSizeMismatchError(PerceptionError):
    """Color/segmentation, depth and intrinsics do not describe the same image size."""


class TransformError(PerceptionError):
    """A rigid transform is missing or is not a finite 4x4 homogeneous matrix."""


class PoseOutOfWorkspaceError(TransformError):
    """A camera pose outside the workspace bound (a broken localiser or a hostile peer)."""


class MissingTransformError(TransformError):
    """No camera pose was available for the stamp of an image."""


class SynchronizationError(PerceptionError):
    """A message handed to the synchroniser is invalid (stamp, camera name)."""


class FiducialMapError(PerceptionError):
    """A fiducial map file is missing, unreadable or malformed."""


class FiducialError(PerceptionError):
    """Fiducial detection or pose estimation received invalid input."""


class ZedUnavailableError(PerceptionError):
    """The Stereolabs ZED SDK (``pyzed.sl``) is not installed or a camera cannot be opened."""


class ZedFrameError(PerceptionError):
    """A frame delivered by the ZED SDK cannot be converted (shape, dtype)."""


class MissingIntrinsicsError(IntrinsicsError):
    """No camera info was available for an image."""


class InsufficientPointsError(PerceptionError):
    """A mask has fewer valid depth points than the configured minimum."""


class AppearanceError(PerceptionError):
    """A crop or mask that cannot be measured (type, size, too few pixels, a box outside)."""


class AppearanceConfigError(PerceptionError, ValueError):
    """Appearance settings (``config/appearance.yaml``) that are malformed."""
