"""The attributes IntraBench measures for every target, with their units and definitions.

A result row carries each one as the column ``attr_<name>``. ``grouping`` says how the
stratified tables split targets by it: ``tertiles`` (low/mid/high thirds of the dataset's
targets), ``presence`` (no/yes, for true/false attributes) or ``none`` (a count whose
presence is another attribute).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Grouping = Literal["tertiles", "presence", "none"]


@dataclass(frozen=True)
class AttributeSpec:
    """One target attribute of the catalogue.

    Attributes:
        name: Its name, also the column suffix (``attr_<name>``).
        unit: Its unit as shown (``ml``, ``HU``, or ``""`` for a ratio).
        grouping: How targets are grouped by it: ``tertiles``, ``presence`` or ``none``.
        definition: How it is computed, in one line for the docs and reports.
        per_image: True when measured per image (the same value for every target of a case).
    """

    name: str
    unit: str
    grouping: Grouping
    definition: str
    #: measured per image (the same value for every target of a case)
    per_image: bool = False

    @property
    def column(self) -> str:
        """The results column that holds the attribute: ``attr_<name>``."""
        return f"attr_{self.name}"


ATTRIBUTES: tuple[AttributeSpec, ...] = (
    AttributeSpec("volume_ml", "ml", "tertiles", "target voxels x voxel volume / 1000"),
    AttributeSpec("coverage_image", "fraction", "tertiles", "target voxels / image voxels"),
    AttributeSpec(
        "coverage_body",
        "fraction",
        "tertiles",
        "target voxels / body voxels (CT only: HU > -500, largest region, holes "
        "filled per slice; empty for MR)",
    ),
    AttributeSpec("components", "count", "none", "connected regions (26-connectivity)"),
    AttributeSpec("multiple_regions", "true/false", "presence", "components > 1"),
    AttributeSpec(
        "cavities",
        "count",
        "none",
        "enclosed background regions in 3D (6-connectivity), e.g. a necrotic core "
        "closed on all sides",
    ),
    AttributeSpec(
        "slices_with_holes",
        "slices",
        "none",
        "axial slices on which the target encloses background in 2D (4-connectivity)",
    ),
    AttributeSpec("has_holes", "true/false", "presence", "slices_with_holes > 0"),
    AttributeSpec(
        "com_z",
        "fraction",
        "tertiles",
        "centre of mass along z (axial slice index) / (slices - 1): 0 first slice, 1 last",
    ),
    AttributeSpec("com_y", "fraction", "tertiles", "centre of mass along y / (rows - 1)"),
    AttributeSpec("com_x", "fraction", "tertiles", "centre of mass along x / (columns - 1)"),
    AttributeSpec(
        "surface_mm2",
        "mm^2",
        "tertiles",
        "area of the marching-cubes surface (level 0.5, in mm), Taubin-smoothed "
        "(20 passes, lambda 0.5, mu -0.53) to remove the voxel staircase",
    ),
    AttributeSpec(
        "sphericity",
        "1",
        "tertiles",
        "Wadell's sphericity pi^(1/3) (6 V)^(2/3) / A (the cube root of the isoperimetric "
        "quotient), V in mm^3 from the voxels, "
        "A = surface_mm2: 1 sphere, 0.806 cube, lower for irregular boundaries",
    ),
    AttributeSpec(
        "elongation",
        "1",
        "tertiles",
        "longest / shortest principal axis (sqrt of the largest / smallest eigenvalue "
        "of the voxel positions' covariance in mm): 1 sphere, a/c for an ellipsoid",
    ),
    AttributeSpec(
        "extent_slices",
        "slices",
        "tertiles",
        "axial slices from the target's first to its last, both included",
    ),
    AttributeSpec(
        "contrast",
        "image units",
        "tertiles",
        "mean inside - mean of the unlabelled voxels within 3 mm outside",
    ),
    AttributeSpec(
        "cnr",
        "1",
        "tertiles",
        "contrast-to-noise ratio: |contrast| / standard deviation in that shell",
    ),
    AttributeSpec(
        "heterogeneity",
        "image units",
        "tertiles",
        "standard deviation of the intensities inside the target",
    ),
    AttributeSpec(
        "touches_border",
        "true/false",
        "presence",
        "the target reaches a face of the image (it may continue outside the scan)",
    ),
    AttributeSpec(
        "spacing_anisotropy", "1", "tertiles", "largest / smallest voxel side", per_image=True
    ),
    AttributeSpec(
        "noise",
        "image units",
        "tertiles",
        "noise standard deviation (Immerkaer 1996: Laplacian-difference response on 16 "
        "axial slices, median)",
        per_image=True,
    ),
)

BY_NAME: dict[str, AttributeSpec] = {spec.name: spec for spec in ATTRIBUTES}
COLUMNS: tuple[str, ...] = tuple(spec.column for spec in ATTRIBUTES)
