"""Segmentation, depth deprojection, fiducial localization and camera drivers (ROS-free core).

Modules:
    camera: intrinsics, rigid transforms, projection of map points into images.
    vocabulary: prompt vocabularies (``config/vocabularies/*.yaml``).
    segmentation: segmentation results, backend interface, overlap resolution, sim backend.
    sam3: SAM3 backend through transformers (imports torch; import it explicitly).
    deprojection: masks + depth + pose -> map-frame observations.
    sync: stamp matching of segmentation, depth and camera info.
    fiducials: tag detection, pose estimation and robot localisation.
    zed: optional Stereolabs ZED capture.
"""

from mimir_perception.camera import Intrinsics, project_points
from mimir_perception.deprojection import DeprojectionConfig, Deprojector, FrameObservations
from mimir_perception.segmentation import (
    InstanceInfo,
    SegmentationBackend,
    SegmentationResult,
    SimGroundTruthBackend,
)
from mimir_perception.vocabulary import Vocabulary, load_vocabulary

__all__ = [
    "DeprojectionConfig",
    "Deprojector",
    "FrameObservations",
    "InstanceInfo",
    "Intrinsics",
    "SegmentationBackend",
    "SegmentationResult",
    "SimGroundTruthBackend",
    "Vocabulary",
    "load_vocabulary",
    "project_points",
]
